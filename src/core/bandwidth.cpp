#include "core/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace tokamak {
namespace {

constexpr size_t kPieceBytes = size_t{1} << 20;

// 32 bytes of lanes: the compiler uses the widest loads the target has
// (two SSE2 loads on baseline x86-64), and four independent accumulators keep
// enough loads in flight for the memory system, not the adds, to be the limit.
using Lanes = uint64_t __attribute__((vector_size(32)));

uint64_t read_piece(const std::byte* p, size_t n) {
  Lanes a{}, b{}, c{}, d{};
  size_t i = 0;
  for (; i + 4 * sizeof(Lanes) <= n; i += 4 * sizeof(Lanes)) {
    Lanes x, y, z, w;
    std::memcpy(&x, p + i, sizeof x);  // unaligned-safe load
    std::memcpy(&y, p + i + sizeof(Lanes), sizeof y);
    std::memcpy(&z, p + i + 2 * sizeof(Lanes), sizeof z);
    std::memcpy(&w, p + i + 3 * sizeof(Lanes), sizeof w);
    a ^= x;
    b ^= y;
    c ^= z;
    d ^= w;
  }
  uint64_t sum = 0;
  for (; i < n; ++i) sum += static_cast<uint64_t>(p[i]);
  const Lanes all = a ^ b ^ c ^ d;
  for (int k = 0; k < 4; ++k) sum ^= all[k];
  return sum;
}

}  // namespace

ReadBandwidth measure_read_bandwidth(std::span<const std::span<const std::byte>> ranges, ThreadPool& pool,
                                     int passes) {
  if (passes < 1) throw Error("bandwidth: passes must be >= 1, got " + std::to_string(passes));
  std::vector<std::span<const std::byte>> pieces;
  ReadBandwidth r;
  for (std::span<const std::byte> range : ranges) {
    r.bytes += range.size();
    for (size_t at = 0; at < range.size(); at += kPieceBytes) {
      pieces.push_back(range.subspan(at, std::min(kPieceBytes, range.size() - at)));
    }
  }
  if (pieces.empty()) throw Error("bandwidth: nothing to read");
  // Each thread's result lands in its own cache line, so the reads cannot be
  // optimized away and threads do not share a written line.
  struct alignas(64) Sink {
    uint64_t value = 0;
  };
  std::vector<Sink> sinks(static_cast<size_t>(pool.size()));
  double best = 0.0;
  for (int pass = 0; pass <= passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(static_cast<int64_t>(pieces.size()), [&](int64_t begin, int64_t end, int thread) {
      uint64_t acc = 0;
      for (int64_t i = begin; i < end; ++i) acc += read_piece(pieces[static_cast<size_t>(i)].data(), pieces[static_cast<size_t>(i)].size());
      sinks[static_cast<size_t>(thread)].value += acc;
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pass > 0 && (best == 0.0 || seconds < best)) best = seconds;
  }
  uint64_t check = 0;
  for (const Sink& s : sinks) check ^= s.value;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  asm volatile("" : : "r"(check) : "memory");
  r.seconds = best;
  r.bytes_per_s = best > 0.0 ? static_cast<double>(r.bytes) / best : 0.0;
  return r;
}

}  // namespace tokamak
