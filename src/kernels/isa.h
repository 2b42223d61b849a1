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
