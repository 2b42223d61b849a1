// Sampler chain tests. Statistical tests draw 100k tokens with fixed seeds and
// compare the counts with the analytically truncated and renormalized
// distribution (computed here in double, independently of the samplers) by a
// chi-square test at p > 0.001. llama2.c mode is checked against values worked
// out from run.c's algorithm in float32 (by a separate Python transcription).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "sampling/samplers.h"

namespace tokamak::sampling {
namespace {

// ---------------------------------------------------------------- chi-square

// Regularized upper incomplete gamma Q(a, x): series for x < a + 1, else the
// continued fraction (modified Lentz).
double gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && term > sum * 1e-16; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

// p-value of Pearson's chi-square for counts against probabilities (bins with
// expected count < 5 pooled). A count where the probability is 0 gives 0.
double chi_square_p(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  double stat = 0.0, pooled_e = 0.0, pooled_o = 0.0;
  int bins = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * n;
    if (probs[i] == 0.0) {
      if (counts[i] > 0) return 0.0;
      continue;
    }
    if (e < 5.0) {
      pooled_e += e;
      pooled_o += counts[i];
      continue;
    }
    stat += (counts[i] - e) * (counts[i] - e) / e;
    ++bins;
  }
  if (pooled_e > 0.0) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++bins;
  }
  if (bins < 2) return 1.0;
  return gamma_q((bins - 1) / 2.0, stat / 2.0);
}

TEST(ChiSquare, MatchesTabulatedCriticalValues) {
  // Upper 0.001 and 0.05 points of the chi-square distribution (standard tables).
  EXPECT_NEAR(gamma_q(0.5, 10.828 / 2), 0.001, 2e-6);   // df 1
  EXPECT_NEAR(gamma_q(5.0, 29.588 / 2), 0.001, 2e-6);   // df 10
  EXPECT_NEAR(gamma_q(15.0, 43.773 / 2), 0.05, 2e-5);   // df 30
  EXPECT_NEAR(gamma_q(50.0, 149.449 / 2), 0.001, 5e-6);  // df 100
  EXPECT_NEAR(gamma_q(1.0, 2.0), std::exp(-2.0), 1e-12);  // df 2: Q = exp(-x/2)
}

// ----------------------------------------------- reference distributions

std::vector<float> test_logits(int n) {
  std::vector<float> l(n);
  for (int i = 0; i < n; ++i) l[i] = static_cast<float>(3.0 * std::sin(1.7 * i + 0.3) + 0.01 * i);
  return l;
}

// The candidate set as the reference sees it: id -> logit, in double.
using Ref = std::map<int32_t, double>;

Ref ref_of(const std::vector<float>& logits) {
  Ref r;
  for (size_t i = 0; i < logits.size(); ++i) r[static_cast<int32_t>(i)] = logits[i];
  return r;
}

std::map<int32_t, double> ref_softmax(const Ref& r, double temperature = 1.0) {
  double mx = -INFINITY;
  for (const auto& [id, l] : r) mx = std::max(mx, l);
  double z = 0.0;
  for (const auto& [id, l] : r) z += std::exp((l - mx) / temperature);
  std::map<int32_t, double> p;
  for (const auto& [id, l] : r) p[id] = std::exp((l - mx) / temperature) / z;
  return p;
}

// Ids by descending probability (logit), ties by id.
std::vector<int32_t> ref_order(const Ref& r) {
  std::vector<int32_t> ids;
  for (const auto& [id, l] : r) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return r.at(a) > r.at(b); });
  return ids;
}

Ref ref_keep(const Ref& r, const std::vector<int32_t>& ids) {
  Ref out;
  for (int32_t id : ids) out[id] = r.at(id);
  return out;
}

Ref ref_top_k(const Ref& r, int k) {
  auto ids = ref_order(r);
  ids.resize(std::min<size_t>(k, ids.size()));
  return ref_keep(r, ids);
}

Ref ref_top_p(const Ref& r, double p) {
  const auto probs = ref_softmax(r);
  std::vector<int32_t> kept;
  double mass = 0.0;
  for (int32_t id : ref_order(r)) {
    kept.push_back(id);
    mass += probs.at(id);
    if (mass >= p) break;
  }
  return ref_keep(r, kept);
}

Ref ref_min_p(const Ref& r, double p) {
  const auto probs = ref_softmax(r);
  double pmax = 0.0;
  for (const auto& [id, q] : probs) pmax = std::max(pmax, q);
  std::vector<int32_t> kept;
  for (const auto& [id, q] : probs) {
    if (q >= p * pmax) kept.push_back(id);
  }
  return ref_keep(r, kept);
}

