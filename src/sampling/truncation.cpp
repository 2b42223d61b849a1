// Samplers that shrink the candidate set: top-k, top-p, min-p, typical.
// None sorts a full vocabulary: top-k selects k, and the walks of top-p and
// typical sort only as far as their cumulative mass needs.
#include <algorithm>
#include <cmath>

#include "sampling/param_check.h"
#include "sampling/samplers.h"

namespace tokamak::sampling {

namespace {

class TopK final : public Sampler {
 public:
  explicit TopK(int k) : k_(k) {}
  std::string name() const override { return "top-k(" + std::to_string(k_) + ")"; }

  void apply(Candidates& cur) override {
    if (k_ <= 0 || cur.empty()) return;
    const size_t k = std::min(static_cast<size_t>(k_), cur.size());
    cur.sort_prefix(k);
    cur.truncate(k);
    cur.sorted = true;
  }

  std::unique_ptr<Sampler> clone() const override { return std::make_unique<TopK>(*this); }

 private:
  int k_;
};

class TopP final : public Sampler {
 public:
  TopP(float p, size_t min_keep) : p_(p), min_keep_(min_keep) {}
  std::string name() const override { return "top-p(" + param_str(p_) + ")"; }

  void apply(Candidates& cur) override {
    if (p_ >= 1.0f || cur.empty()) return;
    cur.softmax();
    double mass = 0.0;
    size_t keep = cur.size();
    const auto visit = [&](size_t i) {
      mass += cur[i].p;
      if (mass >= p_ && i + 1 >= min_keep_) {
        keep = i + 1;
        return true;
      }
      return false;
    };
    if (cur.sorted) {
      for (size_t i = 0; i < cur.size(); ++i) {
        if (visit(i)) break;
      }
    } else {
      walk_in_order(cur.begin(), cur.end(), logit_before, visit);
      cur.ids_are_indices = false;
    }
    cur.truncate(keep);
    cur.sorted = true;
  }

  std::unique_ptr<Sampler> clone() const override { return std::make_unique<TopP>(*this); }

 private:
  float p_;
  size_t min_keep_;
};

class MinP final : public Sampler {
 public:
  MinP(float p, size_t min_keep) : p_(p), min_keep_(min_keep) {}
  std::string name() const override { return "min-p(" + param_str(p_) + ")"; }

  void apply(Candidates& cur) override {
    if (p_ <= 0.0f || cur.empty()) return;
    // p_i >= p * p_max  <=>  logit_i >= max_logit + log(p): no softmax needed.
    const double max_logit = cur[cur.argmax()].logit;
    const double threshold = max_logit + std::log(static_cast<double>(p_));
    const auto keeps = [&](const TokenData& t) { return t.logit >= threshold; };
    const size_t n_kept = static_cast<size_t>(std::count_if(cur.begin(), cur.end(), keeps));
    if (n_kept >= min_keep_) {
      // Order-preserving compaction in place: a sorted set stays sorted.
      size_t w = 0;
      for (size_t i = 0; i < cur.size(); ++i) {
        if (keeps(cur[i])) cur[w++] = cur[i];
      }
      cur.truncate(w);
    } else {
      cur.sort_prefix(min_keep_);
      cur.truncate(std::min(min_keep_, cur.size()));
      cur.sorted = true;
    }
  }

  std::unique_ptr<Sampler> clone() const override { return std::make_unique<MinP>(*this); }

 private:
  float p_;
  size_t min_keep_;
};

class Typical final : public Sampler {
 public:
  Typical(float p, size_t min_keep) : p_(p), min_keep_(min_keep) {}
  std::string name() const override { return "typical(" + param_str(p_) + ")"; }

  void apply(Candidates& cur) override {
    if (p_ >= 1.0f || cur.empty()) return;
    cur.softmax();
    double entropy = 0.0;
    for (const TokenData& t : cur) {
      if (t.p > 0.0f) entropy -= t.p * std::log(static_cast<double>(t.p));
    }
    // Order by |surprise - entropy| (ties: lower id), a p == 0 token last.
    scratch_.resize(cur.size());
    for (size_t i = 0; i < cur.size(); ++i) {
      const double surprise = cur[i].p > 0.0f ? -std::log(static_cast<double>(cur[i].p)) : INFINITY;
      scratch_[i] = {std::abs(surprise - entropy), cur[i]};
    }
    const auto before = [](const Shifted& a, const Shifted& b) {
      return a.shift < b.shift || (a.shift == b.shift && a.t.id < b.t.id);
    };
    double mass = 0.0;
    size_t keep = cur.size();
    walk_in_order(scratch_.begin(), scratch_.end(), before, [&](size_t i) {
      mass += scratch_[i].t.p;
      if (mass > p_ && i + 1 >= min_keep_) {
        keep = i + 1;
        return true;
      }
      return false;
    });
    for (size_t i = 0; i < keep; ++i) cur[i] = scratch_[i].t;
    cur.truncate(keep);
    cur.sorted = false;
    cur.ids_are_indices = false;
  }

  std::unique_ptr<Sampler> clone() const override { return std::make_unique<Typical>(p_, min_keep_); }

 private:
  struct Shifted {
    double shift;  // |-log p - entropy|
    TokenData t;
  };
  float p_;
  size_t min_keep_;
  std::vector<Shifted> scratch_;  // [candidates], reused between positions
};

}  // namespace

std::unique_ptr<Sampler> make_top_k(int k) {
  check_param(k >= 0, "top_k", std::to_string(k), "must be >= 0");
  return std::make_unique<TopK>(k);
}

std::unique_ptr<Sampler> make_top_p(float p, size_t min_keep) {
  check_unit_interval("top_p", p);
  return std::make_unique<TopP>(p, min_keep);
}

std::unique_ptr<Sampler> make_min_p(float p, size_t min_keep) {
  check_unit_interval("min_p", p);
  return std::make_unique<MinP>(p, min_keep);
}

std::unique_ptr<Sampler> make_typical(float p, size_t min_keep) {
  check_unit_interval("typical_p", p);
  return std::make_unique<Typical>(p, min_keep);
}

}  // namespace tokamak::sampling
