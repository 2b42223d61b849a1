// `tokamak --version`: what a bug report needs to name the build.
#pragma once

#include <string>

namespace tokamak::cli {

// Lines "tokamak VERSION (commit HASH)", "built with COMPILER, TYPE", and
// "kernels: ISA ISA ... (best: ISA)": the SIMD variants this binary carries
// that this CPU runs, the best of which every command uses.
std::string version_text();

}  // namespace tokamak::cli
