#include "tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tokamak::bpe {

namespace {

constexpr int32_t kNoMerge = std::numeric_limits<int32_t>::max();
constexpr size_t kCachedWord = 64;  // bytes; longer words rarely repeat

}  // namespace

// A 4-ary min-heap by `order`: half the depth of a binary heap, and a node's
// four children sit side by side, which matters for words of a million symbols.
void Merges::heap_push(Scratch& scratch, const Scratch::Candidate& c) {
  auto& heap = scratch.heap;
  size_t i = heap.size();
  heap.push_back(c);
  while (i > 0) {
    const size_t parent = (i - 1) / 4;
    if (heap[parent].order <= c.order) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = c;
}

Merges::Scratch::Candidate Merges::heap_pop(Scratch& scratch) {
  auto& heap = scratch.heap;
  const Scratch::Candidate top = heap.front();
  const Scratch::Candidate last = heap.back();
  heap.pop_back();
  const size_t n = heap.size();
  if (n == 0) return top;
  size_t i = 0;
  while (true) {
    const size_t first = 4 * i + 1;
    if (first >= n) break;
    size_t best = first;
    for (size_t c = first + 1; c < std::min(first + 4, n); ++c) {
      if (heap[c].order < heap[best].order) best = c;
    }
    if (heap[best].order >= last.order) break;
    heap[i] = heap[best];
    i = best;
  }
  heap[i] = last;
  return top;
}

const Merges::Slot* Merges::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t k = key(left, right);
  for (uint64_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.key == k) return &s;
    if (s.key == kEmpty) return nullptr;
  }
}

void Merges::insert(int32_t left, int32_t right, int32_t rank, int32_t result) {
  const uint64_t k = key(left, right);
  for (uint64_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == k) return;  // a repeated pair: the first (lowest) rank stays
    if (s.key == kEmpty) {
      s = {k, rank, result};
      ++n_merges_;
      return;
    }
  }
}

Merges Merges::build(const Vocab& vocab, std::span<const std::string> merges) {
  if (merges.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max() / 4)) {
    throw Error("tokenizer: " + std::to_string(merges.size()) + " merges are too many");
  }
  Merges m;
  m.n_vocab_ = vocab.n_vocab();
  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity *= 2;  // at most half full
  m.slots_.assign(capacity, Slot{});
  m.mask_ = capacity - 1;
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
    m.insert(l, r, static_cast<int32_t>(rank), symbol_of(joined));
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

