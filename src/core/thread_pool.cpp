#include "core/thread_pool.h"

#include <algorithm>

#include "core/error.h"

namespace tokamak {
namespace {
// About 50 microseconds of spinning before a worker sleeps.
constexpr int kSpinIterations = 20000;
// The caller spins this long for the workers to finish, then yields its core:
// on a machine with more runnable threads than cores, a descheduled worker
// otherwise costs the caller a whole time slice per job.
constexpr int kCallerSpinIterations = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1) throw Error("thread count must be >= 1, got " + std::to_string(n_threads));
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_range(int index) {
  if (index >= n_used_) return;
  const int64_t chunk = (n_ + n_used_ - 1) / n_used_;
  const int64_t begin = std::min<int64_t>(n_, chunk * index);
  const int64_t end = std::min<int64_t>(n_, begin + chunk);
  if (begin < end) thunk_(ctx_, begin, end, index);
}

void ThreadPool::run(int64_t n, int n_used, Thunk thunk, void* ctx) {
  thunk_ = thunk;
  ctx_ = ctx;
  n_ = n;
  n_used_ = n_used;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_range(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kCallerSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    for (int spins = 0; generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations; ++spins) {
      // Yield now and then so that a caller sharing this core can run.
      if (spins % 256 == 255) {
        std::this_thread::yield();
      } else {
        cpu_relax();
      }
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    run_range(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tokamak
