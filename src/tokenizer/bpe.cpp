#include "tokenizer/bpe.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tokamak::bpe {

namespace {

// Heap order: the lowest rank on top, then the leftmost pair.
bool lower_priority(const Merges::Scratch::Candidate& a, const Merges::Scratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
}

}  // namespace

Merges Merges::build(const Vocab& vocab, std::span<const std::string> merges) {
  if (merges.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("tokenizer: " + std::to_string(merges.size()) + " merges are too many");
  }
  Merges m;
  m.n_vocab_ = vocab.n_vocab();
  std::unordered_map<std::string, int32_t> extra;  // texts that are not tokens -> their symbols
  const auto symbol_of = [&](std::string_view text) -> int32_t {
    if (const int32_t id = vocab.find(text); id >= 0) return id;
    const auto [it, inserted] = extra.try_emplace(std::string(text), 0);
    if (inserted) {
      if (m.extra_text_.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max() - m.n_vocab_)) {
        throw Error("tokenizer: too many merge texts outside the vocabulary");
      }
      it->second = m.n_vocab_ + static_cast<int32_t>(m.extra_text_.size());
      m.extra_text_.push_back(it->first);
    }
    return it->second;
  };
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    unicode::append_utf8(ch, unicode::kByteToChar[b]);
    m.byte_symbol_[b] = symbol_of(ch);
  }
  m.table_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& line = merges[rank];
    const size_t space = line.size() > 1 ? line.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= line.size()) continue;
    const std::string_view left = std::string_view(line).substr(0, space);
    const std::string_view right = std::string_view(line).substr(space + 1);
    joined.assign(left);
    joined += right;
    const int32_t l = symbol_of(left);
    const int32_t r = symbol_of(right);
    m.table_.try_emplace(key(l, r), Merge{static_cast<int32_t>(rank), symbol_of(joined)});
  }
  return m;
}

void Merges::emit(const Vocab& vocab, int32_t symbol, std::vector<int32_t>& out) const {
  if (symbol < n_vocab_) {
    out.push_back(symbol);
    return;
  }
  for (const char c : extra_text_[symbol - n_vocab_]) {
    if (const int32_t id = vocab.find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
  }
}

void Merges::encode_word(const Vocab& vocab, std::string_view word, bool ignore_merges, Scratch& scratch,
                         std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("tokenizer: a word of " + std::to_string(word.size()) + " bytes is too long to encode");
  }
  if (ignore_merges) {
    scratch.spelled.clear();
    unicode::append_byte_chars(scratch.spelled, word);
    if (const int32_t id = vocab.find(scratch.spelled); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  symbols.clear();
  heap.clear();
  const auto n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols.push_back({byte_symbol_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, 1});
  }
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const auto it = table_.find(key(symbols[left].id, symbols[right].id));
    if (it == table_.end()) return;
    heap.push_back({it->second.rank, left, right, it->second.result, symbols[left].len, symbols[right].len});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  for (int32_t i = 1; i < n; ++i) consider(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const Scratch::Candidate c = heap.back();
    heap.pop_back();
    auto& left = symbols[c.left];
    auto& right = symbols[c.right];
    if (left.len == 0 || left.len != c.left_len || right.len != c.right_len || left.next != c.right) continue;
    left.id = c.result;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) emit(vocab, symbols[i].id, out);
}

}  // namespace tokamak::bpe
