#include "core/memory_info.h"

#include <cctype>
#include <fstream>
#include <string>
#include <string_view>

namespace tokamak {

std::optional<int64_t> memory_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    constexpr std::string_view kKey = "MemAvailable:";
    if (line.compare(0, kKey.size(), kKey) != 0) continue;
    size_t i = kKey.size();
    while (i < line.size() && line[i] == ' ') ++i;
    int64_t kib = 0;
    size_t n = 0;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])) && n < 15) {
      kib = kib * 10 + (line[i] - '0');
      ++i;
      ++n;
    }
    if (n == 0 || line.compare(i, 3, " kB") != 0) break;
    return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace tokamak
