#include "cli/kv_options.h"

#include <string>

#include "core/error.h"
#include "kv/kv_memory.h"

namespace tokamak::cli {
namespace {

kernels::KvType parse_type(const std::string& flag, const std::string& value) {
  const std::optional<kernels::KvType> t = kernels::kv_type_from_name(value);
  if (!t) throw Error("option " + flag + ": unknown KV type '" + value + "' (f32, f16, bf16, q8 or q4)");
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

int64_t kv_memory_from_args(const ParsedArgs& args) {
  const std::optional<std::string> text = args.get("--kv-memory");
  if (!text) return 0;
  return kv::resolve_kv_memory(kv::parse_kv_memory(*text));
}

}  // namespace tokamak::cli
