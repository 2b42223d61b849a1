// Selecting samplers: greedy and dist (draw from the softmax).
#include "sampling/rng.h"
#include "sampling/samplers.h"

namespace tokamak::sampling {

namespace {

class Greedy final : public Sampler {
 public:
  std::string name() const override { return "greedy"; }
  void apply(Candidates& cur) override { cur.selected = static_cast<int64_t>(cur.argmax()); }
  std::unique_ptr<Sampler> clone() const override { return std::make_unique<Greedy>(*this); }
  Selector selector() const override { return Selector::Greedy; }
};

class Dist final : public Sampler {
 public:
  explicit Dist(uint64_t seed) : seed_(seed), rng_(seed) {}
  std::string name() const override { return "dist"; }

  void apply(Candidates& cur) override {
    cur.softmax();
    // Inverse CDF in double over the float probabilities; the target is scaled
    // by their actual sum, so rounding never pushes it past the last token.
    double total = 0.0;
    for (const TokenData& t : cur) total += t.p;
    const double target = rng_.uniform() * total;
    double cdf = 0.0;
    size_t last_nonzero = 0;
    for (size_t i = 0; i < cur.size(); ++i) {
      if (cur[i].p == 0.0f) continue;
      last_nonzero = i;
      cdf += cur[i].p;
      if (target < cdf) {
        cur.selected = static_cast<int64_t>(i);
        return;
      }
    }
    cur.selected = static_cast<int64_t>(last_nonzero);
  }

  void reset() override { rng_ = RequestRng(seed_); }
  std::unique_ptr<Sampler> clone() const override { return std::make_unique<Dist>(*this); }
  Selector selector() const override { return Selector::Dist; }

 private:
  uint64_t seed_;
  RequestRng rng_;
};

}  // namespace

std::unique_ptr<Sampler> make_greedy() { return std::make_unique<Greedy>(); }
std::unique_ptr<Sampler> make_dist(uint64_t seed) { return std::make_unique<Dist>(seed); }

}  // namespace tokamak::sampling
