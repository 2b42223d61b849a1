// Instruction sets the SIMD kernels are built for, and which ones this CPU runs.
// Each SIMD variant lives in its own file whose functions carry a target
// attribute (TOKAMAK_TARGET_*), so the library builds for baseline x86-64 and
// picks a variant at run time. A caller chooses once (best_isa()) and passes
// the choice down; tests run every supported variant against the references.
#pragma once

#include <string_view>
#include <vector>

namespace tokamak::kernels {

enum class Isa { Scalar, Avx2, Avx512 };

std::string_view isa_name(Isa isa);  // "scalar", "avx2", "avx512"
// True when this CPU can run the variant (and the build has it).
bool isa_supported(Isa isa);
// The widest supported variant.
Isa best_isa();
// Every supported variant, narrowest first.
std::vector<Isa> supported_isas();

}  // namespace tokamak::kernels

// Function-level target attributes: AVX2 variants assume FMA and F16C too
// (every AVX2 CPU has them); AVX-512 variants assume F, BW, VL and DQ (every
// AVX-512 server CPU since Skylake-SP).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TOKAMAK_HAVE_X86_SIMD 1
#define TOKAMAK_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TOKAMAK_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#else
#define TOKAMAK_HAVE_X86_SIMD 0
#endif

// A target region: every function defined between TOKAMAK_TARGET_REGION_* and
// TOKAMAK_TARGET_REGION_END gets the target attribute above, templates and
// their instantiations included. Include every header before opening a region.
#if TOKAMAK_HAVE_X86_SIMD && defined(__clang__)
#define TOKAMAK_TARGET_REGION_AVX2 \
  _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,f16c\"))), apply_to = function)")
#define TOKAMAK_TARGET_REGION_AVX512                                                                            \
  _Pragma(                                                                                                      \
      "clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c\"))), " \
      "apply_to = function)")
#define TOKAMAK_TARGET_REGION_END _Pragma("clang attribute pop")
#elif TOKAMAK_HAVE_X86_SIMD
#define TOKAMAK_TARGET_REGION_AVX2 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c\")")
#define TOKAMAK_TARGET_REGION_AVX512 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c\")")
#define TOKAMAK_TARGET_REGION_END _Pragma("GCC pop_options")
#endif
