#include "kernels/isa.h"

namespace tokamak::kernels {
namespace {

#if defined(__x86_64__) || defined(_M_X64)
// libgcc's / compiler-rt's CPU model also checks XGETBV, so AVX and AVX-512
// count as supported only when the OS saves their registers.
bool cpu_has(Isa isa) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool vnni = avx512 && __builtin_cpu_supports("avx512vnni");
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return avx2;
    case Isa::kAvx512: return avx512;
    case Isa::kAvx512Vnni: return vnni;
    case Isa::kAvx512Bf16: return vnni && __builtin_cpu_supports("avx512bf16");
    case Isa::kNeon: return false;
  }
  return false;
}
#elif defined(__aarch64__)
bool cpu_has(Isa isa) { return isa == Isa::kScalar || isa == Isa::kNeon; }
#else
bool cpu_has(Isa isa) { return isa == Isa::kScalar; }
#endif

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Vnni: return "avx512_vnni";
    case Isa::kAvx512Bf16: return "avx512_bf16";
    case Isa::kNeon: return "neon";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
  // CPUID does not change while the process runs; this caches an immutable fact.
  static const bool supported[] = {cpu_has(Isa::kScalar),     cpu_has(Isa::kAvx2),
                                   cpu_has(Isa::kAvx512),     cpu_has(Isa::kAvx512Vnni),
                                   cpu_has(Isa::kAvx512Bf16), cpu_has(Isa::kNeon)};
  return supported[static_cast<int>(isa)];
}

Isa best_isa() {
  for (Isa isa : {Isa::kNeon, Isa::kAvx512Bf16, Isa::kAvx512Vnni, Isa::kAvx512, Isa::kAvx2}) {
    if (isa_supported(isa)) return isa;
  }
  return Isa::kScalar;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16, Isa::kNeon}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

}  // namespace tokamak::kernels
