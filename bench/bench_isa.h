// The kernel variant a micro-benchmark measures: the one named by
// TOKAMAK_BENCH_ISA (any name isa_name gives, e.g. avx2), else the widest
// this CPU runs, so that one host can time each of its paths.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "kernels/isa.h"

namespace tokamak {

inline kernels::Isa bench_isa() {
  const char* name = std::getenv("TOKAMAK_BENCH_ISA");
  if (name == nullptr) return kernels::best_isa();
  for (kernels::Isa isa : kernels::supported_isas()) {
    if (kernels::isa_name(isa) == name) return isa;
  }
  std::fprintf(stderr, "TOKAMAK_BENCH_ISA=%s: not an ISA this CPU runs\n", name);
  std::exit(2);
}

}  // namespace tokamak
