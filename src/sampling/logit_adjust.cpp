// Samplers that change logits in place and keep the candidate set and its
// order: penalties, logit bias, temperature.
#include <algorithm>
#include <cmath>
#include <deque>
#include <unordered_map>

#include "sampling/param_check.h"
#include "sampling/samplers.h"

namespace tokamak::sampling {

namespace {

class Penalties final : public Sampler {
 public:
  Penalties(int last_n, float repeat, float frequency, float presence)
      : last_n_(last_n), repeat_(repeat), frequency_(frequency), presence_(presence) {}

  std::string name() const override { return "penalties"; }

  void apply(Candidates& cur) override {
    if (counts_.empty()) return;
    if (cur.ids_are_indices) {
      // Cost O(distinct tokens in the window), not O(vocabulary).
      for (const auto& [token, count] : counts_) {
        if (token >= 0 && static_cast<size_t>(token) < cur.size()) penalize(cur[token].logit, count);
      }
    } else {
      for (TokenData& t : cur) {
        const auto it = counts_.find(t.id);
        if (it != counts_.end()) penalize(t.logit, it->second);
      }
    }
    cur.sorted = false;  // penalties can reorder
  }

  void accept(int32_t token) override {
    if (last_n_ == 0) return;
    ++counts_[token];
    if (last_n_ < 0) return;  // the whole history: counts only grow
    window_.push_back(token);
    if (window_.size() > static_cast<size_t>(last_n_)) {
      const auto it = counts_.find(window_.front());
      if (--it->second == 0) counts_.erase(it);
      window_.pop_front();
    }
  }

  void reset() override {
    window_.clear();
    counts_.clear();
  }

  std::unique_ptr<Sampler> clone() const override { return std::make_unique<Penalties>(*this); }

 private:
  // llama.cpp's arithmetic, in this order, so hand-computed values match.
  void penalize(float& logit, int count) const {
    logit = logit <= 0.0f ? logit * repeat_ : logit / repeat_;
    logit -= static_cast<float>(count) * frequency_ + static_cast<float>(count > 0) * presence_;
  }

  int last_n_;
  float repeat_, frequency_, presence_;
  std::deque<int32_t> window_;                  // the last min(last_n, accepted) tokens, oldest first
  std::unordered_map<int32_t, int> counts_;     // token -> occurrences in window_ (or all history)
};

class LogitBias final : public Sampler {
 public:
  explicit LogitBias(std::vector<std::pair<int32_t, float>> bias) : bias_(std::move(bias)) {
    std::sort(bias_.begin(), bias_.end());  // by token, for the binary search of the unordered path
  }

  std::string name() const override { return "logit-bias"; }

  void apply(Candidates& cur) override {
    if (cur.ids_are_indices) {
      for (const auto& [token, b] : bias_) {
        if (static_cast<size_t>(token) < cur.size()) cur[token].logit += b;
      }
    } else {
      for (TokenData& t : cur) {
        auto it = std::lower_bound(bias_.begin(), bias_.end(), std::pair<int32_t, float>{t.id, -INFINITY});
        for (; it != bias_.end() && it->first == t.id; ++it) t.logit += it->second;
      }
    }
    cur.sorted = false;
  }

  std::unique_ptr<Sampler> clone() const override { return std::make_unique<LogitBias>(*this); }

 private:
  std::vector<std::pair<int32_t, float>> bias_;  // sorted by token
};

class Temperature final : public Sampler {
 public:
  explicit Temperature(float t) : t_(t) {}

  std::string name() const override { return "temperature(" + param_str(t_) + ")"; }

  void apply(Candidates& cur) override {
    if (t_ <= 0.0f) {
      const size_t best = cur.argmax();
      std::swap(cur[0], cur[best]);
      cur.truncate(1);
      cur.sorted = true;
      return;
    }
    for (TokenData& t : cur) t.logit /= t_;  // dividing by t > 0 keeps the order
  }

  std::unique_ptr<Sampler> clone() const override { return std::make_unique<Temperature>(*this); }

 private:
  float t_;
};

}  // namespace

std::unique_ptr<Sampler> make_penalties(int last_n, float repeat, float frequency, float presence) {
  check_penalties(last_n, repeat, frequency, presence);
  return std::make_unique<Penalties>(last_n, repeat, frequency, presence);
}

std::unique_ptr<Sampler> make_logit_bias(int32_t n_vocab, std::vector<std::pair<int32_t, float>> bias) {
  check_logit_bias(n_vocab, bias);
  return std::make_unique<LogitBias>(std::move(bias));
}

std::unique_ptr<Sampler> make_temperature(float t) {
  check_finite("temperature", t);
  return std::make_unique<Temperature>(t);
}

}  // namespace tokamak::sampling
