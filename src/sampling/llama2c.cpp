// llama2.c's sampler (run.c: sample, softmax, sample_argmax, sample_mult,
// sample_topp), reproduced operation for operation in float so that a seeded
// run gives the same tokens as run.c. Only the sort differs: run.c qsorts the
// candidates above the cutoff; glibc's qsort is a stable merge sort, so its
// order is (prob descending, index ascending), which walk_in_order reproduces
// while sorting only as far as the nucleus reaches.
#include <cmath>

#include "core/error.h"
#include "sampling/param_check.h"
#include "sampling/rng.h"
#include "sampling/samplers.h"

namespace tokamak::sampling {

namespace {

class Llama2c final : public Sampler {
 public:
  Llama2c(float temperature, float top_p, uint64_t seed)
      : temperature_(temperature), top_p_(top_p), seed_(seed), rng_(seed) {}

  Selector selector() const override { return Selector::Llama2c; }
  std::string name() const override {
    return "llama2c(temp " + param_str(temperature_) + ", top-p " + param_str(top_p_) + ")";
  }

  void apply(Candidates& cur) override {
    if (!cur.ids_are_indices) {
      throw Error("sampling: llama2c needs the whole vocabulary in id order; only penalties and logit bias may "
                  "run before it");
    }
    const size_t n = cur.size();
    if (temperature_ <= 0.0f) {  // run.c clamps a negative temperature to 0: argmax of the logits
      size_t max_i = 0;
      for (size_t i = 1; i < n; ++i) {
        if (cur[i].logit > cur[max_i].logit) max_i = i;
      }
      cur.selected = static_cast<int64_t>(max_i);
      return;
    }
    for (TokenData& t : cur) t.logit /= temperature_;
    softmax(cur);
    const float coin = rng_.next_f32();
    if (top_p_ <= 0.0f || top_p_ >= 1.0f) {
      cur.selected = static_cast<int64_t>(sample_mult(cur, coin));
    } else {
      sample_topp(cur, coin);
    }
  }

  void reset() override { rng_ = Llama2cRng(seed_); }
  std::unique_ptr<Sampler> clone() const override { return std::make_unique<Llama2c>(*this); }

 private:
  struct ProbIndex {
    float prob;
    int32_t index;
  };

  // run.c softmax: max, then expf(x - max) summed in float in index order, then divide.
  static void softmax(Candidates& cur) {
    float max_val = cur[0].logit;
    for (size_t i = 1; i < cur.size(); ++i) {
      if (cur[i].logit > max_val) max_val = cur[i].logit;
    }
    float sum = 0.0f;
    for (TokenData& t : cur) {
      t.p = std::exp(t.logit - max_val);
      sum += t.p;
    }
    for (TokenData& t : cur) t.p /= sum;
  }

  static size_t sample_mult(const Candidates& cur, float coin) {
    float cdf = 0.0f;
    for (size_t i = 0; i < cur.size(); ++i) {
      cdf += cur[i].p;
      if (coin < cdf) return i;
    }
    return cur.size() - 1;  // rounding
  }

  // Leaves cur = the nucleus in sampling order (for logprobs), cur.selected in it.
  void sample_topp(Candidates& cur, float coin) {
    const int n = static_cast<int>(cur.size());
    // Probabilities below (1 - p) / (n - 1) cannot be in the nucleus.
    const float cutoff = (1.0f - top_p_) / static_cast<float>(n - 1);
    probindex_.clear();
    for (int i = 0; i < n; ++i) {
      if (cur[i].p >= cutoff) probindex_.push_back({cur[i].p, i});
    }
    if (probindex_.empty()) {  // only for n == 1, where run.c would read out of bounds
      cur.selected = 0;
      return;
    }
    float cumulative_prob = 0.0f;
    size_t last_idx = probindex_.size() - 1;
    walk_in_order(probindex_.begin(), probindex_.end(),
                  [](const ProbIndex& a, const ProbIndex& b) {
                    return a.prob > b.prob || (a.prob == b.prob && a.index < b.index);
                  },
                  [&](size_t i) {
                    cumulative_prob += probindex_[i].prob;
                    if (cumulative_prob > top_p_) {
                      last_idx = i;
                      return true;
                    }
                    return false;
                  });
    const float r = coin * cumulative_prob;
    float cdf = 0.0f;
    size_t chosen = last_idx;
    for (size_t i = 0; i <= last_idx; ++i) {
      cdf += probindex_[i].prob;
      if (r < cdf) {
        chosen = i;
        break;
      }
    }
    // Reorder cur to the nucleus: each kept id's TokenData moves to its rank.
    nucleus_.clear();
    for (size_t i = 0; i <= last_idx; ++i) nucleus_.push_back(cur[probindex_[i].index]);
    for (size_t i = 0; i <= last_idx; ++i) cur[i] = nucleus_[i];
    cur.truncate(last_idx + 1);
    cur.sorted = false;  // in prob order, which can differ from logit_before order only by ties of rounding
    cur.selected = static_cast<int64_t>(chosen);
  }

  float temperature_;
  float top_p_;
  uint64_t seed_;
  Llama2cRng rng_;
  std::vector<ProbIndex> probindex_;  // [candidates above the cutoff], reused
  std::vector<TokenData> nucleus_;    // [nucleus], reused
};

}  // namespace

std::unique_ptr<Sampler> make_llama2c(float temperature, float top_p, uint64_t seed) {
  check_finite("temperature", temperature);
  check_unit_interval("top_p", top_p);
  return std::make_unique<Llama2c>(temperature, top_p, seed);
}

}  // namespace tokamak::sampling
