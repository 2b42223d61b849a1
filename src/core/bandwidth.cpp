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

// Four independent accumulators keep enough loads in flight for the memory
// system, not the xors, to be the limit. The loads must be as wide as the
// kernels' (which the widest ISA of the CPU runs): on the reference Zen 4
// machine 2 threads read 70 GB/s with 64-byte loads but ~45 GB/s with the
// 16-byte loads of baseline x86-64, which made kernels look faster than
// their roofline.
using Lanes16 = uint64_t __attribute__((vector_size(16)));
using Lanes32 = uint64_t __attribute__((vector_size(32)));
using Lanes64 = uint64_t __attribute__((vector_size(64)));

// Always inlined: an out-of-line instantiation is compiled for baseline
// x86-64 whatever its caller's target, and read_piece_avx512 then ran 16-byte
// loads with the accumulators on the stack (measured on a Xeon with AVX-512:
// 16 GB/s, where the decode kernels streamed 21).
template <class Lanes>
struct Reader {
  [[gnu::always_inline]] static inline uint64_t read(const std::byte* p, size_t n) {
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
    for (size_t k = 0; k < sizeof(Lanes) / 8; ++k) sum ^= all[k];
    return sum;
  }
};

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) uint64_t read_piece_avx512(const std::byte* p, size_t n) {
  return Reader<Lanes64>::read(p, n);
}
__attribute__((target("avx2"))) uint64_t read_piece_avx2(const std::byte* p, size_t n) { return Reader<Lanes32>::read(p, n); }
#endif

using PieceReader = uint64_t (*)(const std::byte*, size_t);

PieceReader widest_reader() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return read_piece_avx512;
  if (__builtin_cpu_supports("avx2")) return read_piece_avx2;
#endif
  return Reader<Lanes16>::read;
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
  const PieceReader read_piece = widest_reader();
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
