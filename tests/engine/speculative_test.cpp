// Speculative decoding in the Engine, against decoding without it:
//  - greedy: the same tokens, text and logprobs for 64 prompts, alone and
//    batched, with a draft model and with prompt lookup, and under preemption;
//  - sampled: the same distribution at each of the first 8 positions over
//    100,000 seeds (a two-sample chi-square test), for temperature 1 and for a
//    top-k/top-p chain, with a draft model unlike the target; and the same
//    test catches a wrong acceptance rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "io/output_file.h"
#include "tools/make_model.h"
#include "model/model.h"
#include "tools/synthetic_vocab.h"
#include "sampling/speculative.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {
namespace {

using testing::test_data;

const char* const kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, she saw "
    "a big red ball in the park. She ran to the ball and kicked it high into the sky. The ball came down and hit a "
    "tree. A bird flew out of the tree and sang a happy song. Lily smiled and sang with the bird.";

std::string story_words(int first, int count) {
  std::string all = kStory, out;
  int word = 0;
  for (char ch : all) {
    if (ch == ' ') ++word;
    if (word >= first && word < first + count) out += ch;
  }
  return out;
}

void expect_same(const std::vector<RequestResult>& got, const std::vector<RequestResult>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].completions.size(), want[i].completions.size());
    for (size_t c = 0; c < got[i].completions.size(); ++c) {
      const CompletionResult& g = got[i].completions[c];
      const CompletionResult& w = want[i].completions[c];
      EXPECT_EQ(g.token_ids, w.token_ids) << "request " << i;
      EXPECT_EQ(g.text, w.text) << "request " << i;
      EXPECT_EQ(g.finish, w.finish) << "request " << i;
      ASSERT_EQ(g.logprobs.size(), w.logprobs.size()) << "request " << i;
      for (size_t t = 0; t < g.logprobs.size(); ++t) {
        EXPECT_EQ(g.logprobs[t].chosen.token, w.logprobs[t].chosen.token);
        EXPECT_EQ(g.logprobs[t].chosen.logprob, w.logprobs[t].chosen.logprob) << "request " << i << " token " << t;
      }
    }
  }
}

class SpeculativeGreedyTest : public ::testing::Test {
 protected:
  SpeculativeGreedyTest()
      : model_(Model::load(test_data("models/stories260K/stories260K.gguf"))),
        draft_(Model::load(test_data("fixtures/models/stories260K-q4_0.gguf"))),
        tokenizer_(Tokenizer::from_gguf(*model_.gguf())) {}

  EngineOptions options() const {
    EngineOptions o;
    o.max_model_len = 256;
    o.max_num_seqs = 64;
    o.max_num_batched_tokens = 512;
    o.threads = 2;
    o.enable_prefix_caching = false;
    return o;
  }
  EngineOptions with_draft() const {
    EngineOptions o = options();
    o.speculative.draft_model = &draft_;
    o.speculative.draft_max = 4;
    o.speculative.adaptive_depth = false;  // draft every step: the test is about what drafting changes
    return o;
  }
  EngineOptions with_lookup() const {
    EngineOptions o = options();
    o.speculative.ngram = 2;
    o.speculative.draft_max = 5;
    o.speculative.adaptive_depth = false;
    return o;
  }

  // 64 greedy requests: story prompts of 1..40 words; some with a repetition
  // penalty (the verifying chain must see the drafts), stop strings, logprobs.
  static std::vector<Request> prompts() {
    std::vector<Request> rs;
    for (int i = 0; i < 64; ++i) {
      Request r;
      r.prompt = Prompt::from_text(story_words((i * 7) % 20, 1 + (i * 13) % 40));
      GenerationParams& p = r.params;
      p.sampling.temperature = 0.0f;
      p.max_tokens = 24 + (i * 5) % 40;
      if (i % 4 == 1) p.sampling.repeat_penalty = 1.3f;
      if (i % 8 == 3) p.stop = {"the park"};
      if (i % 6 == 5) p.logprobs = true, p.sampling.n_probs = 3;
      rs.push_back(std::move(r));
    }
    return rs;
  }

