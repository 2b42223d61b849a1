#include "tokenizer/spm.h"

#include <limits>
#include <queue>
#include <string>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tokamak::spm {

namespace {

// A run of bytes of the work string. Live symbols form a doubly linked chain
// in text order; a merge folds the right symbol into the left one, so a
// symbol's index never changes and live neighbours stay contiguous.
struct Symbol {
  size_t begin = 0;
  size_t len = 0;
  int32_t prev = -1;
  int32_t next = -1;
  int32_t id = -1;  // the token spelled by these bytes, -1 if none
  bool alive = true;
};

// A pair that may merge. It goes stale when either side has merged since it
// was queued; the total length tells, as lengths only grow.
struct Candidate {
  float score;
  int32_t left;
  int32_t right;
  int32_t id;
  size_t len;
};

// Heap order: highest score on top, then the leftmost pair.
struct Below {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

int32_t byte_fallback(const Vocab& vocab, unsigned char b) {
  const int32_t id = vocab.byte_token[b];
  if (id < 0) {
    throw Error("tokenizer: byte " + std::to_string(b) + " has no token and the vocabulary has no unknown token");
  }
  return id;
}

class Merger {
 public:
  Merger(const Vocab& vocab, Rules rules) : vocab_(vocab), rules_(rules) {}

  void run(std::string_view text, std::vector<int32_t>& out) {
    if (text.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      throw Error("tokenizer: text of " + std::to_string(text.size()) + " bytes is too long to encode");
    }
    if (rules_ == Rules::LlamaCpp) {
      split_characters(text);
    } else {
      split_llama2c(text);
    }
    for (size_t i = 1; i < symbols_.size(); ++i) consider(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[c.left];
      Symbol& right = symbols_[c.right];
      if (!left.alive || !right.alive || left.len + right.len != c.len) continue;
      left.len = c.len;
      left.id = c.id;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = c.left;
      consider(left.prev, c.left);
      consider(c.left, left.next);
    }
    for (int32_t i = symbols_.empty() ? -1 : 0; i >= 0; i = symbols_[i].next) {
      const Symbol& s = symbols_[i];
      if (s.id >= 0) {
        out.push_back(s.id);
        continue;
      }
      for (size_t k = 0; k < s.len; ++k) out.push_back(byte_fallback(vocab_, static_cast<unsigned char>(work_[s.begin + k])));
    }
  }

 private:
  void add_symbol(size_t begin, size_t len, int32_t id) {
    Symbol s;
    s.begin = begin;
    s.len = len;
    s.id = id;
    s.prev = static_cast<int32_t>(symbols_.size()) - 1;
    if (!symbols_.empty()) symbols_.back().next = static_cast<int32_t>(symbols_.size());
    symbols_.push_back(s);
  }

  void split_characters(std::string_view text) {
    work_ = text;
    symbols_.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = std::min(unicode::lead_byte_length(static_cast<unsigned char>(text[pos])), text.size() - pos);
      add_symbol(pos, len, vocab_.find(text.substr(pos, len)));
      pos += len;
    }
  }

  // Symbols over a work string of their pieces: a byte fallback token stands
  // for its "<0xNN>" piece, not the byte, when it meets its neighbours.
  void split_llama2c(std::string_view text) {
    owned_.reserve(text.size());
    symbols_.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      size_t len = 1;
      while (len < 4 && pos + len < text.size() && is_continuation(static_cast<unsigned char>(text[pos + len]))) ++len;
      const std::string_view chunk = text.substr(pos, len);
      pos += len;
      if (const int32_t id = vocab_.find(chunk); id >= 0) {
        add_symbol(owned_.size(), chunk.size(), id);
        owned_ += chunk;
        continue;
      }
      for (const char c : chunk) {
        const int32_t id = byte_fallback(vocab_, static_cast<unsigned char>(c));
        add_symbol(owned_.size(), vocab_.pieces[id].size(), id);
        owned_ += vocab_.pieces[id];
      }
    }
    work_ = owned_;
  }

  void consider(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t len = symbols_[left].len + symbols_[right].len;
    const int32_t id = vocab_.find(work_.substr(symbols_[left].begin, len));
    if (id < 0) return;
    const float score = vocab_.scores[id];
    // run.c starts its search for the best pair at a score of -1e10.
    if (rules_ == Rules::Llama2c && !(score > -1e10f)) return;
    queue_.push(Candidate{score, left, right, id, len});
  }

  const Vocab& vocab_;
  Rules rules_;
  std::string owned_;      // Llama2c: the concatenated pieces
  std::string_view work_;  // the bytes symbols index into
  std::vector<Symbol> symbols_;
  std::priority_queue<Candidate, std::vector<Candidate>, Below> queue_;
};

}  // namespace

void encode(const Vocab& vocab, std::string_view text, Rules rules, std::vector<int32_t>& out) {
  Merger(vocab, rules).run(text, out);
}

}  // namespace tokamak::spm