Ref ref_typical(const Ref& r, double p) {
  const auto probs = ref_softmax(r);
  double h = 0.0;
  for (const auto& [id, q] : probs) h -= q * std::log(q);
  std::vector<int32_t> ids;
  for (const auto& [id, q] : probs) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return std::abs(-std::log(probs.at(a)) - h) < std::abs(-std::log(probs.at(b)) - h);
  });
  std::vector<int32_t> kept;
  double mass = 0.0;
  for (int32_t id : ids) {
    kept.push_back(id);
    mass += probs.at(id);
    if (mass > p) break;
  }
  return ref_keep(r, kept);
}

std::vector<double> ref_probs(const Ref& r, int n_vocab, double temperature = 1.0) {
  std::vector<double> p(n_vocab, 0.0);
  for (const auto& [id, q] : ref_softmax(r, temperature)) p[id] = q;
  return p;
}

constexpr int kDraws = 100000;

std::vector<int64_t> draw_counts(Sampler& s, const std::vector<float>& logits, int draws = kDraws) {
  std::vector<int64_t> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts.at(s.sample(logits));
  return counts;
}

std::unique_ptr<Sampler> chain_of(std::unique_ptr<Sampler> a, uint64_t seed) {
  auto c = std::make_unique<SamplerChain>();
  if (a) c->add(std::move(a));
  c->add(make_dist(seed));
  return c;
}

// The expected probabilities must differ from the untruncated softmax by a
// margin the test can see, else the test would pass for a no-op sampler.
void expect_matches(Sampler& s, const std::vector<float>& logits, const std::vector<double>& expected,
                    bool expect_truncation = true) {
  const auto counts = draw_counts(s, logits);
  const double p = chi_square_p(counts, expected);
  EXPECT_GT(p, 0.001) << s.name();
  if (expect_truncation) {
    EXPECT_LT(chi_square_p(counts, ref_probs(ref_of(logits), static_cast<int>(logits.size()))), 1e-6)
        << s.name() << ": indistinguishable from the plain softmax";
  }
}

// ----------------------------------------------------------- statistical

TEST(SamplerStats, DistMatchesSoftmax) {
  const auto logits = test_logits(50);
  auto s = chain_of(nullptr, 1);
  expect_matches(*s, logits, ref_probs(ref_of(logits), 50), false);
}

TEST(SamplerStats, ChiSquareRejectsAWrongDistribution) {
  const auto logits = test_logits(50);
  auto s = chain_of(make_temperature(1.1f), 2);
  const auto counts = draw_counts(*s, logits);
  EXPECT_LT(chi_square_p(counts, ref_probs(ref_of(logits), 50)), 1e-6);
  EXPECT_GT(chi_square_p(counts, ref_probs(ref_of(logits), 50, 1.1)), 0.001);
}

TEST(SamplerStats, Temperature) {
  const auto logits = test_logits(50);
  auto s = chain_of(make_temperature(0.7f), 3);
  expect_matches(*s, logits, ref_probs(ref_of(logits), 50, 0.7));
}

TEST(SamplerStats, TopK) {
  const auto logits = test_logits(50);
  auto s = chain_of(make_top_k(10), 4);
  expect_matches(*s, logits, ref_probs(ref_top_k(ref_of(logits), 10), 50));
}

TEST(SamplerStats, TopP) {
  const auto logits = test_logits(50);
  auto s = chain_of(make_top_p(0.8f), 5);
  expect_matches(*s, logits, ref_probs(ref_top_p(ref_of(logits), 0.8), 50));
}

TEST(SamplerStats, TopPWalksPastSeveralChunks) {
  // A flat distribution over 400 tokens: the nucleus (~340 tokens) needs
  // several chunks of walk_in_order.
  std::vector<float> logits(400);
  for (int i = 0; i < 400; ++i) logits[i] = static_cast<float>(0.3 * std::sin(0.9 * i) + 0.001 * i);
  const Ref nucleus = ref_top_p(ref_of(logits), 0.85);
  ASSERT_GT(nucleus.size(), 250u);
  auto s = chain_of(make_top_p(0.85f), 6);
  const auto counts = draw_counts(*s, logits);
  for (int i = 0; i < 400; ++i) {
    if (!nucleus.count(i)) {
      ASSERT_EQ(counts[i], 0) << "token " << i << " is outside the nucleus";
    }
  }
  EXPECT_GT(chi_square_p(counts, ref_probs(nucleus, 400)), 0.001);
}

