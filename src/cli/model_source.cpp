#include "cli/model_source.h"

#include <cstdlib>

#include "cli/args.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/hub.h"
#include "io/llama2c.h"

namespace tokamak::cli {

std::filesystem::path resolve_model_path(const ParsedArgs& args) {
  if (std::optional<std::string> m = args.get("--model")) {
    if (m->empty()) {
      throw UsageError("option -m: the model path is empty; give a GGUF file or a llama2.c .bin, or leave -m out "
                       "for the default model");
    }
    if (args.has("-hf")) throw UsageError("pass either -m or -hf, not both");
    return *m;
  }
  io::HubFile file{std::string(io::kDefaultHubRepo), std::string(io::kDefaultHubFile)};
  if (std::optional<std::string> spec = args.get("-hf")) file = io::parse_hf_spec(*spec);
  const io::HubOptions options = io::hub_options_from_env([](const char* name) { return std::getenv(name); });
  const std::filesystem::path cached = io::hub_cache_path(options, file);
  if (std::filesystem::exists(cached)) return cached;
  ProgressBar bar(file.file);
  std::filesystem::path path = io::hub_fetch(file, options, bar.callback());
  bar.finish();
  return path;
}

Tokenizer load_tokenizer(const Model& model, const std::filesystem::path& model_path,
                         const std::optional<std::string>& tokenizer_path) {
  if (model.format() == ModelFormat::Gguf) {
    if (tokenizer_path) throw Error("-z/--tokenizer is for llama2.c checkpoints; a GGUF file carries its own vocabulary");
    Tokenizer tokenizer = Tokenizer::from_gguf(*model.gguf());
    if (tokenizer.n_vocab() != model.config().n_vocab) {
      throw Error(model_path.string() + ": the tokenizer has " + std::to_string(tokenizer.n_vocab()) +
                  " tokens but the model " + std::to_string(model.config().n_vocab));
    }
    return tokenizer;
  }
  std::filesystem::path path;
  if (tokenizer_path) {
    path = *tokenizer_path;
  } else {
    path = model_path.parent_path() / "tokenizer.bin";
    if (!std::filesystem::exists(path)) {
      throw Error(model_path.string() + " is a llama2.c checkpoint: pass its tokenizer with -z tokenizer.bin");
    }
  }
  return Tokenizer::from_llama2c(io::load_llama2c_tokenizer(path, model.config().n_vocab));
}

}  // namespace tokamak::cli
