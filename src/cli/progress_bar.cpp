#include "cli/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace tokamak::cli {
namespace {

// Decimal units, as the hub shows file sizes: "19.1 MB".
std::string human_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000.0 && unit < 4) {
    bytes /= 1000.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.1f %s", bytes, kUnits[unit]);
  return buf;
}

// A count of `unit`s: "45", "3.2"; empty unit: bytes, as human_bytes() has them.
std::string amount(double x, std::string_view unit) {
  if (unit.empty()) return human_bytes(x);
  char buf[32];
  std::snprintf(buf, sizeof(buf), std::floor(x) == x ? "%.0f" : "%.1f", x);
  return buf;
}

}  // namespace

std::string format_progress(std::string_view label, uint64_t done, uint64_t total, double rate, std::string_view unit) {
  const std::string suffix = unit.empty() ? "" : " " + std::string(unit);
  constexpr int kWidth = 24;
  std::string line(label);
  if (total > 0) {
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    const int filled = static_cast<int>(frac * kWidth);
    char pct[16];
    std::snprintf(pct, sizeof(pct), "  %3d%% [", static_cast<int>(frac * 100.0));
    line += pct;
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(kWidth - filled), '.');
    line += "]  " + amount(static_cast<double>(done), unit) + " / " + amount(static_cast<double>(total), unit) + suffix;
  } else {
    line += "  " + amount(static_cast<double>(done), unit) + suffix;
  }
  if (rate >= 0.0) line += "  " + amount(rate, unit) + suffix + "/s";
  return line;
}

ProgressBar::ProgressBar(std::string label, std::FILE* out, std::chrono::milliseconds interval, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      out_(out),
      terminal_(::isatty(::fileno(out)) == 1),
      interval_(interval.count() > 0 ? interval : std::chrono::milliseconds(terminal_ ? 100 : 1000)),
      start_(Clock::now()) {}

void ProgressBar::update(uint64_t done, uint64_t total) {
  const Clock::time_point now = Clock::now();
  if (!seen_) {
    seen_ = true;
    first_done_ = done;
    start_ = now;
  }
  done_ = done;
  total_ = total;
  if (!drawn_ || now - last_draw_ >= interval_) draw(now);
}

void ProgressBar::draw(Clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0.05 ? static_cast<double>(done_ - std::min(done_, first_done_)) / seconds : -1.0;
  const std::string line = format_progress(label_, done_, total_, rate, unit_);
  // On a terminal, pad over the tail of a longer previous line.
  if (terminal_) {
    std::fprintf(out_, "\r%-*s", 79, line.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  last_draw_ = now;
  drawn_ = true;
  drawn_done_ = done_;
}

void ProgressBar::finish() {
  if (finished_ || !seen_) return;
  finished_ = true;
  // A file already has the last state as a full line; a terminal redraws it
  // anyway so the final rate is shown.
  if (terminal_ || drawn_done_ != done_) draw(Clock::now());
  if (terminal_) std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace tokamak::cli
