// A persistent pool of worker threads for data-parallel kernels.
//
// parallel_for splits [0, n) into one contiguous range per thread. Range i
// belongs to worker i, but whoever gets to it first runs it: the caller runs
// range 0 and then every range whose worker has not claimed it yet. So a job
// never waits for a worker that is not running (asleep, or descheduled on a
// machine with more runnable threads than cores); it only waits for ranges
// already being run. A decode step issues ~100 small jobs back to back, so
// idle workers spin for a while (kSpin in the .cpp) before they sleep, and so
// does the caller waiting for ranges in flight; both then block on futexes
// (std::atomic::wait). No allocation per job.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace tokamak {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads, the caller included; >= 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, index) on disjoint ranges covering [0, n); index in
  // [0, size()) names the range (ranges depend only on n, grain and size(),
  // never on timing). Two calls running at the same time never share an
  // index, so scratch indexed by it is private to the call. A job is cut into
  // at most ceil(n / grain) equal ranges (the last may be shorter), so each
  // other range holds more than grain / 2 items; a job of n <= grain, too
  // small to pay for a second thread's wake-up, runs on the caller alone.
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    const int64_t g = grain < 1 ? 1 : grain;
    if (n_threads_ == 1 || n <= g) {
      fn(int64_t{0}, n, 0);
      return;
    }
    const int64_t useful = (n + g - 1) / g;
    const int n_ranges = useful < n_threads_ ? static_cast<int>(useful) : n_threads_;
    run(n, n_ranges, [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<Fn*>(ctx))(b, e, t); }, &fn);
  }

 private:
  using Thunk = void (*)(void*, int64_t, int64_t, int);
  void run(int64_t n, int n_ranges, Thunk thunk, void* ctx);
  void worker_loop(int index);
  bool try_claim(int range, uint64_t generation);
  void run_claimed(int range);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};  // of the current job; bumped once per job (and at shutdown)
  std::atomic<int> remaining_{0};        // ranges of the current job not finished yet
  std::unique_ptr<std::atomic<uint64_t>[]> claimed_;  // per range: the last generation it was claimed in
  std::atomic<bool> stop_{false};
  // The current job; written before generation_ is bumped.
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int n_ranges_ = 1;  // ranges [n_ranges_, size()) of the job are empty
};

}  // namespace tokamak
