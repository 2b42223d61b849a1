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
  if (const std::optional<std::string> name = args.get("--isa")) {
    std::string runnable;
    for (const kernels::Isa isa : kernels::supported_isas()) {
      if (kernels::isa_name(isa) == *name) {
        matmul.isa = isa;
        return matmul;
      }
      runnable += (runnable.empty() ? "" : ", ") + std::string(kernels::isa_name(isa));
    }
    throw UsageError("option --isa: '" + *name + "' is not a kernel variant this binary and CPU run (" + runnable + ")");
  }
  return matmul;
}

}  // namespace tokamak::cli
