// What the machine has to give: one reading of /proc/meminfo for every rule
// that sizes memory from it (the KV cache's percentage, the model file's
// huge-page copy, widened weights).
#pragma once

#include <cstdint>
#include <optional>

namespace tokamak {

// MemAvailable of /proc/meminfo in bytes: the kernel's estimate of what can
// be allocated without swapping (free memory, and the page cache and slabs it
// can reclaim). nullopt where the file or a well-formed line is missing.
std::optional<int64_t> memory_available_bytes();

}  // namespace tokamak
