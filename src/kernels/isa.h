// Instruction-set variants of the SIMD kernels. One binary carries every
// variant its target architecture can have; the fastest one the CPU supports
// is chosen at run time (CPUID, including the OS's register-state support).
// Each SIMD variant lives in its own files, compiled inside a target region
// (TOKAMAK_TARGET_REGION_* below), so the library builds for baseline x86-64.
// A caller chooses once (best_isa()) and passes the choice down; tests run
// every supported variant against the references.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace tokamak::kernels {

// In increasing order of capability on x86-64; each level includes the ones
// below it, but that kAvxVnni is a side branch of kAvx2: the AVX-512 levels
// do not imply it (Skylake-X and Ice Lake lack it), so a CPU with both
// takes the AVX-512 ones. kNeon is the only vector level of an AArch64 build.
enum class Isa {
  kScalar,      // portable C++; the reference every variant is tested against
  kAvx2,        // AVX2 + FMA + F16C + BMI2 (Haswell, Zen 1 and later)
  kAvxVnni,     // + AVX-VNNI, VPDPBUSD / VPDPWSSD on 256 bits (Alder Lake and later Intel client CPUs, Zen 5)
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

// Bytes of this CPU's L2 cache per core as the C library reports it (CPUID on
// x86); 0 where it does not know.
size_t l2_cache_bytes();

}  // namespace tokamak::kernels

// Function-level target attributes: AVX2 variants assume FMA, F16C and BMI2
// too (every AVX2 CPU has them); AVX-512 variants assume F, BW, VL and DQ
// (every AVX-512 server CPU since Skylake-SP).
#define TOKAMAK_ISA_AVX2 "avx2,fma,f16c,bmi2"
#define TOKAMAK_ISA_AVX_VNNI TOKAMAK_ISA_AVX2 ",avxvnni"
#define TOKAMAK_ISA_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi2"
#define TOKAMAK_ISA_AVX512_VNNI TOKAMAK_ISA_AVX512 ",avx512vnni"
#define TOKAMAK_ISA_AVX512_BF16 TOKAMAK_ISA_AVX512_VNNI ",avx512bf16"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TOKAMAK_HAVE_X86_SIMD 1
#define TOKAMAK_TARGET_AVX2 __attribute__((target(TOKAMAK_ISA_AVX2)))
#define TOKAMAK_TARGET_AVX512 __attribute__((target(TOKAMAK_ISA_AVX512)))
#else
#define TOKAMAK_HAVE_X86_SIMD 0
#endif

// A target region: every function defined between TOKAMAK_TARGET_REGION_* and
// TOKAMAK_TARGET_REGION_END gets the target attribute, templates and their
// instantiations included. Include every header before opening a region, so
// that no inline function shared with other files is compiled for the target.
#define TOKAMAK_PRAGMA(x) _Pragma(#x)
#if TOKAMAK_HAVE_X86_SIMD && defined(__clang__)
#define TOKAMAK_TARGET_REGION(isa) TOKAMAK_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define TOKAMAK_TARGET_REGION_END _Pragma("clang attribute pop")
#elif TOKAMAK_HAVE_X86_SIMD
// GCC 12's _mm512_cast*256*512 read an "undefined" register on purpose (GCC
// bug 105593); its -Wuninitialized warnings are noise inside the regions.
#define TOKAMAK_TARGET_REGION(isa)                                                                     \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")               \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") _Pragma("GCC push_options") \
          TOKAMAK_PRAGMA(GCC target(isa))
#define TOKAMAK_TARGET_REGION_END _Pragma("GCC pop_options") _Pragma("GCC diagnostic pop")
#endif
#define TOKAMAK_TARGET_REGION_AVX2 TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX2)
#define TOKAMAK_TARGET_REGION_AVX512 TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX512)