TEST(SamplerStats, MinP) {
  const auto logits = test_logits(50);
  auto s = chain_of(make_min_p(0.1f), 7);
  expect_matches(*s, logits, ref_probs(ref_min_p(ref_of(logits), 0.1), 50));
}

TEST(SamplerStats, Typical) {
  const auto logits = test_logits(50);
  auto s = chain_of(make_typical(0.7f), 8);
  expect_matches(*s, logits, ref_probs(ref_typical(ref_of(logits), 0.7), 50));
}

TEST(SamplerStats, LogitBias) {
  const auto logits = test_logits(50);
  const std::vector<std::pair<int32_t, float>> bias = {{3, 2.0f}, {10, -INFINITY}, {17, -1.5f}, {3, 0.5f}};
  auto s = chain_of(make_logit_bias(50, bias), 9);
  Ref r = ref_of(logits);
  r[3] += 2.5;
  r[17] -= 1.5;
  r.erase(10);
  expect_matches(*s, logits, ref_probs(r, 50));
}

TEST(SamplerStats, DefaultChain) {
  const auto logits = test_logits(50);
  SamplingParams params;  // top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
  params.seed = 10;
  auto s = make_sampler(params, 50);
  Ref r = ref_min_p(ref_top_p(ref_top_k(ref_of(logits), 40), 0.95), 0.05);
  expect_matches(*s, logits, ref_probs(r, 50, 0.8));
}

TEST(SamplerStats, ChainOfAll) {
  const auto logits = test_logits(60);
  SamplingParams params;
  params.top_k = 30;
  params.typical_p = 0.9f;
  params.top_p = 0.9f;
  params.min_p = 0.02f;
  params.temperature = 1.5f;
  params.logit_bias = {{5, 1.0f}};
  params.seed = 11;
  auto s = make_sampler(params, 60);
  Ref r = ref_of(logits);
  r[5] += 1.0;
  r = ref_min_p(ref_top_p(ref_typical(ref_top_k(r, 30), 0.9), 0.9), 0.02);
  expect_matches(*s, logits, ref_probs(r, 60, 1.5));
}

TEST(SamplerStats, Llama2cTopP) {
  const auto logits = test_logits(50);
  SamplingParams params;
  params.rng = SamplingParams::Rng::Llama2c;
  params.temperature = 1.2f;
  params.top_p = 0.7f;
  params.seed = 12;
  auto s = make_sampler(params, 50);
  // run.c's nucleus: the shortest prefix whose mass is > p (strictly), at the temperature.
  Ref scaled;
  for (int i = 0; i < 50; ++i) scaled[i] = logits[i] / 1.2;
  const auto probs = ref_softmax(scaled);
  std::vector<int32_t> kept;
  double mass = 0.0;
  for (int32_t id : ref_order(scaled)) {
    kept.push_back(id);
    mass += probs.at(id);
    if (mass > 0.7) break;
  }
  expect_matches(*s, logits, ref_probs(ref_keep(scaled, kept), 50));
}

TEST(SamplerStats, Llama2cFullDistribution) {
  const auto logits = test_logits(50);
  auto s = make_llama2c(0.9f, 1.0f, 13);
  auto c = std::make_unique<SamplerChain>();
  c->add(std::move(s));
  expect_matches(*c, logits, ref_probs(ref_of(logits), 50, 0.9));
}

// SamplingParams with some fields set: params({.field = value}) would warn
// (-Wmissing-field-initializers), so fields are set by a lambda.
template <typename Set>
SamplingParams params(Set set) {
  SamplingParams p;
  set(p);
  return p;
}

// ------------------------------------------------------------- greedy

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  auto s = make_sampler(params([](SamplingParams& p) { p.temperature = 0.0f; }), 6);
  EXPECT_EQ(s->sample(std::vector<float>{1, 5, 2, 5, -1, 0}), 1);
  EXPECT_EQ(s->sample(std::vector<float>{-INFINITY, -3, -2, -7, -INFINITY, -2.5f}), 2);
  auto t0 = std::make_unique<SamplerChain>();
  t0->add(make_temperature(0.0f));  // temperature 0 leaves only the maximum
  t0->add(make_dist(1));
  for (int i = 0; i < 100; ++i) ASSERT_EQ(t0->sample(std::vector<float>{1, 2, 9, 3, 9, 0}), 2);
}

