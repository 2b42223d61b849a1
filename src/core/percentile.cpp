#include "core/percentile.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace tokamak {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) throw Error("percentile: no samples");
  if (!(p >= 0 && p <= 100)) throw Error("percentile: p = " + std::to_string(p) + " is outside [0, 100]");
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace tokamak
