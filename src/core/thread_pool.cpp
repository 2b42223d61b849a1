#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/error.h"

namespace tokamak {
namespace {

// How long a thread spins before it sleeps. Longer than the serial work
// between two jobs of a decode step (norms, RoPE, quantizing activations:
// tens of microseconds), far shorter than a scheduler time slice.
constexpr std::chrono::microseconds kSpin{100};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until pred() or kSpin has passed; returns pred().
template <typename Pred>
bool spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return pred();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1) throw Error("thread count must be >= 1, got " + std::to_string(n_threads));
  claimed_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(n_threads));
  for (int i = 0; i < n_threads; ++i) claimed_[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

// A range is claimed at most once per job: the first claimant moves its tag
// from an older generation to this one. A worker that read an old generation
// and wakes up late fails here, since that job cannot have ended with its
// range unclaimed.
bool ThreadPool::try_claim(int range, uint64_t generation) {
  std::atomic<uint64_t>& tag = claimed_[static_cast<size_t>(range)];
  uint64_t seen = tag.load(std::memory_order_relaxed);
  return seen < generation && tag.compare_exchange_strong(seen, generation, std::memory_order_acq_rel);
}

void ThreadPool::run_claimed(int range) {
  const int64_t chunk = (n_ + n_ranges_ - 1) / n_ranges_;
  const int64_t begin = std::min<int64_t>(n_, chunk * range);
  const int64_t end = std::min<int64_t>(n_, begin + chunk);
  if (begin < end) thunk_(ctx_, begin, end, range);
  if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_all();
}

void ThreadPool::run(int64_t n, int n_ranges, Thunk thunk, void* ctx) {
  n_ranges_ = n_ranges;
  thunk_ = thunk;
  ctx_ = ctx;
  n_ = n;
  remaining_.store(n_threads_, std::memory_order_relaxed);
  const uint64_t generation = generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  generation_.notify_all();
  for (int range = 0; range < n_threads_; ++range) {
    if (try_claim(range, generation)) run_claimed(range);
  }
  if (!spin_until([this] { return remaining_.load(std::memory_order_acquire) == 0; })) {
    for (int left = remaining_.load(std::memory_order_acquire); left != 0; left = remaining_.load(std::memory_order_acquire)) {
      remaining_.wait(left, std::memory_order_acquire);
    }
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      generation_.wait(seen, std::memory_order_acquire);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    if (try_claim(index, seen)) run_claimed(index);
  }
}

}  // namespace tokamak