// A selecting sampler that records the logits it receives and picks index 0.
class Capture final : public Sampler {
 public:
  explicit Capture(std::map<int32_t, float>* seen) : seen_(seen) {}
  std::string name() const override { return "capture"; }
  void apply(Candidates& cur) override {
    seen_->clear();
    for (const TokenData& t : cur) (*seen_)[t.id] = t.logit;
    cur.selected = 0;
  }
  std::unique_ptr<Sampler> clone() const override { return std::make_unique<Capture>(*this); }

 private:
  std::map<int32_t, float>* seen_;
};

// ------------------------------------------------ penalties and bias

TEST(Penalties, RepeatFrequencyPresenceByHand) {
  std::map<int32_t, float> seen;
  SamplerChain c(6);
  c.add(make_penalties(64, 2.0f, 0.5f, 0.25f));
  c.add(std::make_unique<Capture>(&seen));
  for (int32_t t : {1, 2, 2, 4, 4, 4}) c.accept(t);
  const std::vector<float> logits = {3.0f, 3.0f, -1.0f, 0.0f, 6.0f, 1.0f};
  EXPECT_EQ(c.sample(logits), 0);  // Capture picks index 0: token 0, now accepted too
  // token 1 (count 1): 3 / 2 - 1 * 0.5 - 0.25 = 0.75
  // token 2 (count 2): -1 * 2 - 2 * 0.5 - 0.25 = -3.25
  // token 4 (count 3): 6 / 2 - 3 * 0.5 - 0.25 = 1.25
  const std::map<int32_t, float> expected = {{0, 3.0f}, {1, 0.75f}, {2, -3.25f}, {3, 0.0f}, {4, 1.25f}, {5, 1.0f}};
  EXPECT_EQ(seen, expected);
  // Token 0 was accepted by sample(): (count 1) 3 / 2 - 0.5 - 0.25 = 0.75; a logit of 0 is multiplied.
  c.accept(3);
  c.sample(logits);
  const std::map<int32_t, float> expected2 = {{0, 0.75f}, {1, 0.75f}, {2, -3.25f}, {3, -0.75f}, {4, 1.25f}, {5, 1.0f}};
  EXPECT_EQ(seen, expected2);
}

TEST(Penalties, WindowOfLastN) {
  std::map<int32_t, float> seen;
  SamplerChain c(5);
  c.add(make_penalties(3, 1.0f, 1.0f, 0.0f));
  c.add(std::make_unique<Capture>(&seen));
  for (int32_t t : {1, 1, 2, 3, 4}) c.accept(t);  // window: 2, 3, 4
  c.sample(std::vector<float>{0, 0, 0, 0, 0});
  EXPECT_EQ(seen, (std::map<int32_t, float>{{0, 0}, {1, 0}, {2, -1}, {3, -1}, {4, -1}}));

  SamplerChain all(5);  // last_n = -1: the whole history
  all.add(make_penalties(-1, 1.0f, 1.0f, 0.0f));
  all.add(std::make_unique<Capture>(&seen));
  for (int32_t t : {1, 1, 2, 3, 4}) all.accept(t);
  all.sample(std::vector<float>{0, 0, 0, 0, 0});
  EXPECT_EQ(seen, (std::map<int32_t, float>{{0, 0}, {1, -2}, {2, -1}, {3, -1}, {4, -1}}));

  SamplerChain off(5);  // last_n = 0: off
  off.add(make_penalties(0, 3.0f, 1.0f, 1.0f));
  off.add(std::make_unique<Capture>(&seen));
  for (int32_t t : {1, 2}) off.accept(t);
  off.sample(std::vector<float>{1, 1, 1, 1, 1});
  EXPECT_EQ(seen, (std::map<int32_t, float>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}}));

  c.reset();  // history cleared
  c.sample(std::vector<float>{0, 0, 0, 0, 0});
  EXPECT_EQ(seen, (std::map<int32_t, float>{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}}));
}

TEST(Penalties, AfterTopKUseTheLookupPath) {
  std::map<int32_t, float> seen;
  SamplerChain c(8);
  c.add(make_top_k(3));  // keeps ids 5, 6, 7, no longer in id order
  c.add(make_penalties(8, 2.0f, 0.0f, 0.0f));
  c.add(make_logit_bias(8, {{6, 0.5f}, {0, 9.0f}}));
  c.add(std::make_unique<Capture>(&seen));
  c.accept(7);
  c.accept(2);
  c.sample(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 8});
  EXPECT_EQ(seen, (std::map<int32_t, float>{{5, 5.0f}, {6, 6.5f}, {7, 4.0f}}));
}

