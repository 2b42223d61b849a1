#include "kv/kv_memory.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/memory_info.h"

namespace tokamak::kv {
namespace {

// Parses a non-negative decimal number ("12", "1.5") filling all of `text`.
bool parse_number(std::string_view text, double& out) {
  if (text.empty() || text.size() > 32) return false;
  int dots = 0;
  for (char c : text) {
    if (c == '.') {
      ++dots;
    } else if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  if (dots > 1 || text == ".") return false;
  out = std::strtod(std::string(text).c_str(), nullptr);
  return std::isfinite(out);
}

}  // namespace

KvMemory parse_kv_memory(std::string_view text) {
  const std::string quoted = "KV memory '" + std::string(text) + "'";
  KvMemory m;
  double value = 0.0;
  if (!text.empty() && text.back() == '%') {
    if (!parse_number(text.substr(0, text.size() - 1), value) || value <= 0.0 || value > 100.0) {
      throw Error(quoted + ": a percentage must be in (0, 100]");
    }
    m.fraction = value / 100.0;
    return m;
  }
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  std::string unit(text.substr(digits));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() == 3 && unit.substr(1) == "IB") unit.resize(1);
  if (unit.size() == 2 && unit[1] == 'B') unit.resize(1);
  double scale = 0.0;
  if (unit.empty() || unit == "B") scale = 1.0;
  if (unit == "K") scale = 1024.0;
  if (unit == "M") scale = 1024.0 * 1024.0;
  if (unit == "G") scale = 1024.0 * 1024.0 * 1024.0;
  if (unit == "T") scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  if (scale == 0.0 || !parse_number(text.substr(0, digits), value)) {
    throw Error(quoted + ": expected a size like 4G, 512M, 1073741824 or a percentage like 80%");
  }
  const double bytes = std::floor(value * scale);
  if (bytes < 1.0 || bytes > 9.0e18) throw Error(quoted + ": size out of range");
  m.bytes = static_cast<int64_t>(bytes);
  return m;
}

int64_t available_memory_bytes() {
  if (const std::optional<int64_t> bytes = memory_available_bytes()) return *bytes;
  throw Error("/proc/meminfo: no MemAvailable line; give the KV memory as a size instead of a percentage");
}

int64_t resolve_kv_memory(const KvMemory& memory) {
  if (memory.bytes > 0) return memory.bytes;
  if (memory.fraction <= 0.0 || memory.fraction > 1.0) {
    throw Error("KV memory: fraction " + std::to_string(memory.fraction) + " outside (0, 1]");
  }
  return static_cast<int64_t>(static_cast<double>(available_memory_bytes()) * memory.fraction);
}

int32_t blocks_for_bytes(const KvLayout& layout, int64_t bytes) {
  layout.validate();
  const int64_t n = bytes / layout.block_bytes();
  if (n < 1) {
    throw Error("KV memory of " + std::to_string(bytes) + " bytes holds no block of " +
                std::to_string(layout.block_bytes()) + " bytes");
  }
  if (n > std::numeric_limits<int32_t>::max()) {
    throw Error("KV memory of " + std::to_string(bytes) + " bytes is more than 2^31 - 1 blocks");
  }
  return static_cast<int32_t>(n);
}

}  // namespace tokamak::kv
