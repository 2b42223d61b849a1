#include "tokenizer/tokenizer.h"

namespace tokamak {

namespace {

// How many bytes a character that starts with `c` takes; 0 for a byte that
// cannot start one (a continuation byte, or 0xF8..0xFF).
size_t utf8_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

// The length of the prefix of `s` that can be emitted now: everything except
// a trailing lead byte whose continuation bytes have not all arrived yet.
size_t emittable(const std::string& s) {
  const size_t n = s.size();
  // The lead byte of a character cut at the end sits within its last 3 bytes.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;
    return utf8_length(c) > back ? n - back : n;
  }
  return n;
}

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, int32_t prev_token) : tokenizer_(&tokenizer), prev_(prev_token) {}

std::string TextStream::push(int32_t token) {
  pending_ += tokenizer_->decode_piece(prev_, token);
  prev_ = token;
  const size_t ready = emittable(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string TextStream::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tokamak