TEST(LogitBias, AddsBansAndSums) {
  std::map<int32_t, float> seen;
  SamplerChain c(5);
  c.add(make_logit_bias(5, {{1, 1.5f}, {3, -INFINITY}, {1, 0.25f}, {4, -2.0f}}));
  c.add(std::make_unique<Capture>(&seen));
  c.sample(std::vector<float>{0.5f, 1.0f, 2.0f, 10.0f, 0.0f});
  EXPECT_EQ(seen, (std::map<int32_t, float>{{0, 0.5f}, {1, 2.75f}, {2, 2.0f}, {3, -INFINITY}, {4, -2.0f}}));

  // Greedy never picks a banned token, even the highest.
  auto s = make_sampler(params([](SamplingParams& p) { p.temperature = 0.0f; p.logit_bias = {{3, -INFINITY}}; }), 5);
  EXPECT_EQ(s->sample(std::vector<float>{0.5f, 1.0f, 2.0f, 10.0f, 0.0f}), 2);
}

TEST(LogitBias, AllBannedIsAnError) {
  auto s = make_sampler(params([](SamplingParams& p) {
                          p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
                          p.seed = 1;
                        }),
                        2);
  EXPECT_THROW(s->sample(std::vector<float>{1, 2}), Error);
}

TEST(LogitBias, ComesBeforePenaltiesAsInLlamaCpp) {
  // Token 0 (seen once) has logit 1 and bias +1: bias first gives (1 + 1) / 2 = 1;
  // the other order would give 1 / 2 + 1 = 1.5. Token 1 (seen once): logit 1 and
  // bias -3: (1 - 3) * 2 = -4 (the penalty multiplies the now negative logit).
  auto s = make_sampler(params([](SamplingParams& p) {
                          p.temperature = 0.0f;
                          p.repeat_penalty = 2.0f;
                          p.logit_bias = {{0, 1.0f}, {1, -3.0f}};
                          p.n_probs = 3;
                        }),
                        3);
  EXPECT_EQ(s->name(), "chain(logit-bias, penalties, greedy)");
  s->accept(0);
  s->accept(1);
  EXPECT_EQ(s->sample(std::vector<float>{1.0f, 1.0f, 0.5f}), 0);
  // Greedy logprobs are the softmax of the adjusted logits {1, -4, 0.5}.
  const double z = std::log(std::exp(1.0) + std::exp(-4.0) + std::exp(0.5));
  const Logprobs lp = s->last_logprobs();
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_NEAR(lp.top[0].logprob, 1.0 - z, 1e-6);
  EXPECT_EQ(lp.top[1].token, 2);
  EXPECT_NEAR(lp.top[1].logprob, 0.5 - z, 1e-6);
  EXPECT_EQ(lp.top[2].token, 1);
  EXPECT_NEAR(lp.top[2].logprob, -4.0 - z, 1e-6);
}

// ------------------------------------------------------ reproducibility

std::vector<int32_t> run(Sampler& s, int n, int n_vocab) {
  std::vector<int32_t> out;
  const auto logits = test_logits(n_vocab);
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits));
  return out;
}

SamplingParams penalized(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  p.temperature = 1.3f;
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = 0.2f;
  p.min_p = 0.0f;
  return p;
}

TEST(Reproducibility, SameSeedSameTokens) {
  auto a = make_sampler(penalized(42), 100);
  auto b = make_sampler(penalized(42), 100);
  const auto ta = run(*a, 500, 100);
  EXPECT_EQ(ta, run(*b, 500, 100));
  auto c = make_sampler(penalized(43), 100);
  EXPECT_NE(ta, run(*c, 500, 100));
  a->reset();  // reseeds and clears the history
  EXPECT_EQ(ta, run(*a, 500, 100));
}

TEST(Reproducibility, InterleavedRequestsKeepTheirStreams) {
  auto alone = make_sampler(penalized(7), 100);
  const auto expected = run(*alone, 300, 100);
  auto a = make_sampler(penalized(7), 100);
  auto b = make_sampler(penalized(8), 100);
  SamplingParams lp;
  lp.rng = SamplingParams::Rng::Llama2c;
  lp.seed = 7;
  auto l = make_sampler(lp, 100);
  const auto logits = test_logits(100);
  std::vector<int32_t> got;
  for (int i = 0; i < 300; ++i) {
    b->sample(logits);
    got.push_back(a->sample(logits));
    l->sample(logits);
    b->sample(logits);
  }
  EXPECT_EQ(got, expected);
}

