// The thread pool: every index of [0, n) is visited exactly once per job, in
// the documented ranges, whatever the thread count, across many jobs in a row.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace tokamak {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceInFixedRanges) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::atomic<int>> range_of(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t begin, int64_t end, int index) {
        EXPECT_GE(index, 0);
        EXPECT_LT(index, threads);
        for (int64_t i = begin; i < end; ++i) {
          hits[static_cast<size_t>(i)].fetch_add(1);
          range_of[static_cast<size_t>(i)].store(index);
        }
      });
      const int64_t chunk = (n + threads - 1) / threads;
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "threads " << threads << " n " << n << " i " << i;
        if (n > 1) {
          EXPECT_EQ(range_of[static_cast<size_t>(i)].load(), i / chunk);
        }
      }
    }
  }
}

TEST(ThreadPool, ManySmallJobsBackToBackAndSlowRanges) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 2000; ++job) {
    pool.parallel_for(3, [&](int64_t begin, int64_t end, int index) {
      // One range now and then outlasts the spin, so waits go to sleep too.
      if (job % 500 == 0 && index == 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      for (int64_t i = begin; i < end; ++i) sum.fetch_add(i + 1);
    });
    if (job % 700 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // workers fall asleep
  }
  EXPECT_EQ(sum.load(), 2000 * 6);
}

TEST(ThreadPool, RangesOfOneJobRunConcurrentlyWithDistinctIndices) {
  ThreadPool pool(2);
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::vector<int> per_index(2, 0);
  for (int job = 0; job < 200; ++job) {
    pool.parallel_for(2, [&](int64_t, int64_t, int index) {
      const int now = inside.fetch_add(1) + 1;
      int seen = max_inside.load();
      while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
      }
      ++per_index[static_cast<size_t>(index)];  // private to the index: no race
      inside.fetch_sub(1);
    });
  }
  EXPECT_EQ(per_index[0] + per_index[1], 400);
  EXPECT_LE(max_inside.load(), 2);
}

TEST(ThreadPool, RejectsZeroThreads) { EXPECT_THROW(ThreadPool(0), Error); }

}  // namespace
}  // namespace tokamak
