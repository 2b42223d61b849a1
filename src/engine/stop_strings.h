// Stop strings over streamed text. Generated text arrives in pieces (one per
// token, which may end in the middle of a UTF-8 character, and a stop string
// may span several). The matcher releases only text that can no longer be the
// start of a stop string, and never half a UTF-8 character, so a stream never
// shows a part of a stop string it has to take back.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tokamak::engine {

class StopStringMatcher {
 public:
  // Throws Error for an empty stop string. No stop strings: text passes through
  // (still held back at an incomplete UTF-8 character).
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Output {
    std::string text;      // safe to emit now; on a stop, all text before the stop string
    bool stopped = false;  // a stop string completed (it and anything after are dropped)
    int stop_index = -1;   // which of the stop strings, when stopped
  };

  // Appends a piece and returns what is safe to emit. The stop string that ends
  // first in the text wins (ties: the one that starts first), whatever the cuts
  // between pieces. After a stop, returns {"", true, index} and ignores input.
  // Cost O(held bytes * total stop bytes); held text stays under the longest
  // stop string plus 3 bytes.
  Output push(std::string_view piece);

  // The end of generation without a stop: returns all text still held (a
  // partial stop string, an incomplete character at the very end).
  std::string flush();

  bool stopped() const { return stop_index_ >= 0; }
  size_t held_bytes() const { return held_.size(); }
  void reset();

 private:
  std::vector<std::string> stops_;
  std::string held_;     // received, not yet emitted
  int stop_index_ = -1;  // >= 0 once stopped
};

}  // namespace tokamak::engine
