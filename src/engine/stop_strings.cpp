#include "engine/stop_strings.h"

#include <algorithm>

#include "core/error.h"

namespace tokamak::engine {

namespace {

// Bytes of the UTF-8 sequence a lead byte starts; 1 for ASCII and for bytes
// that cannot lead (continuations, 0xF8..0xFF), which are released as they are.
size_t utf8_sequence_length(unsigned char c) {
  if (c < 0xC0) return 1;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  if (c < 0xF8) return 4;
  return 1;
}

// The largest cut <= end of s that does not split a UTF-8 character: if the
// character whose lead byte is among the 3 bytes before `end` continues past
// `end` (and what of it has arrived is continuation bytes), cut before it.
size_t utf8_safe_cut(std::string_view s, size_t end) {
  for (size_t back = 1; back <= std::min<size_t>(3, end); ++back) {
    const auto c = static_cast<unsigned char>(s[end - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation: its lead is further back
    const size_t len = utf8_sequence_length(c);
    if (len <= back) return end;  // the character ends at or before `end`
    const size_t lead = end - back;
    for (size_t j = back; j < len && lead + j < s.size(); ++j) {
      if ((static_cast<unsigned char>(s[lead + j]) & 0xC0) != 0x80) return end;  // not a real sequence
    }
    return lead;
  }
  return end;
}

// Length of the longest suffix of text that is a proper prefix of stop.
size_t suffix_prefix_overlap(std::string_view text, std::string_view stop) {
  for (size_t k = std::min(stop.size() - 1, text.size()); k > 0; --k) {
    if (text.substr(text.size() - k) == stop.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t i = 0; i < stops_.size(); ++i) {
    if (stops_[i].empty()) throw Error("stop strings: stop string " + std::to_string(i) + " is empty");
  }
}

StopStringMatcher::Output StopStringMatcher::push(std::string_view piece) {
  Output out;
  if (stopped()) {
    out.stopped = true;
    out.stop_index = stop_index_;
    return out;
  }
  const size_t old_size = held_.size();
  held_.append(piece);

  // Held text had no complete stop string, so any match ends in `piece`. The
  // match that ends first wins (ties: the longer one), which makes the result
  // independent of how the text was cut into pieces.
  size_t best_pos = std::string::npos, best_end = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const std::string& s = stops_[i];
    const size_t from = old_size >= s.size() ? old_size - s.size() + 1 : 0;
    const size_t pos = held_.find(s, from);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_pos)) {
      best_pos = pos;
      best_end = end;
      stop_index_ = static_cast<int>(i);
    }
  }
  if (best_pos != std::string::npos) {
    out.text = held_.substr(0, best_pos);
    out.stopped = true;
    out.stop_index = stop_index_;
    held_.clear();
    return out;
  }

  // Every position where a stop string could still begin lies in the longest
  // suffix that is a prefix of some stop string: hold that back.
  size_t hold = 0;
  for (const std::string& s : stops_) hold = std::max(hold, suffix_prefix_overlap(held_, s));
  const size_t emit = utf8_safe_cut(held_, held_.size() - hold);
  out.text = held_.substr(0, emit);
  held_.erase(0, emit);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string rest;
  rest.swap(held_);
  return rest;
}

void StopStringMatcher::reset() {
  held_.clear();
  stop_index_ = -1;
}

}  // namespace tokamak::engine
