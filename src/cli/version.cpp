#include "cli/version.h"

#include "kernels/isa.h"

// Set by CMake for this file alone (so that a new commit recompiles one file);
// the commit is the one checked out when the build was configured.
#ifndef TOKAMAK_VERSION
#define TOKAMAK_VERSION "unknown"
#endif
#ifndef TOKAMAK_COMMIT
#define TOKAMAK_COMMIT "unknown"
#endif
#ifndef TOKAMAK_BUILD_TYPE
#define TOKAMAK_BUILD_TYPE "unknown"
#endif

namespace tokamak::cli {
namespace {

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "an unknown compiler";
#endif
}

}  // namespace

std::string version_text() {
  std::string out = "tokamak " TOKAMAK_VERSION " (commit " TOKAMAK_COMMIT ")\n";
  out += "built with " + compiler() + ", " TOKAMAK_BUILD_TYPE "\n";
  out += "kernels:";
  for (const kernels::Isa isa : kernels::supported_isas()) {
    out += ' ';
    out += kernels::isa_name(isa);
  }
  out += " (best: ";
  out += kernels::isa_name(kernels::best_isa());
  out += ")\n";
  return out;
}

}  // namespace tokamak::cli
