// The candidate tokens of one position as they pass through a sampler chain
// (llama.cpp's llama_token_data_array): each sampler may change logits, reorder,
// truncate, and a selecting sampler (greedy, dist, llama2c) sets `selected`.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tokamak::sampling {

struct TokenData {
  int32_t id;
  float logit;
  float p;  // probability; valid only right after softmax() on the current set
};

// The one order every sorting sampler uses: higher logit first, ties broken by
// the lower id. A strict total order (no NaN: fill() rejects it), so partial
// sorts give the same result on every standard library.
inline bool logit_before(const TokenData& a, const TokenData& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

class Candidates {
 public:
  // Loads one logits row: data[i] = {i, logits[i], 0}. Throws Error on NaN.
  // Reuses the buffer: no allocation once it has held a full vocabulary.
  void fill(std::span<const float> logits);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  TokenData* begin() { return buf_.data(); }
  TokenData* end() { return buf_.data() + size_; }
  const TokenData* begin() const { return buf_.data(); }
  const TokenData* end() const { return buf_.data() + size_; }
  TokenData& operator[](size_t i) { return buf_[i]; }
  const TokenData& operator[](size_t i) const { return buf_[i]; }

  // Keeps the first n (n <= size()).
  void truncate(size_t n);

  // Sets p = softmax(logit) over the current set: max-subtracted, summed in
  // double. Throws Error when every logit is -inf (every token banned).
  void softmax();

  // Makes [0, k) the k first candidates in logit_before order, sorted; the rest
  // follow in unspecified order. Partial selection: O(n log k), not a full sort.
  void sort_prefix(size_t k);

  // Index of the first candidate in logit_before order (max logit, lowest id).
  // Throws Error on an empty set or when all are -inf.
  size_t argmax() const;

  bool sorted = false;           // all of [0, size) is in logit_before order
  bool ids_are_indices = false;  // data[i].id == i for all i: lookup by id is O(1)
  int64_t selected = -1;         // index into [0, size) chosen by a selecting sampler

 private:
  std::vector<TokenData> buf_;  // [capacity]; the live set is [0, size_)
  size_t size_ = 0;
};

// Visits [first, last) in `before` order, sorting chunks of 64, 128, 256, ...
// selected from the unsorted rest, until visit(i) returns true. Returns the
// index it stopped at, or n; [0, that index] is then in order. Cost O(n log
// chunk) per chunk: a walk that stops early (top-p, typical) never sorts all n.
template <typename It, typename Before, typename Visit>
size_t walk_in_order(It first, It last, Before before, Visit visit) {
  const size_t n = static_cast<size_t>(last - first);
  size_t done = 0;
  for (size_t chunk = 64; done < n; chunk *= 2) {
    const size_t to = std::min(n, done + chunk);
    std::partial_sort(first + done, first + to, last, before);
    for (size_t i = done; i < to; ++i) {
      if (visit(i)) return i;
    }
    done = to;
  }
  return n;
}

}  // namespace tokamak::sampling
