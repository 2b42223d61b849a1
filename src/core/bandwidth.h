// Streaming read bandwidth over memory that already exists (a model's mapped
// weights): the bound on decode speed, since one decode step reads every
// weight once. Measured with the same thread pool the forward pass uses.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/thread_pool.h"

namespace tokamak {

struct ReadBandwidth {
  double bytes_per_s = 0.0;  // of the fastest pass
  double seconds = 0.0;      // the fastest pass
  size_t bytes = 0;          // read per pass
};

// Reads every byte of `ranges` once per pass, each thread a contiguous share
// (pieces of at most 1 MiB, split by ThreadPool::parallel_for), after one
// unmeasured pass that also faults mapped pages in. Returns the fastest of
// `passes` passes (>= 1): the bandwidth the hardware can deliver, which is
// what a roofline needs. Cost: (passes + 1) x the bytes.
ReadBandwidth measure_read_bandwidth(std::span<const std::span<const std::byte>> ranges, ThreadPool& pool,
                                     int passes);

}  // namespace tokamak
