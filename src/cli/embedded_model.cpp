#include "cli/embedded_model.h"

#include <string>
#include <system_error>

#include "core/error.h"

// Both set by CMakeLists.txt for this file alone.
#ifndef TOKAMAK_INSTALLED_MODEL_DIR
#error "TOKAMAK_INSTALLED_MODEL_DIR (datadir/tokamak relative to bindir) must be defined"
#endif
#ifndef TOKAMAK_SOURCE_MODEL_DIR
#error "TOKAMAK_SOURCE_MODEL_DIR (<source tree>/models) must be defined"
#endif

namespace tokamak::cli {

namespace {
constexpr const char* kEmbeddedModelFile = "stories260K.gguf";
}  // namespace

std::filesystem::path embedded_model_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path installed =
      ec ? fs::path() : (exe.parent_path() / TOKAMAK_INSTALLED_MODEL_DIR / kEmbeddedModelFile).lexically_normal();
  if (!installed.empty() && fs::is_regular_file(installed, ec)) return installed;
  const fs::path source = fs::path(TOKAMAK_SOURCE_MODEL_DIR) / kEmbeddedModelFile;
  if (fs::is_regular_file(source, ec)) return source;
  throw Error("the embedded model " + std::string(kEmbeddedModelFile) + " is in neither " +
              (installed.empty() ? std::string("<no /proc/self/exe>") : installed.string()) + " nor " +
              source.string() + " (install tokamak with cmake --install, or pass a model file with -m PATH)");
}

}  // namespace tokamak::cli