  std::vector<RequestResult> each_alone(const std::vector<Request>& rs, const EngineOptions& o) const {
    Engine e(model_, tokenizer_, o);
    std::vector<RequestResult> out;
    for (const Request& r : rs) out.push_back(e.generate({r}).at(0));
    return out;
  }

  Model model_;
  Model draft_;
  Tokenizer tokenizer_;
};

TEST_F(SpeculativeGreedyTest, DraftModelKeepsEveryTokenAloneAndBatched) {
  const std::vector<Request> rs = prompts();
  const std::vector<RequestResult> want = each_alone(rs, options());
  expect_same(each_alone(rs, with_draft()), want);
  Engine e(model_, tokenizer_, with_draft());
  expect_same(e.generate(rs), want);
  // Drafts were made, some kept and some rejected (both paths ran).
  const EngineStats& s = e.stats();
  EXPECT_GT(s.spec_accepted_tokens, 0);
  EXPECT_LT(s.spec_accepted_tokens, s.spec_draft_tokens);
  EXPECT_EQ(e.kv_cache().pool().n_used(), 0);
  e.scheduler().check_invariants();
}

TEST_F(SpeculativeGreedyTest, PromptLookupKeepsEveryTokenAloneAndBatched) {
  const std::vector<Request> rs = prompts();
  const std::vector<RequestResult> want = each_alone(rs, options());
  expect_same(each_alone(rs, with_lookup()), want);
  Engine e(model_, tokenizer_, with_lookup());
  expect_same(e.generate(rs), want);
  EXPECT_GT(e.stats().spec_accepted_tokens, 0);
  EXPECT_LT(e.stats().spec_accepted_tokens, e.stats().spec_draft_tokens);
}

TEST_F(SpeculativeGreedyTest, PreemptionAndPrefixCacheKeepEveryToken) {
  const std::vector<Request> rs = prompts();
  const std::vector<RequestResult> want = each_alone(rs, options());
  EngineOptions o = with_draft();
  o.enable_prefix_caching = true;
  // 20 blocks of 16 tokens for 64 requests of up to ~110 tokens (the draft,
  // of the same shape, takes the other half of the budget).
  o.kv_memory.bytes = kv_layout_for(model_.config(), o.kv_format).block_bytes() * 40;
  Engine e(model_, tokenizer_, o);
  EXPECT_EQ(e.kv_cache().pool().n_blocks(), 20);
  expect_same(e.generate(rs), want);
  EXPECT_GT(e.stats().preemptions, 0);
  EXPECT_GT(e.stats().spec_accepted_tokens, 0);
  EXPECT_EQ(e.kv_cache().pool().n_used(), 0);
  e.scheduler().check_invariants();
}

TEST_F(SpeculativeGreedyTest, BadOptionsAreRefused) {
  EngineOptions o = with_draft();
  o.speculative.ngram = 3;
  EXPECT_THROW(Engine(model_, tokenizer_, o), Error);  // two proposers
  o = with_draft();
  o.speculative.draft_max = 0;
  EXPECT_THROW(Engine(model_, tokenizer_, o), Error);
  o = with_draft();
  o.kv_format.recent = 64;
  o.kv_format.k_type = o.kv_format.v_type = kernels::KvType::Q8;
  EXPECT_THROW(Engine(model_, tokenizer_, o), Error);
}

// --- distribution ---

// A one-layer model of 32 dimensions over the smallest synthetic vocabulary:
// cheap enough for 100,000 sampled sequences per run.
std::filesystem::path make_nano(uint64_t seed) {
  static const ModelPreset kNano{"nano", "llama", 32, 64, 1, 2, 1, kMinSyntheticVocab, 64, 10000.0f, 1e-5f,
                                 false};
  MakeModelOptions o;
  o.preset = kNano;
  o.ftype = FileType::AllF32;
  o.seed = seed;
  ThreadPool pool(1);
  const std::filesystem::path out = testing::temp_file("spec_nano_" + std::to_string(seed) + ".gguf");
  io::OutputFile file = io::OutputFile::create(out);
  make_model(o, file, pool);
  file.commit();
  return out;
}

