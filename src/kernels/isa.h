// Instruction-set variants of the SIMD kernels. One binary carries every
// variant its target architecture can have; the fastest one the CPU supports
// is chosen at run time (CPUID, including the OS's register-state support).
#pragma once

#include <string_view>
#include <vector>

namespace tokamak::kernels {

// In increasing order of capability on x86-64; each level includes the ones
// below it. kNeon is the only vector level of an AArch64 build.
enum class Isa {
  kScalar,      // portable C++; the reference every variant is tested against
  kAvx2,        // AVX2 + FMA + F16C + BMI2 (Haswell, Zen 1 and later)
  kAvx512,      // + AVX-512 F/BW/VL/DQ (Skylake-X)
  kAvx512Vnni,  // + AVX-512 VNNI (Ice Lake, Zen 4)
  kAvx512Bf16,  // + AVX-512 BF16 (Cooper Lake, Sapphire Rapids, Zen 4)
  kNeon,        // AArch64 Advanced SIMD
};

std::string_view isa_name(Isa isa);
// True when this binary has the variant and this CPU can run it.
bool isa_supported(Isa isa);
// The most capable supported variant.
Isa best_isa();
// Every supported variant, kScalar first.
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
