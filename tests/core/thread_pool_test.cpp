// The thread pool: every index of [0, n) is visited exactly once per job, in
// the documented ranges, whatever the thread count, across many jobs in a row.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <string>
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

// Many jobs of varying size and grain on pools with more threads than the
// machine has cores, two pools at once from two callers: within every job
// each item is visited exactly once, each index is called at most once and
// never twice at the same time, and the called indices are 0..k-1 with
// contiguous ranges in index order, each (but the last) of more than half
// the grain, and a job within the grain runs as one range.
TEST(ThreadPool, EveryIndexOnceInEveryJobUnderContention) {
  constexpr int kThreads = 5;
  constexpr int kJobs = 5000;
  auto hammer = [](uint64_t seed, std::string& failure) {
    ThreadPool pool(kThreads);
    std::vector<std::atomic<int>> hits(200);
    std::array<std::atomic<int>, kThreads> calls{}, busy{};
    std::atomic<int> overlaps{0};  // calls that found their index already running
    std::array<std::atomic<int64_t>, kThreads> begins{}, ends{};
    for (int job = 0; job < kJobs && failure.empty(); ++job) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      const int64_t n = 1 + static_cast<int64_t>((seed >> 33) % hits.size());
      const int64_t grain = 1 + static_cast<int64_t>((seed >> 20) % 8);
      for (int64_t i = 0; i < n; ++i) hits[static_cast<size_t>(i)].store(0);
      for (int t = 0; t < kThreads; ++t) calls[static_cast<size_t>(t)].store(0);
      pool.parallel_for(
          n,
          [&](int64_t begin, int64_t end, int index) {
            const size_t x = static_cast<size_t>(index);
            if (busy[x].exchange(1) != 0) overlaps.fetch_add(1);
            calls[x].fetch_add(1);
            begins[x].store(begin);
            ends[x].store(end);
            for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
            busy[x].store(0);
          },
          grain);
      const std::string where = " (job " + std::to_string(job) + ", n " + std::to_string(n) + ", grain " +
                                std::to_string(grain) + ")";
      if (overlaps.load() != 0) failure = "two calls ran one index at once" + where;
      for (int64_t i = 0; i < n; ++i) {
        if (hits[static_cast<size_t>(i)].load() != 1) {
          failure = "item " + std::to_string(i) + " visited " + std::to_string(hits[static_cast<size_t>(i)].load()) +
                    " times" + where;
        }
      }
      int64_t next = 0;  // where the range of the next index must begin
      for (int t = 0; t < kThreads && failure.empty(); ++t) {
        const size_t x = static_cast<size_t>(t);
        const int c = calls[x].load();
        if (c > 1) failure = "index " + std::to_string(t) + " called " + std::to_string(c) + " times" + where;
        if (c == 0) {
          if (next != n) failure = "index " + std::to_string(t) + " skipped before item " + std::to_string(next) + where;
          continue;
        }
        if (begins[x].load() != next) failure = "index " + std::to_string(t) + " does not continue at " + std::to_string(next) + where;
        if (ends[x].load() < n && 2 * (ends[x].load() - begins[x].load()) <= grain) failure = "a range of half the grain" + where;
        if (n <= grain && t > 0) failure = "a job within the grain left the caller" + where;
        next = ends[x].load();
      }
    }
  };
  std::string failure_a, failure_b;
  std::thread other([&] { hammer(2, failure_b); });
  hammer(1, failure_a);
  other.join();
  EXPECT_EQ(failure_a, "");
  EXPECT_EQ(failure_b, "");
}

// Two ranges of one job run at the same time on two threads: each waits
// (bounded) until the other has started, which a pool running its ranges one
// after another could never satisfy.
TEST(ThreadPool, RangesOfOneJobRunConcurrently) {
  ThreadPool pool(2);
  constexpr int kJobs = 50;
  int met = 0;
  for (int job = 0; job < kJobs; ++job) {
    std::array<std::atomic<bool>, 2> started{};
    std::array<std::thread::id, 2> thread_of{};
    std::array<bool, 2> saw_other{};
    pool.parallel_for(2, [&](int64_t, int64_t, int index) {
      const size_t me = static_cast<size_t>(index);
      thread_of[me] = std::this_thread::get_id();
      started[me].store(true);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!started[1 - me].load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      saw_other[me] = started[1 - me].load();
    });
    if (saw_other[0] && saw_other[1] && thread_of[0] != thread_of[1]) ++met;
  }
  EXPECT_EQ(met, kJobs);
}

TEST(ThreadPool, RejectsZeroThreads) { EXPECT_THROW(ThreadPool(0), Error); }

}  // namespace
}  // namespace tokamak
