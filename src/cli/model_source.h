// Where the CLI's model comes from: -m PATH, -hf REPO:FILE, or the default hub
// model; and the tokenizer that goes with it (-z for llama2.c checkpoints).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {

class ParsedArgs;

// The connect timeout of the default model's download (seconds).
inline constexpr long kDefaultConnectTimeoutS = 10;

// -m, else -hf, else the default model; hub files are fetched into the cache
// (progress bar on stderr). The default model is the hub's stories15M-q4_0
// when cached or downloadable (connect timeout kDefaultConnectTimeoutS), else
// the embedded one (embedded_model.h), with one line on stderr saying so.
// Reads HF_ENDPOINT, HF_HUB_OFFLINE, XDG_CACHE_HOME and HOME.
std::filesystem::path resolve_model_path(const ParsedArgs& args);

// GGUF: the file's own vocabulary (an error when its size is not the model's
// n_vocab). llama2.c: the -z file, else tokenizer.bin beside the checkpoint;
// an error says to pass -z when neither exists.
Tokenizer load_tokenizer(const Model& model, const std::filesystem::path& model_path,
                         const std::optional<std::string>& tokenizer_path);

}  // namespace tokamak::cli