TEST(Reproducibility, CloneContinuesTheSameStream) {
  auto a = make_sampler(penalized(5), 100);
  run(*a, 50, 100);
  auto b = a->clone();
  EXPECT_EQ(run(*a, 200, 100), run(*b, 200, 100));
}

TEST(Reproducibility, RandomSeedIsResolved) {
  EXPECT_EQ(resolve_seed(123), 123u);
  EXPECT_NE(resolve_seed(kRandomSeed), kRandomSeed);
}

// ------------------------------------------------------------ logprobs

TEST(Logprobs, OverTheDistributionAfterTheChain) {
  const auto logits = test_logits(50);
  auto c = std::make_unique<SamplerChain>();
  c->add(make_top_k(5));
  c->add(make_temperature(2.0f));
  c->add(make_dist(3));
  c->set_n_probs(3);
  const int32_t tok = c->sample(logits);
  const Ref kept = ref_top_k(ref_of(logits), 5);
  const auto probs = ref_softmax(kept, 2.0);
  const Logprobs lp = c->last_logprobs();
  EXPECT_EQ(lp.chosen.token, tok);
  EXPECT_NEAR(lp.chosen.logprob, std::log(probs.at(tok)), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  const auto order = ref_order(kept);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lp.top[i].token, order[i]);
    EXPECT_NEAR(lp.top[i].logprob, std::log(probs.at(order[i])), 1e-5);
  }
  EXPECT_EQ(c->last_logprobs(10).top.size(), 5u);  // no more than the candidates left
}

TEST(Logprobs, GreedyReportsTheSoftmaxOfTheLogits) {
  const auto logits = test_logits(50);
  auto s = make_sampler(params([](SamplingParams& p) { p.temperature = 0.0f; p.n_probs = 2; }), 50);
  EXPECT_THROW(s->last_logprobs(), Error);
  const int32_t tok = s->sample(logits);
  const auto probs = ref_softmax(ref_of(logits));
  const Logprobs lp = s->last_logprobs();
  EXPECT_EQ(lp.chosen.token, tok);
  EXPECT_NEAR(lp.chosen.logprob, std::log(probs.at(tok)), 1e-5);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].token, tok);
  EXPECT_NEAR(lp.top[1].logprob, std::log(probs.at(ref_order(ref_of(logits))[1])), 1e-5);
}

// -------------------------------------------------------------- llama2.c

TEST(Llama2c, RngMatchesRunC) {
  // random_u32 / random_f32 of run.c from rng_state = 133742, worked out by hand
  // (xorshift64* in exact integer arithmetic).
  Llama2cRng r(133742);
  EXPECT_EQ(r.next_u32(), 0xb4d0037eu);
  EXPECT_EQ(r.next_u32(), 0x9f67c4b0u);
  EXPECT_EQ(r.next_u32(), 0x89db8337u);
  Llama2cRng f(133742);
  EXPECT_EQ(f.next_f32(), 0.7062990069389343f);  // 0xb4d003 / 2^24
  EXPECT_EQ(f.next_f32(), 0.6226770877838135f);
  EXPECT_EQ(f.next_f32(), 0.5385057330131531f);
  EXPECT_EQ(f.next_f32(), 0.5325804352760315f);
  EXPECT_EQ(f.next_f32(), 0.32792866230010986f);
  Llama2cRng one(1);
  EXPECT_EQ(one.next_u32(), 0x47e4ce4bu);
}

std::vector<int32_t> llama2c_run(const std::vector<float>& logits, float temp, float topp, int n,
                                 uint64_t seed = 133742) {
  SamplingParams p;
  p.rng = SamplingParams::Rng::Llama2c;
  p.temperature = temp;
  p.top_p = topp;
  p.seed = seed;
  auto s = make_sampler(p, static_cast<int32_t>(logits.size()));
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s->sample(logits));
  return out;
}

