#include "cli/model_source.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli/args.h"
#include "cli/embedded_model.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/hub.h"
#include "io/llama2c.h"

namespace tokamak::cli {

namespace {

std::filesystem::path fetch_with_progress(const io::HubFile& file, const io::HubOptions& options) {
  ProgressBar bar(file.file);
  std::filesystem::path path = io::hub_fetch(file, options, bar.callback());
  bar.finish();
  return path;
}

// Without -m/-hf: the default hub model when cached or downloadable, else the
// embedded toy model with one line on stderr that says why and what to do.
std::filesystem::path default_model_path(io::HubOptions options) {
  const io::HubFile file = io::default_hub_file();
  // A machine without a network should reach the fallback within seconds.
  options.limits.connect_timeout_s = std::min(options.limits.connect_timeout_s, kDefaultConnectTimeoutS);
  try {
    return fetch_with_progress(file, options);
  } catch (const Error& e) {
    const std::filesystem::path embedded = embedded_model_path();
    std::fprintf(stderr,
                 "tokamak: running the embedded toy model %s (260K parameters): the default model %s:%s is not "
                 "cached and was not downloaded (%s). For a real model pass -m FILE.gguf or -hf REPO:FILE\n",
                 embedded.c_str(), file.repo.c_str(), file.file.c_str(), e.what());
    return embedded;
  }
}

}  // namespace

std::filesystem::path resolve_model_path(const ParsedArgs& args) {
  if (std::optional<std::string> m = args.get("--model")) {
    if (m->empty()) {
      throw UsageError("option -m: the model path is empty; give a GGUF file or a llama2.c .bin, or leave -m out "
                       "for the default model");
    }
    if (args.has("-hf")) throw UsageError("pass either -m or -hf, not both");
    return *m;
  }
  const io::HubOptions options = io::hub_options_from_env([](const char* name) { return std::getenv(name); });
  if (std::optional<std::string> spec = args.get("-hf")) return fetch_with_progress(io::parse_hf_spec(*spec), options);
  return default_model_path(options);
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
