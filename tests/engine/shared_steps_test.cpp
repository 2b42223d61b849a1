// One request's token stream must not change when other requests share its
// forward steps: each request has its own sampler (RNG, penalty history) and
// its own KV sequence, and the forward pass gives its rows the same logits in
// any batch. The "alone" run is the real generate() loop on a Session; the
// shared run puts several requests into the same batches by hand, joining and
// leaving at different steps. A prompt enters whole, or split into chunks over
// several steps beside other requests' decode tokens; the split run's logits
// are bitwise those of the unsplit one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "core/thread_pool.h"
#include "engine/session.h"
#include "model/forward.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {
namespace {

struct Request {
  std::string prompt;
  sampling::SamplingParams params;
  int32_t n_predict;
  int join_step;  // the shared step at which its prompt enters the batch
  int prefill_chunk = 0;  // prompt tokens per step; 0: the whole prompt in one step
};

sampling::SamplingParams sampled(uint64_t seed, float temperature) {
  sampling::SamplingParams p;
  p.seed = seed;
  p.temperature = temperature;
  p.repeat_penalty = 1.15f;  // makes the stream depend on the request's own history
  p.frequency_penalty = 0.1f;
  return p;
}

std::vector<Request> requests() {
  sampling::SamplingParams l2c;
  l2c.rng = sampling::SamplingParams::Rng::Llama2c;
  l2c.temperature = 1.0f;
  l2c.top_p = 0.9f;
  l2c.seed = 9;
  return {
      {"Once upon a time", sampled(7, 0.9f), 48, 0},
      {"The little dog", sampled(8, 1.1f), 32, 5},
      {"Lily", l2c, 20, 0},
      {"One day, a girl named Sue", sampled(7, 0.9f), 40, 2},  // the same seed as the first
  };
}

class SharedSteps : public ::testing::Test {
 protected:
  SharedSteps()
      : model_(Model::load(testing::test_data("models/stories260K/stories260K.gguf"))),
        tokenizer_(Tokenizer::from_gguf(*model_.gguf())) {}

  std::vector<int32_t> encode(const std::string& text) const { return tokenizer_.encode(text, tokenizer_.add_bos()); }

  // The request on its own, through the real generate loop; its generated tokens.
  std::vector<int32_t> alone(const Request& r) const {
    ThreadPool pool(1);
    Session session(model_, pool, 256);
    auto sampler = sampling::make_sampler(r.params, model_.config().n_vocab);
    const std::vector<int32_t> prompt = encode(r.prompt);
    GenerateOptions options;
    options.n_predict = r.n_predict;
    generate(session, tokenizer_, *sampler, prompt, options, [](std::string_view) {});
    return {session.tokens().begin() + static_cast<std::ptrdiff_t>(prompt.size()), session.tokens().end()};
  }

  struct SharedRun {
    std::vector<std::vector<int32_t>> generated;  // per request
    std::vector<std::vector<float>> logits;       // per request: the rows it sampled from, in order
    int mixed_steps = 0;  // steps holding a chunk that leaves a prompt unfinished beside a decode token
  };