TEST(Llama2c, SampleMultByHand) {
  // temp 2: probs of {1,2,3,4}/2 = .1015 .1674 .2760 .4551, cdf .1015 .2689 .5449 1;
  // coins .7063 .6227 .5385 .5326 .3279 ... (top_p 1 -> sample_mult).
  EXPECT_EQ(llama2c_run({1, 2, 3, 4}, 2.0f, 1.0f, 8), (std::vector<int32_t>{3, 3, 2, 2, 2, 3, 3, 1}));
  EXPECT_EQ(llama2c_run({1, 2, 3, 4}, 2.0f, 0.0f, 8), (std::vector<int32_t>{3, 3, 2, 2, 2, 3, 3, 1}));
}

TEST(Llama2c, SampleToppByHand) {
  // probs .4046(2) .2454(3) .1488(6) .0903(0) .0548(5) ... cumulative passes .9
  // at the 5th: nucleus of 5, mass .9439; r = coin * .9439.
  EXPECT_EQ(llama2c_run({0.5f, -1.0f, 2.0f, 1.5f, -3.0f, 0.0f, 1.0f, -0.5f}, 1.0f, 0.9f, 8),
            (std::vector<int32_t>{6, 3, 3, 3, 2, 0, 6, 2}));
  // Two tokens: .3553(0) .3135(1), mass .6688 > .5; r = coin * .6688.
  EXPECT_EQ(llama2c_run({2.0f, 1.9f, -20.0f, 1.8f, -20.0f, 0.5f}, 0.8f, 0.5f, 4),
            (std::vector<int32_t>{1, 1, 1, 1}));
}

TEST(Llama2c, TiesKeepIndexOrderAndTheMassMustExceedP) {
  // Equal probabilities stay in index order (glibc's qsort is a stable merge sort).
  // p = .9: the nucleus is all four (.25 .5 .75 1); token = floor(coin * 4).
  EXPECT_EQ(llama2c_run({0, 0, 0, 0}, 1.0f, 0.9f, 8), (std::vector<int32_t>{2, 2, 2, 2, 1, 3, 2, 0}));
  // p = .5: a mass of exactly .5 is not > .5, so the nucleus is three; token = floor(coin * .75 * 4).
  EXPECT_EQ(llama2c_run({0, 0, 0, 0}, 1.0f, 0.5f, 4), (std::vector<int32_t>{2, 1, 1, 1}));
}

std::vector<float> llama2c_test_logits() {
  std::vector<float> l(1000);  // a permutation of k / 64 - 8, exact in float
  for (int i = 0; i < 1000; ++i) l[i] = static_cast<float>((i * 7919) % 1000) / 64.0f - 8.0f;
  return l;
}

TEST(Llama2c, ThousandTokenVocabulary) {
  const auto l = llama2c_test_logits();
  EXPECT_EQ(llama2c_run(l, 1.0f, 0.9f, 20), (std::vector<int32_t>{865, 13, 803, 482, 383, 458, 186, 889, 519, 507,
                                                                  667, 25, 137, 729, 248, 531, 642, 988, 421, 642}));
  EXPECT_EQ(llama2c_run(l, 0.7f, 0.95f, 20), (std::vector<int32_t>{50, 161, 593, 272, 457, 359, 371, 247, 309, 692,
                                                                   420, 99, 38, 198, 149, 568, 321, 741, 322, 321}));
  EXPECT_EQ(llama2c_run(l, 1.3f, 0.0f, 20), (std::vector<int32_t>{704, 619, 544, 533, 322, 877, 706, 149, 507, 717,
                                                                  371, 351, 877, 594, 830, 173, 25, 396, 889, 25}));
  EXPECT_EQ(llama2c_run(l, 0.0f, 0.9f, 2), (std::vector<int32_t>{321, 321}));
}

TEST(Llama2c, SeedZeroIsRandomAsInRunC) {
  // A literal zero state would give coin 0 forever, i.e. always token 0 here.
  const auto tokens = llama2c_run({0, 0, 0, 0}, 1.0f, 1.0f, 64, 0);
  EXPECT_NE(std::count(tokens.begin(), tokens.end(), 0), 64);
  Llama2cRng zero(0);
  EXPECT_EQ(zero.next_u32(), 0u);
}

TEST(Llama2c, LogprobsOverTheNucleus) {
  SamplingParams p;
  p.rng = SamplingParams::Rng::Llama2c;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.seed = 133742;
  p.n_probs = 8;
  auto s = make_sampler(p, 8);
  EXPECT_EQ(s->sample(std::vector<float>{0.5f, -1.0f, 2.0f, 1.5f, -3.0f, 0.0f, 1.0f, -0.5f}), 6);
  const Logprobs lp = s->last_logprobs();
  ASSERT_EQ(lp.top.size(), 5u);  // the nucleus
  EXPECT_EQ(lp.top[0].token, 2);
  EXPECT_NEAR(lp.chosen.logprob, std::log(0.14884953 / 0.94391638), 1e-5);
}

