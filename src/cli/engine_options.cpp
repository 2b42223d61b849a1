#include "cli/engine_options.h"

#include <iterator>
#include <string>

#include "core/error.h"
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
  return o;
}

}  // namespace tokamak::cli
