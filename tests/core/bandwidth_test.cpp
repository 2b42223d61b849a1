// measure_read_bandwidth: it reads what it is given and reports a sane rate.
#include <gtest/gtest.h>

#include <vector>

#include "core/bandwidth.h"
#include "core/error.h"

namespace tokamak {
namespace {

TEST(Bandwidth, ReadsEveryRangeAndReportsARate) {
  std::vector<std::byte> a(48u << 20, std::byte{1});
  std::vector<std::byte> b(1000003, std::byte{2});  // odd length: the tail loop
  const std::vector<std::span<const std::byte>> ranges = {a, std::span<const std::byte>(b).subspan(1)};
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const ReadBandwidth r = measure_read_bandwidth(ranges, pool, 3);
    EXPECT_EQ(r.bytes, a.size() + b.size() - 1);
    EXPECT_GT(r.seconds, 0.0);
    EXPECT_NEAR(r.bytes_per_s, static_cast<double>(r.bytes) / r.seconds, 1.0);
    // Above 100 MB/s (any machine), below 10 TB/s (no machine): a broken timer or
    // a read the compiler dropped would leave this range.
    EXPECT_GT(r.bytes_per_s, 1e8);
    EXPECT_LT(r.bytes_per_s, 1e13);
  }
}

TEST(Bandwidth, RejectsNothingToRead) {
  ThreadPool pool(1);
  std::vector<std::byte> a(64);
  const std::vector<std::span<const std::byte>> ranges = {a};
  EXPECT_THROW(measure_read_bandwidth({}, pool, 1), Error);
  EXPECT_THROW(measure_read_bandwidth(ranges, pool, 0), Error);
}

}  // namespace
}  // namespace tokamak