// --------------------------------------------------------- large vocab

TEST(Sampler, TopKAndTopPOnALargeVocabularyMatchAFullSort) {
  std::mt19937 gen(99);
  std::vector<float> logits(131072);
  for (float& l : logits) l = static_cast<float>(gen() % 100000) / 7919.0f;  // ties happen
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });

  std::map<int32_t, float> seen;
  SamplerChain k;
  k.add(make_top_k(40));
  k.add(std::make_unique<Capture>(&seen));
  k.sample(logits);
  std::map<int32_t, float> expected;
  for (int i = 0; i < 40; ++i) expected[ids[i]] = logits[ids[i]];
  EXPECT_EQ(seen, expected);

  SamplerChain tp;
  tp.add(make_top_p(0.2f));
  tp.add(std::make_unique<Capture>(&seen));
  tp.sample(logits);
  const Ref nucleus = ref_top_p(ref_of(logits), 0.2);
  ASSERT_GT(nucleus.size(), 1000u);  // several chunks of the walk
  EXPECT_EQ(seen.size(), nucleus.size());
  for (const auto& [id, l] : nucleus) EXPECT_EQ(seen.count(id), 1u) << id;
}

// ----------------------------------------------------------- validation

void expect_error(const SamplingParams& p, const std::string& field, const std::string& value, int n_vocab = 100) {
  try {
    make_sampler(p, n_vocab);
    ADD_FAILURE() << "no error for " << field << " = " << value;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    EXPECT_NE(msg.find(value), std::string::npos) << msg;
  }
}

TEST(Validation, NamesTheFieldAndTheValue) {
  expect_error(params([](SamplingParams& p) { p.top_p = 1.5f; }), "top_p", "1.5");
  expect_error(params([](SamplingParams& p) { p.top_p = -0.25f; }), "top_p", "-0.25");
  expect_error(params([](SamplingParams& p) { p.top_k = -1; }), "top_k", "-1");
  expect_error(params([](SamplingParams& p) { p.temperature = NAN; }), "temperature", "nan");
  expect_error(params([](SamplingParams& p) { p.temperature = INFINITY; }), "temperature", "inf");
  expect_error(params([](SamplingParams& p) { p.min_p = 2.0f; }), "min_p", "2");
  expect_error(params([](SamplingParams& p) { p.typical_p = NAN; }), "typical_p", "nan");
  expect_error(params([](SamplingParams& p) { p.repeat_penalty = 0.0f; }), "repeat_penalty", "0");
  expect_error(params([](SamplingParams& p) { p.repeat_last_n = -2; }), "repeat_last_n", "-2");
  expect_error(params([](SamplingParams& p) { p.frequency_penalty = NAN; }), "frequency_penalty", "nan");
  expect_error(params([](SamplingParams& p) { p.logit_bias = {{100, 1.0f}}; }), "logit_bias token", "100");
  expect_error(params([](SamplingParams& p) { p.logit_bias = {{3, INFINITY}}; }), "logit_bias bias", "inf");
  expect_error(params([](SamplingParams& p) { p.n_probs = -1; }), "n_probs", "-1");
  expect_error(SamplingParams{}, "n_vocab", "0", 0);
  const auto edges = params([](SamplingParams& p) {
    p.temperature = -1.0f;
    p.top_p = 0.0f;
    p.min_p = 1.0f;
    p.seed = 1;
  });
  EXPECT_NO_THROW(make_sampler(edges, 10));
}

TEST(Validation, BadRowsAndTokens) {
  auto s = make_sampler(params([](SamplingParams& p) { p.seed = 1; }), 4);
  EXPECT_THROW(s->sample(std::vector<float>{1, 2, 3}), Error);        // wrong size
  EXPECT_THROW(s->sample(std::vector<float>{1, NAN, 3, 4}), Error);   // NaN
  EXPECT_THROW(s->sample(std::vector<float>{}), Error);
  EXPECT_THROW(s->accept(4), Error);
  EXPECT_THROW(s->accept(-1), Error);
  SamplerChain no_selector;
  no_selector.add(make_top_k(2));
  EXPECT_THROW(no_selector.sample(std::vector<float>{1, 2, 3}), Error);
}

}  // namespace
}  // namespace tokamak::sampling