  // All requests in shared batches.
  SharedRun shared(const std::vector<Request>& rs) const {
    ThreadPool pool(2);
    kv::KvCache kv(kv_layout_for(model_.config(), kv::KvFormat{}), 64);
    Forward forward(model_, pool);
    struct State {
      std::unique_ptr<sampling::Sampler> sampler;
      std::vector<int32_t> tokens;  // prompt, then generated
      size_t n_prompt = 0;
      size_t n_cached = 0;  // tokens with K/V in the cache
      bool done = false;
    };
    std::vector<State> st(rs.size());
    for (size_t i = 0; i < rs.size(); ++i) {
      st[i].sampler = sampling::make_sampler(rs[i].params, model_.config().n_vocab);
      st[i].tokens = encode(rs[i].prompt);
      st[i].n_prompt = st[i].tokens.size();
      for (int32_t t : st[i].tokens) st[i].sampler->accept(t);
    }
    SharedRun run;
    run.logits.resize(rs.size());
    Batch batch;
    for (int step = 0;; ++step) {
      batch.clear();
      std::vector<size_t> in_batch;  // requests with a logits row, in batch order
      bool partial_prompt = false, decode = false;
      for (size_t i = 0; i < rs.size(); ++i) {
        State& s = st[i];
        if (s.done || step < rs[i].join_step) continue;
        const size_t chunk = rs[i].prefill_chunk > 0 ? static_cast<size_t>(rs[i].prefill_chunk) : s.tokens.size();
        const size_t end = std::min(s.tokens.size(), s.n_cached + chunk);
        decode = decode || s.n_cached >= s.n_prompt;
        partial_prompt = partial_prompt || end < s.tokens.size();
        for (size_t p = s.n_cached; p < end; ++p) {
          batch.add(s.tokens[p], static_cast<int32_t>(p), static_cast<int32_t>(i), p + 1 == s.tokens.size());
        }
        s.n_cached = end;
        if (end == s.tokens.size()) in_batch.push_back(i);
      }
      if (batch.size() == 0) break;
      if (partial_prompt && decode) ++run.mixed_steps;
      const std::span<const float> logits = forward.run(batch, kv);
      const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
      EXPECT_EQ(logits.size(), in_batch.size() * n_vocab);
      for (size_t row = 0; row < in_batch.size(); ++row) {
        State& s = st[in_batch[row]];
        const std::span<const float> r = logits.subspan(row * n_vocab, n_vocab);
        run.logits[in_batch[row]].insert(run.logits[in_batch[row]].end(), r.begin(), r.end());
        const int32_t token = s.sampler->sample(r);
        s.tokens.push_back(token);
        const size_t n_generated = s.tokens.size() - s.n_prompt;
        s.done = tokenizer_.is_end_of_generation(token) ||
                 n_generated >= static_cast<size_t>(rs[in_batch[row]].n_predict);
      }
    }
    for (const State& s : st) {
      run.generated.emplace_back(s.tokens.begin() + static_cast<std::ptrdiff_t>(s.n_prompt), s.tokens.end());
    }
    return run;
  }

  Model model_;
  Tokenizer tokenizer_;
};

TEST_F(SharedSteps, EachStreamIsTheSameAsAlone) {
  const std::vector<Request> rs = requests();
  const std::vector<std::vector<int32_t>> together = shared(rs).generated;
  ASSERT_EQ(together.size(), rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    const std::vector<int32_t> expected = alone(rs[i]);
    EXPECT_GE(expected.size(), 10u) << i;  // long enough to mean something
    EXPECT_EQ(together[i], expected) << "request " << i << " (" << rs[i].prompt << ")";
  }
  // Same seed, different prompts: the streams differ (the check above is not vacuous).
  EXPECT_NE(together[0], together[3]);
}

// Prompts split into chunks of 1, 2 and 3 tokens, entering over several steps
// while other requests decode: every logits row a request samples from is
// bitwise the row of the run where each prompt entered whole.
TEST_F(SharedSteps, SplitPromptsBesideDecodesGiveBitwiseTheSameLogits) {
  std::vector<Request> rs = requests();
  rs.push_back({"Once upon a time, in a small town, there lived a boy named Tom who loved trains", sampled(11, 0.8f),
                24, 3});
  const SharedRun whole = shared(rs);
  EXPECT_EQ(whole.mixed_steps, 0);
  rs[0].prefill_chunk = 1;
  rs[1].prefill_chunk = 2;  // joins at step 5, beside decoding requests
  rs[3].prefill_chunk = 3;
  rs[4].prefill_chunk = 3;
  const SharedRun split = shared(rs);
  EXPECT_GE(split.mixed_steps, 5);  // the split really happened beside decodes
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(split.generated[i], whole.generated[i]) << "request " << i;
    ASSERT_EQ(split.logits[i].size(), whole.logits[i].size()) << "request " << i;
    EXPECT_GE(split.logits[i].size(), 10u * static_cast<size_t>(model_.config().n_vocab)) << "request " << i;
    EXPECT_EQ(std::memcmp(split.logits[i].data(), whole.logits[i].data(), split.logits[i].size() * sizeof(float)), 0)
        << "request " << i << " (" << rs[i].prompt << ")";
  }
}

TEST_F(SharedSteps, ReorderedRequestsKeepTheirStreams) {
  std::vector<Request> rs = requests();
  const auto forward_order = shared(rs).generated;
  std::swap(rs[0], rs[3]);
  std::swap(rs[1], rs[2]);
  rs[0].join_step = 1;  // different company at every step
  const auto reordered = shared(rs).generated;
  EXPECT_EQ(reordered[3], forward_order[0]);
  EXPECT_EQ(reordered[2], forward_order[1]);
  EXPECT_EQ(reordered[1], forward_order[2]);
  EXPECT_EQ(reordered[0], forward_order[3]);
}

}  // namespace
}  // namespace tokamak::engine
