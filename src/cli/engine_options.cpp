#include "cli/engine_options.h"

#include <iterator>
#include <string>

#include "cli/model_source.h"
#include "core/error.h"
#include "engine/draft_proposer.h"
#include "kv/kv_memory.h"

namespace tokamak::cli {

std::vector<OptionSpec> with_engine_options(std::span<const OptionSpec> own) {
  std::vector<OptionSpec> all(own.begin(), own.end());
  all.insert(all.end(), std::begin(kEngineOptions), std::end(kEngineOptions));
  all.push_back({"-h,--help", "", "show this help"});
  return all;
}

engine::EngineOptions engine_options_from_args(const ParsedArgs& args) {
  engine::EngineOptions o;
  o.threads = static_cast<int>(args.get_int("--threads", 0, 1, 1024));
  o.max_model_len = static_cast<int32_t>(args.get_int("--max-model-len", 0, 1, 1 << 24));
  o.max_num_seqs = static_cast<int32_t>(args.get_int("--max-num-seqs", o.max_num_seqs, 1, 1 << 20));
  o.max_num_batched_tokens =
      static_cast<int32_t>(args.get_int("--max-num-batched-tokens", o.max_num_batched_tokens, 1, 1 << 24));
  if (args.has("--enable-prefix-caching") && args.has("--no-prefix-caching")) {
    throw Error("options --enable-prefix-caching and --no-prefix-caching contradict each other");
  }
  o.enable_prefix_caching = !args.has("--no-prefix-caching");
  o.kv_format = kv_format_from_args(args);
  if (const std::optional<std::string> text = args.get("--kv-memory")) {
    try {
      o.kv_memory = kv::parse_kv_memory(*text);
    } catch (const Error& e) {
      throw Error(std::string("option --kv-memory: ") + e.what());
    }
  }
  speculative_options_from_args(args, o.speculative);
  return o;
}

void speculative_options_from_args(const ParsedArgs& args, engine::SpeculativeOptions& o) {
  o.ngram = static_cast<int32_t>(args.get_int("--spec-ngram", 0, 1, 64));
  o.draft_max = static_cast<int32_t>(args.get_int("--draft-max", o.draft_max, 1, 32));
  o.draft_min = static_cast<int32_t>(args.get_int("--draft-min", o.draft_min, 0, 32));
  o.adaptive_depth = !args.has("--draft-fixed");
  // Here, before any model loads; the --draft-model / --spec-ngram clash
  // needs the flags (the draft is not loaded yet).
  if (args.has("--draft-model") && args.has("--spec-ngram")) {
    throw Error("options --draft-model and --spec-ngram both propose tokens: choose one");
  }
  o.validate();
}

std::unique_ptr<Model> load_draft_model(const ParsedArgs& args, const Tokenizer& target, engine::EngineOptions& options) {
  const std::optional<std::string> path = args.get("--draft-model");
  if (!path) return nullptr;
  auto draft = std::make_unique<Model>(Model::load(*path, MapMode::kAuto, options.matmul.isa));
  try {
    engine::check_same_vocabulary(target, load_tokenizer(*draft, *path, std::nullopt));
  } catch (const Error& e) {
    throw Error("--draft-model " + *path + ": " + e.what());
  }
  options.speculative.draft_model = draft.get();
  return draft;
}

}  // namespace tokamak::cli
