// The embedded default model: models/stories260K.gguf, a 260K-parameter toy
// (llama2.c's TinyStories model, MIT; models/README.md) that ships with
// tokamak, so that `tokamak run` generates text on a machine without a network.
#pragma once

#include <filesystem>

namespace tokamak::cli {

// Where the file is, looked for in this order:
//   1. <folder of this executable>/../share/tokamak   (an installed tokamak;
//      the relative path is CMake's, from the install bindir to the datadir)
//   2. <source tree>/models                            (a build folder)
// Throws tokamak::Error naming both places when neither has it.
std::filesystem::path embedded_model_path();

}  // namespace tokamak::cli