// Q(a, x), the regularized upper incomplete gamma function: a series below
// a + 1, a continued fraction (modified Lentz) above.
double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && term > sum * 1e-15; ++n) term *= x / (a + n), sum += term;
    return 1.0 - sum * std::exp(log_prefix);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

// Two samples of equal size: chi-square over the tokens either drew at least
// 10 times in all (the rarer ones pooled into one bin). Returns the p-value.
double two_sample_p_value(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  double chi2 = 0;
  int bins = 0;
  int64_t rare_a = 0, rare_b = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] + b[i] < 10) {
      rare_a += a[i], rare_b += b[i];
      continue;
    }
    chi2 += static_cast<double>((a[i] - b[i]) * (a[i] - b[i])) / static_cast<double>(a[i] + b[i]);
    ++bins;
  }
  if (rare_a + rare_b > 0) {
    chi2 += static_cast<double>((rare_a - rare_b) * (rare_a - rare_b)) / static_cast<double>(rare_a + rare_b);
    ++bins;
  }
  return bins > 1 ? gamma_q((bins - 1) / 2.0, chi2 / 2.0) : 1.0;
}

constexpr int kPositions = 8;

// counts[position][token] over `seeds` requests of the same prompt.
std::vector<std::vector<int64_t>> position_counts(const Model& model, const Tokenizer& tokenizer, const EngineOptions& o,
                                                  const sampling::SamplingParams& chain, uint64_t first_seed,
                                                  int seeds) {
  Engine e(model, tokenizer, o);
  std::vector<std::vector<int64_t>> counts(kPositions, std::vector<int64_t>(static_cast<size_t>(model.config().n_vocab)));
  constexpr int kWave = 4096;  // requests queued at once (the engine runs max_num_seqs of them)
  for (int done = 0; done < seeds; done += kWave) {
    std::vector<Request> rs;
    for (int i = done; i < std::min(seeds, done + kWave); ++i) {
      Request r;
      r.prompt = Prompt::from_ids({1, 40, 7, 99});
      r.params.sampling = chain;
      r.params.sampling.seed = first_seed + static_cast<uint64_t>(i);
      r.params.max_tokens = kPositions;
      r.params.ignore_eos = true;
      rs.push_back(std::move(r));
    }
    for (const RequestResult& res : e.generate(rs)) {
      const std::vector<int32_t>& t = res.completions.at(0).token_ids;
      EXPECT_EQ(t.size(), static_cast<size_t>(kPositions));
      for (size_t p = 0; p < t.size() && p < kPositions; ++p) ++counts[p][static_cast<size_t>(t[p])];
    }
  }
  if (o.speculative.enabled()) {
    EXPECT_GT(e.stats().spec_accepted_tokens, 0);
    EXPECT_LT(e.stats().spec_accepted_tokens, e.stats().spec_draft_tokens);
  }
  return counts;
}

// The most common mistake: a rejected draft replaced by a draw from p
// instead of from the residual max(0, p - q). Its tokens lean toward q.
sampling::Verdict resample_from_target(const sampling::Candidates& p, const sampling::DraftedToken& d,
                                       sampling::RequestRng& rng, std::vector<float>&) {
  const double p_x = sampling::probability_of(p, d.token);
  const double q_x = d.q == nullptr ? 1.0 : sampling::probability_of(*d.q, d.token);
  if (rng.uniform() * q_x < p_x) return {true, d.token};
  return {false, sampling::draw_token(p, rng.uniform())};
}

class SpeculativeDistributionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_path_ = new std::filesystem::path(make_nano(1));
    draft_path_ = new std::filesystem::path(make_nano(2));  // another random model: q far from p
  }
  static void TearDownTestSuite() {
    std::filesystem::remove(*target_path_);
    std::filesystem::remove(*draft_path_);
    delete target_path_;
    delete draft_path_;
  }
  SpeculativeDistributionTest()
      : target_(Model::load(*target_path_)), draft_(Model::load(*draft_path_)), tokenizer_(Tokenizer::from_gguf(*target_.gguf())) {}

  EngineOptions options(bool speculate, sampling::AcceptRule rule = &sampling::accept_or_replace) const {
    EngineOptions o;
    o.max_model_len = 32;
    o.max_num_seqs = 512;
    o.max_num_batched_tokens = 4096;
    o.threads = 1;  // a 32-wide model gains nothing from a second thread (and ctest runs tests side by side)
    o.enable_prefix_caching = true;  // every request shares the prompt
    if (speculate) {
      o.speculative.draft_model = &draft_;
      o.speculative.draft_max = 3;
      o.speculative.adaptive_depth = false;
      o.speculative.accept = rule;
    }
    return o;
  }

  // The smallest p-value over the positions: speculative vs plain decoding.
  double min_p_value(const sampling::SamplingParams& chain, sampling::AcceptRule rule) const {
    const int seeds = testing::kSanitized ? 10000 : 100000;
    const auto plain = position_counts(target_, tokenizer_, options(false), chain, 1, seeds);
    const auto spec = position_counts(target_, tokenizer_, options(true, rule), chain, 1000001, seeds);
    double worst = 1.0;
    for (int p = 0; p < kPositions; ++p) worst = std::min(worst, two_sample_p_value(plain[p], spec[p]));
    std::printf("%d seeds: smallest p-value over %d positions %.3g\n", seeds, kPositions, worst);
    return worst;
  }

  static sampling::SamplingParams temperature_one() {
    sampling::SamplingParams s;
    s.temperature = 1.0f;
    s.top_k = 0;
    s.top_p = 1.0f;
    s.min_p = 0.0f;
    return s;
  }
  static sampling::SamplingParams top_k_top_p() {
    sampling::SamplingParams s;
    s.temperature = 0.8f;
    s.top_k = 40;
    s.top_p = 0.9f;
    s.min_p = 0.0f;
    return s;
  }

  static std::filesystem::path* target_path_;
  static std::filesystem::path* draft_path_;
  Model target_;
  Model draft_;
  Tokenizer tokenizer_;
};
std::filesystem::path* SpeculativeDistributionTest::target_path_ = nullptr;
std::filesystem::path* SpeculativeDistributionTest::draft_path_ = nullptr;

TEST_F(SpeculativeDistributionTest, TemperatureOneMatchesPlainSampling) {
  EXPECT_GT(min_p_value(temperature_one(), &sampling::accept_or_replace), 0.001);
}

TEST_F(SpeculativeDistributionTest, TopKTopPChainMatchesPlainSampling) {
  EXPECT_GT(min_p_value(top_k_top_p(), &sampling::accept_or_replace), 0.001);
}

TEST_F(SpeculativeDistributionTest, AWrongAcceptanceRuleFails) {
  EXPECT_LT(min_p_value(temperature_one(), &resample_from_target), 0.001);
}

TEST(ChiSquare, PValuesMatchTables) {
  // Upper tail of chi-square: df 1 at 3.841 is 0.05, df 10 at 23.209 is 0.01, df 100 at 124.342 is 0.05.
  EXPECT_NEAR(gamma_q(0.5, 3.841 / 2), 0.05, 1e-3);
  EXPECT_NEAR(gamma_q(5.0, 23.209 / 2), 0.01, 1e-4);
  EXPECT_NEAR(gamma_q(50.0, 124.342 / 2), 0.05, 1e-3);
}

}  // namespace
}  // namespace tokamak::engine
