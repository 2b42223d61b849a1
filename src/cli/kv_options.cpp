#include "cli/kv_options.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "kv/kv_memory.h"

namespace tokamak::cli {
namespace {

kernels::KvType parse_type(const std::string& flag, const std::string& value) {
  const std::optional<kernels::KvType> t = kernels::kv_type_from_name(value);
  if (!t) throw UsageError("option " + flag + ": unknown KV type '" + value + "' (f32, f16, bf16, q8 or q4)");
  return *t;
}

}  // namespace

kv::KvFormat kv_format_from_args(const ParsedArgs& args, const kv::KvFormat& defaults) {
  kv::KvFormat f = defaults;
  if (const auto t = args.get("--kv-type")) f.k_type = f.v_type = parse_type("--kv-type", *t);
  if (const auto t = args.get("--kv-type-k")) f.k_type = parse_type("--kv-type-k", *t);
  if (const auto t = args.get("--kv-type-v")) f.v_type = parse_type("--kv-type-v", *t);
  f.recent = static_cast<int32_t>(args.get_int("--kv-recent", f.recent, 0, 1 << 20));
  f.block_size = static_cast<int32_t>(args.get_int("--block-size", f.block_size, 1, 4096));
  return f;
}

kv::KvFormat kv_format_for_sampling(const ParsedArgs& args, const sampling::SamplingParams& params) {
  kv::KvFormat defaults;
  if (params.rng == sampling::SamplingParams::Rng::Llama2c) defaults.k_type = defaults.v_type = kernels::KvType::F32;
  return kv_format_from_args(args, defaults);
}

int32_t context_size(const ParsedArgs& args, const ModelConfig& config) {
  const auto n_ctx = static_cast<int32_t>(args.get_int("--ctx-size", std::min(config.n_ctx_train, 4096), 1, 1 << 24));
  if (n_ctx > config.n_ctx_train) {
    std::fprintf(stderr,
                 "warning: -c %d is above the model's training context of %d tokens: text past %d tokens will "
                 "likely degrade\n",
                 n_ctx, config.n_ctx_train, config.n_ctx_train);
  }
  return n_ctx;
}

int64_t kv_memory_from_args(const ParsedArgs& args) {
  const std::optional<std::string> text = args.get("--kv-memory");
  if (!text) return 0;
  kv::KvMemory memory;
  try {
    memory = kv::parse_kv_memory(*text);
  } catch (const Error& e) {  // a malformed value is a usage error; resolving it below is not
    throw UsageError(std::string("option --kv-memory: ") + e.what());
  }
  return kv::resolve_kv_memory(memory);
}

}  // namespace tokamak::cli
