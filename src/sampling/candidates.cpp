#include "sampling/candidates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace tokamak::sampling {

void Candidates::fill(std::span<const float> logits) {
  if (buf_.size() < logits.size()) buf_.resize(logits.size());
  size_ = logits.size();
  bool any_nan = false;
  for (size_t i = 0; i < size_; ++i) {
    const float l = logits[i];
    any_nan |= std::isnan(l);
    buf_[i] = TokenData{static_cast<int32_t>(i), l, 0.0f};
  }
  if (any_nan) {
    const auto it = std::find_if(logits.begin(), logits.end(), [](float l) { return std::isnan(l); });
    throw Error("sampling: logit of token " + std::to_string(it - logits.begin()) + " is NaN");
  }
  sorted = false;
  ids_are_indices = true;
  selected = -1;
}

void Candidates::truncate(size_t n) {
  if (n > size_) throw Error("sampling: truncate to " + std::to_string(n) + " of " + std::to_string(size_));
  if (n < size_) ids_are_indices = false;
  size_ = n;
}

void Candidates::softmax() {
  if (size_ == 0) throw Error("sampling: softmax over no candidates");
  float max_logit = -std::numeric_limits<float>::infinity();
  if (sorted) {
    max_logit = buf_[0].logit;
  } else {
    for (size_t i = 0; i < size_; ++i) max_logit = std::max(max_logit, buf_[i].logit);
  }
  if (!(max_logit > -std::numeric_limits<float>::infinity())) {
    throw Error("sampling: every candidate has logit -inf (all " + std::to_string(size_) + " banned)");
  }
  double sum = 0.0;
  for (size_t i = 0; i < size_; ++i) {
    const float e = std::exp(buf_[i].logit - max_logit);
    buf_[i].p = e;
    sum += e;
  }
  const double inv = 1.0 / sum;
  for (size_t i = 0; i < size_; ++i) buf_[i].p = static_cast<float>(buf_[i].p * inv);
}

void Candidates::sort_prefix(size_t k) {
  k = std::min(k, size_);
  if (sorted || k == 0) return;
  if (k == size_) {
    std::sort(begin(), end(), logit_before);
    sorted = true;
  } else {
    std::partial_sort(begin(), begin() + k, end(), logit_before);
  }
  ids_are_indices = false;
}

size_t Candidates::argmax() const {
  if (size_ == 0) throw Error("sampling: argmax over no candidates");
  size_t best = 0;
  if (!sorted) {
    for (size_t i = 1; i < size_; ++i) {
      if (logit_before(buf_[i], buf_[best])) best = i;
    }
  }
  if (!(buf_[best].logit > -std::numeric_limits<float>::infinity())) {
    throw Error("sampling: every candidate has logit -inf (all " + std::to_string(size_) + " banned)");
  }
  return best;
}

}  // namespace tokamak::sampling
