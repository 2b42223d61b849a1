// A download progress line for the command line, fed by io::DownloadProgress.
// On a terminal it redraws one line in place ('\r'), at most every `interval`;
// into a file or pipe it writes a full line at most every `interval` (10x
// longer by default), so logs stay readable. finish() draws the final state
// and ends the line.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "io/hub.h"

namespace tokamak::cli {

// "label  45% [#########.........]  8.6 MB / 19.1 MB  3.2 MB/s"; without a
// total: "label  8.6 MB  3.2 MB/s". `rate` is bytes per second (< 0: unknown).
// With a `unit` the figures are counts of it: "45 / 100 requests  3.2 requests/s".
std::string format_progress(std::string_view label, uint64_t done, uint64_t total, double rate,
                            std::string_view unit = {});

class ProgressBar {
 public:
  // interval 0 means the default: 100 ms on a terminal, 1 s elsewhere.
  // `unit`: as for format_progress (empty: bytes).
  explicit ProgressBar(std::string label, std::FILE* out = stderr,
                       std::chrono::milliseconds interval = std::chrono::milliseconds(0), std::string unit = {});
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { finish(); }

  void update(uint64_t done, uint64_t total);
  // Draws the last state and the newline; once, and only if anything was drawn.
  void finish();
  // A callback for io::hub_fetch that feeds this bar (which must outlive it).
  io::DownloadProgress callback() {
    return [this](uint64_t done, uint64_t total) { update(done, total); };
  }

 private:
  using Clock = std::chrono::steady_clock;
  void draw(Clock::time_point now);

  std::string label_;
  std::string unit_;
  std::FILE* out_;
  bool terminal_;
  std::chrono::milliseconds interval_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  uint64_t first_done_ = 0;  // where this run began (a resumed download starts above 0)
  uint64_t done_ = 0;
  uint64_t drawn_done_ = 0;
  uint64_t total_ = 0;
  bool seen_ = false;
  bool drawn_ = false;
  bool finished_ = false;
};

}  // namespace tokamak::cli