// Few symbols: keep the rank of each adjacent pair in an array and merge the
// leftmost lowest until none has a rank; the same choices the heap makes.
void Merges::merge_short(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const {
  auto& ids = scratch.ids;
  auto& ranks = scratch.ranks;
  auto& results = scratch.results;
  ids.clear();
  for (const char b : word) ids.push_back(byte_symbol_[static_cast<unsigned char>(b)]);
  const auto rate = [&](size_t i) {
    const Slot* s = find(ids[i], ids[i + 1]);
    ranks[i] = s != nullptr ? s->rank : kNoMerge;
    results[i] = s != nullptr ? s->result : -1;
  };
  ranks.resize(ids.size() - 1);
  results.resize(ids.size() - 1);
  for (size_t i = 0; i + 1 < ids.size(); ++i) rate(i);
  while (!ranks.empty()) {
    const size_t best = static_cast<size_t>(std::min_element(ranks.begin(), ranks.end()) - ranks.begin());
    if (ranks[best] == kNoMerge) break;
    ids[best] = results[best];
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best));
    results.erase(results.begin() + static_cast<std::ptrdiff_t>(best));
    if (best > 0) rate(best - 1);
    if (best < ranks.size()) rate(best);
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

// Many symbols: a linked list and a heap of candidate pairs, lowest rank
// then leftmost first; a candidate is stale once either side has changed.
void Merges::merge_long(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const {
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
    const Slot* s = find(symbols[left].id, symbols[right].id);
    if (s == nullptr) return;
    const uint64_t order = (static_cast<uint64_t>(s->rank) << 32) | static_cast<uint32_t>(left);
    heap_push(scratch, {order, right, s->result, symbols[left].len, symbols[right].len});
  };
  for (int32_t i = 1; i < n; ++i) consider(i - 1, i);
  while (!heap.empty()) {
    const Scratch::Candidate c = heap_pop(scratch);
    const auto l = static_cast<int32_t>(static_cast<uint32_t>(c.order));
    auto& left = symbols[l];
    auto& right = symbols[c.right];
    if (left.len == 0 || left.len != c.left_len || right.len != c.right_len || left.next != c.right) continue;
    left.id = c.result;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = l;
    consider(left.prev, l);
    consider(l, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void Merges::encode_word(const Vocab& vocab, std::string_view word, bool ignore_merges, Scratch& scratch,
                         std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("tokenizer: a word of " + std::to_string(word.size()) + " bytes is too long to encode");
  }
  // The cache: open addressing on the word's hash, keys and ids in arenas.
  const bool cacheable = word.size() <= kCachedWord;
  const uint64_t hash = cacheable ? std::hash<std::string_view>{}(word) : 0;
  Scratch::CacheSlot* slot = nullptr;
  if (cacheable) {
    if (scratch.cache.empty()) scratch.cache.resize(256);
    const uint64_t mask = scratch.cache.size() - 1;
    for (uint64_t i = hash & mask;; i = (i + 1) & mask) {
      Scratch::CacheSlot& s = scratch.cache[i];
      if (!s.used) {
        slot = &s;
        break;
      }
      if (s.hash == hash && std::string_view(scratch.cache_keys).substr(s.key_offset, s.key_len) == word) {
        out.insert(out.end(), scratch.cache_ids.begin() + s.ids_offset,
                   scratch.cache_ids.begin() + s.ids_offset + s.ids_len);
        return;
      }
    }
  }

  const size_t before = out.size();
  bool whole = false;
  if (ignore_merges) {
    scratch.spelled.clear();
    unicode::append_byte_chars(scratch.spelled, word);
    if (const int32_t id = vocab.find(scratch.spelled); id >= 0) {
      out.push_back(id);
      whole = true;
    }
  }
  if (!whole) {
    const size_t first = out.size();
    if (word.size() <= scratch.short_word_bytes) {
      merge_short(word, scratch, out);
    } else {
      merge_long(word, scratch, out);
    }
    // Symbols that are not tokens become their single-byte tokens.
    if (!extra_text_.empty()) {
      std::vector<int32_t> merged(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
      out.resize(first);
      for (const int32_t s : merged) emit(vocab, s, out);
    }
  }

  constexpr size_t kMaxCached = size_t{1} << 16;  // words; past it, words merge afresh
  if (slot != nullptr && scratch.cache_entries < kMaxCached && scratch.cache_ids.size() < (size_t{1} << 28)) {
    *slot = {hash,
             static_cast<uint32_t>(scratch.cache_keys.size()),
             static_cast<uint32_t>(word.size()),
             static_cast<uint32_t>(scratch.cache_ids.size()),
             static_cast<uint32_t>(out.size() - before),
             true};
    scratch.cache_keys += word;
    scratch.cache_ids.insert(scratch.cache_ids.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    if (++scratch.cache_entries * 2 > scratch.cache.size()) {
      // Grow: re-place every entry in a table twice the size.
      std::vector<Scratch::CacheSlot> old(scratch.cache.size() * 2);
      old.swap(scratch.cache);
      const uint64_t mask = scratch.cache.size() - 1;
      for (const Scratch::CacheSlot& s : old) {
        if (!s.used) continue;
        uint64_t i = s.hash & mask;
        while (scratch.cache[i].used) i = (i + 1) & mask;
        scratch.cache[i] = s;
      }
    }
  }
}

}  // namespace tokamak::bpe
