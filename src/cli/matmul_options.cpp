#include "cli/matmul_options.h"

#include <string>

namespace tokamak::cli {

kernels::MatmulOptions matmul_options_from_args(const ParsedArgs& args) {
  kernels::MatmulOptions matmul;
  const std::string mode = args.get_or("--matmul", "native");
  if (mode == "f32") {
    matmul.precision = kernels::MatmulPrecision::kF32;
  } else if (mode != "native") {
    throw UsageError("option --matmul: '" + mode + "' is not one of native, f32");
  }
  return matmul;
}

}  // namespace tokamak::cli
