#include "kernels/isa.h"

#include <unistd.h>

#include <array>
#include <iterator>

#if TOKAMAK_HAVE_X86_SIMD
#include <cpuid.h>
#endif

namespace tokamak::kernels {
namespace {

#if TOKAMAK_HAVE_X86_SIMD
// CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports has no "f16c").
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

// libgcc's / compiler-rt's CPU model also checks XGETBV, so AVX and AVX-512
// count as supported only when the OS saves their registers.
bool cpu_has(Isa isa) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() &&
                    __builtin_cpu_supports("bmi2");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool vnni = avx512 && __builtin_cpu_supports("avx512vnni");
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return avx2;
    case Isa::kAvxVnni: return avx2 && __builtin_cpu_supports("avxvnni");
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

// In the enum's order: best_isa() takes the last one supported.
constexpr Isa kAll[] = {Isa::kScalar,     Isa::kAvx2,       Isa::kAvxVnni, Isa::kAvx512,
                        Isa::kAvx512Vnni, Isa::kAvx512Bf16, Isa::kNeon};
static_assert([] {
  for (size_t i = 0; i < std::size(kAll); ++i) {
    if (static_cast<size_t>(kAll[i]) != i) return false;
  }
  return true;
}(), "kAll lists the enum in order: isa_supported indexes it by value");

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvxVnni: return "avx_vnni";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Vnni: return "avx512_vnni";
    case Isa::kAvx512Bf16: return "avx512_bf16";
    case Isa::kNeon: return "neon";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  // CPUID does not change while the process runs: an immutable fact, computed once.
  static const auto supported = [] {
    std::array<bool, std::size(kAll)> s{};
    for (size_t i = 0; i < s.size(); ++i) s[i] = cpu_has(kAll[i]);
    return s;
  }();
  return supported[static_cast<size_t>(isa)];
}

Isa best_isa() {
  Isa best = Isa::kScalar;
  for (Isa isa : kAll) {
    if (isa_supported(isa)) best = isa;
  }
  return best;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAll) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

size_t l2_cache_bytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
  static const size_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{0};
  }();
  return bytes;
#else
  return 0;
#endif
}

}  // namespace tokamak::kernels
