// Percentiles of a sample, as numpy computes them by default: linear
// interpolation between the closest ranks. Shared by the serving benchmarks
// (latency p50/p90/p99) and perplexity's KL summary.
#pragma once

#include <vector>

namespace tokamak {

// Of a sorted, non-empty sample; p in [0, 100]. Throws tokamak::Error for an
// empty sample or p outside [0, 100].
double percentile(const std::vector<double>& sorted, double p);

}  // namespace tokamak
