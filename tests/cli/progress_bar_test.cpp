// The command line's download progress bar (src/cli/progress_bar.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "cli/progress_bar.h"

namespace tokamak::cli {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  return out;
}

TEST(ProgressBar, FormatsKnownAndUnknownTotals) {
  EXPECT_EQ(format_progress("model.gguf", 9'538'672, 19'077'344, 3'200'000.0),
            "model.gguf   50% [############............]  9.5 MB / 19.1 MB  3.2 MB/s");
  EXPECT_EQ(format_progress("m", 19'077'344, 19'077'344, -1.0), "m  100% [########################]  19.1 MB / 19.1 MB");
  EXPECT_EQ(format_progress("m", 512, 0, -1.0), "m  512 B");
  EXPECT_EQ(format_progress("m", 2'500'000'000, 0, 999.0), "m  2.5 GB  999 B/s");
  // done past total (a server that lied) stays at 100%.
  EXPECT_EQ(format_progress("m", 20, 10, -1.0), "m  100% [########################]  20 B / 10 B");
}

TEST(ProgressBar, FormatsCountsOfAUnit) {
  EXPECT_EQ(format_progress("batch", 45, 100, 3.25, "requests"),
            "batch   45% [##########..............]  45 / 100 requests  3.2 requests/s");
  EXPECT_EQ(format_progress("batch", 7, 0, 2.0, "requests"), "batch  7 requests  2 requests/s");
}

TEST(ProgressBar, ThrottlesAndEndsWithTheFinalState) {
  std::FILE* f = std::tmpfile();  // not a terminal: full lines, no '\r'
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar("m", f, std::chrono::hours(1));
    const io::DownloadProgress cb = bar.callback();
    for (uint64_t done = 1000; done <= 100'000; done += 1000) cb(done, 100'000);
  }  // the destructor finishes
  const std::string out = contents(f);
  std::fclose(f);
  // The first update draws, the rest fall inside the interval, finish() draws the end.
  ASSERT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
  EXPECT_TRUE(out.starts_with("m    1% [")) << out;
  EXPECT_NE(out.find("\nm  100% [########################]  100.0 kB / 100.0 kB"), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

TEST(ProgressBar, SilentWithoutUpdates) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar("m", f);
    bar.finish();
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

}  // namespace
}  // namespace tokamak::cli
