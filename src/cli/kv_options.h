// The KV cache flags shared by the commands that run a model: element types
// (for K and V together or apart), the f16 recent window, the block size and
// the memory budget. A command lists kKvCacheOptions' rows in its own table.
#pragma once

#include <cstdint>

#include "cli/args.h"
#include "kv/kv_layout.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace tokamak::cli {

inline constexpr OptionSpec kKvCacheOptions[] = {
    {"--kv-type", "TYPE", "KV cache element type for K and V: f32, f16, bf16, q8, q4 (default f16; f32 with --rng llama2c)"},
    {"--kv-type-k", "TYPE", "element type of K only (overrides --kv-type)"},
    {"--kv-type-v", "TYPE", "element type of V only (overrides --kv-type)"},
    {"--kv-recent", "N", "keep the newest N positions in f16 beside q8/q4 storage (default 0)"},
    {"--block-size", "N", "KV cache block size in tokens (default 16)"},
    {"--kv-memory", "BYTES|PCT",
     "KV cache memory: a size (4G, 512M) or a share of free RAM (80%); default: what -c needs"},
};

// The KV format the flags ask for, starting from `defaults`. Throws
// tokamak::Error naming the flag and value for an unknown type or bad number.
kv::KvFormat kv_format_from_args(const ParsedArgs& args, const kv::KvFormat& defaults = {});
// For run and chat: kv_format_from_args with f32 K and V by default under
// --rng llama2c, whose reproduction of llama2.c's tokens needs llama2.c's f32
// cache (rounding K/V to f16 moves logits enough to flip sampled tokens).
kv::KvFormat kv_format_for_sampling(const ParsedArgs& args, const sampling::SamplingParams& params);
// -c, defaulting to the model's training context capped at 4096. Above the
// training context it warns on stderr (quality degrades past it) and goes on.
int32_t context_size(const ParsedArgs& args, const ModelConfig& config);
// --kv-memory in bytes (a percentage resolved against free RAM now); 0 when absent.
int64_t kv_memory_from_args(const ParsedArgs& args);

}  // namespace tokamak::cli
