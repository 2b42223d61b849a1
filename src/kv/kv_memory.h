// The KV cache's memory budget: a size in bytes, or a fraction of the memory
// available now (like vLLM's gpu_memory_utilization), turned into a block count.
#pragma once

#include <cstdint>
#include <string_view>

#include "kv/kv_layout.h"

namespace tokamak::kv {

struct KvMemory {
  int64_t bytes = 0;      // used when > 0
  double fraction = 0.0;  // else this fraction of available_memory_bytes(), in (0, 1]
};

// "1073741824", "512M", "4G", "4GiB", "1.5G" (binary units K, M, G, T, with an
// optional "iB" or "B"), or "80%". Throws tokamak::Error quoting the text.
KvMemory parse_kv_memory(std::string_view text);

// memory_available_bytes (core/memory_info.h). Throws tokamak::Error when
// /proc/meminfo has no well-formed MemAvailable line.
int64_t available_memory_bytes();

// The budget in bytes (a fraction is resolved against available_memory_bytes()).
int64_t resolve_kv_memory(const KvMemory& memory);

// Whole blocks of `layout` that fit in `bytes`. Throws tokamak::Error naming
// both sizes when not even one block fits, or the count exceeds 2^31 - 1.
int32_t blocks_for_bytes(const KvLayout& layout, int64_t bytes);

}  // namespace tokamak::kv
