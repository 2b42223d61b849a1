// A persistent pool of worker threads for data-parallel kernels.
// parallel_for splits [0, n) into one contiguous range per thread; the caller
// runs range 0 itself. Workers spin briefly after each job (a decode step
// issues many small jobs back to back) and then sleep on a condition variable.
// No allocation per job.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
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

  // Calls fn(begin, end, thread_index) on disjoint ranges covering [0, n),
  // giving each thread at least `grain` items (small jobs cost less on one
  // thread than the wake-up of another). Ranges depend only on n, grain and
  // size(), never on timing.
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    const int64_t useful = (n + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1);
    const int n_used = static_cast<int>(std::min<int64_t>(n_threads_, useful));
    if (n_used == 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    run(n, n_used, [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<Fn*>(ctx))(b, e, t); }, &fn);
  }

 private:
  using Thunk = void (*)(void*, int64_t, int64_t, int);
  void run(int64_t n, int n_used, Thunk thunk, void* ctx);
  void worker_loop(int index);
  void run_range(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // The current job; written before generation_ is bumped.
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int n_used_ = 1;  // threads that get a range; the others skip the job
};

}  // namespace tokamak
