// The Engine end to end on stories260K. The reference for every request is
// the same request run alone; "alone" is itself checked against the
// single-sequence generate() loop (which the llama2.c goldens pin), so a
// request's tokens, text and logprobs must not depend on what else is in the
// batch, on chunked prefill, on preemption or on a prefix-cache hit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_data.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/session.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {
namespace {

const char* const kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, she saw "
    "a big red ball in the park. She ran to the ball and kicked it high into the sky. The ball came down and hit a "
    "tree. A bird flew out of the tree and sang a happy song. Lily smiled and sang with the bird.";

class EngineTest : public ::testing::Test {
 protected:
  EngineTest()
      : model_(Model::load(testing::test_data("models/stories260K/stories260K.gguf"))),
        tokenizer_(Tokenizer::from_gguf(*model_.gguf())) {}

  EngineOptions options(int32_t max_num_seqs = 64) const {
    EngineOptions o;
    o.max_model_len = 256;
    o.max_num_seqs = max_num_seqs;
    o.max_num_batched_tokens = 512;
    o.threads = 2;
    o.enable_prefix_caching = false;
    return o;
  }

  // The first `words` words of the story: prompts that share prefixes.
  static std::string story_prefix(int words) {
    std::string s;
    int n = 0;
    for (const char* p = kStory; *p != 0 && n < words; ++p) {
      if (*p == ' ') ++n;
      if (n < words) s += *p;
    }
    return s;
  }

  // 64 requests: prompts of 1..60 words, greedy and seeded sampling mixed.
  static std::vector<Request> crowd(int count = 64) {
    std::vector<Request> rs;
    for (int i = 0; i < count; ++i) {
      Request r;
      r.prompt = Prompt::from_text(i % 5 == 4 ? "Tom" : story_prefix(1 + (i * 37) % 60));
      GenerationParams& p = r.params;
      p.max_tokens = 8 + (i * 13) % 40;
      if (i % 3 == 0) {
        p.sampling.temperature = 0.0f;
      } else {
        p.sampling.temperature = 0.7f + 0.1f * static_cast<float>(i % 4);
        p.sampling.seed = 100 + static_cast<uint64_t>(i % 7);  // seeds repeat across prompts
        p.sampling.repeat_penalty = 1.1f;
      }
      p.logprobs = i % 2 == 0;
      p.sampling.n_probs = 2;
      rs.push_back(r);
    }
    return rs;
  }

  std::vector<RequestResult> alone(const std::vector<Request>& rs, const EngineOptions& o) const {
    std::vector<RequestResult> out;
    for (const Request& r : rs) {
      Engine e(model_, tokenizer_, o);
      out.push_back(e.generate({r}).at(0));
    }
    return out;
  }

  static void expect_same(const std::vector<RequestResult>& got, const std::vector<RequestResult>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].completions.size(), want[i].completions.size()) << "request " << i;
      EXPECT_EQ(got[i].prompt_tokens, want[i].prompt_tokens) << "request " << i;
      for (size_t c = 0; c < got[i].completions.size(); ++c) {
        const CompletionResult& g = got[i].completions[c];
        const CompletionResult& w = want[i].completions[c];
        EXPECT_EQ(g.token_ids, w.token_ids) << "request " << i << " completion " << c;
        EXPECT_EQ(g.text, w.text) << "request " << i << " completion " << c;
        EXPECT_EQ(g.finish, w.finish) << "request " << i << " completion " << c;
        ASSERT_EQ(g.logprobs.size(), w.logprobs.size()) << "request " << i;
        for (size_t t = 0; t < g.logprobs.size(); ++t) {
          // Bitwise: the same logits row gives the same float.
          EXPECT_EQ(g.logprobs[t].chosen.logprob, w.logprobs[t].chosen.logprob) << "request " << i << " token " << t;
          ASSERT_EQ(g.logprobs[t].top.size(), w.logprobs[t].top.size());
          for (size_t k = 0; k < g.logprobs[t].top.size(); ++k) {
            EXPECT_EQ(g.logprobs[t].top[k].token, w.logprobs[t].top[k].token);
            EXPECT_EQ(g.logprobs[t].top[k].logprob, w.logprobs[t].top[k].logprob);
          }
        }
      }
    }
  }

  Model model_;
  Tokenizer tokenizer_;
};

TEST_F(EngineTest, AloneIsTheSingleSequenceGenerateLoop) {
  for (const Request& r : crowd(12)) {
    Engine e(model_, tokenizer_, options());
    const RequestResult got = e.generate({r}).at(0);

    ThreadPool pool(2);
    Session session(model_, pool, 256);
    sampling::SamplingParams sp = r.params.sampling;
    auto sampler = sampling::make_sampler(sp, model_.config().n_vocab);
    GenerateOptions go;
    go.n_predict = r.params.max_tokens;
    std::string text;
    const std::vector<int32_t> prompt = tokenizer_.encode(r.prompt.text, tokenizer_.add_bos());
    generate(session, tokenizer_, *sampler, prompt, go, [&](std::string_view t) { text += t; });
    const std::vector<int32_t> want(session.tokens().begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                    session.tokens().end());
    EXPECT_EQ(got.completions.at(0).token_ids, want) << r.prompt.text;
    EXPECT_EQ(got.completions.at(0).text, text) << r.prompt.text;
    EXPECT_EQ(got.prompt_tokens, static_cast<int64_t>(prompt.size()));
  }
}

TEST_F(EngineTest, SixtyFourTogetherEqualEachAlone) {
  const std::vector<Request> rs = crowd();
  const std::vector<RequestResult> want = alone(rs, options());
  Engine e(model_, tokenizer_, options());
  expect_same(e.generate(rs), want);
  EXPECT_EQ(e.stats().preemptions, 0);
  EXPECT_GE(e.stats().steps, 40);
  EXPECT_LT(e.stats().steps, 64 * 8);  // they really ran together
  EXPECT_EQ(e.kv_cache().pool().n_used(), 0);
  e.scheduler().check_invariants();
  // Not vacuous: the sampled requests with equal seeds differ by prompt.
  EXPECT_NE(want[1].completions[0].token_ids, want[8].completions[0].token_ids);
}

TEST_F(EngineTest, ChunkedPrefillAndPreemptionKeepEveryRequestsTokens) {
  const std::vector<Request> rs = crowd();
  const std::vector<RequestResult> want = alone(rs, options());
  EngineOptions o = options();
  o.max_num_batched_tokens = 7;  // every prompt of more than 7 tokens is chunked
  {
    Engine e(model_, tokenizer_, o);
    expect_same(e.generate(rs), want);
    EXPECT_EQ(e.kv_cache().pool().n_used(), 0);
  }
  // A pool of 20 blocks of 16 tokens for 64 requests of up to ~110 tokens.
  o = options();
  o.kv_memory.bytes = kv_layout_for(model_.config(), o.kv_format).block_bytes() * 20;
  Engine e(model_, tokenizer_, o);
  expect_same(e.generate(rs), want);
  EXPECT_GT(e.stats().preemptions, 0);
  EXPECT_EQ(e.kv_cache().pool().n_used(), 0);
  e.scheduler().check_invariants();
}

TEST_F(EngineTest, PrefixCacheHitsGiveTheSameTokens) {
  // Long shared prefixes (the story's first 40..60 words).
  std::vector<Request> rs = crowd(32);
  for (size_t i = 0; i < rs.size(); ++i) rs[i].prompt = Prompt::from_text(story_prefix(40 + static_cast<int>(i) % 21));
  const std::vector<RequestResult> want = alone(rs, options());
  EngineOptions o = options();
  o.enable_prefix_caching = true;
  o.max_num_seqs = 4;  // later requests find the earlier ones' blocks cached
  Engine e(model_, tokenizer_, o);
  expect_same(e.generate(rs), want);
  EXPECT_GT(e.stats().prefix_hit_tokens, 32 * 16);
  // Chunked prompts register their blocks as each chunk fills them.
  o.max_num_batched_tokens = 7;
  Engine chunked(model_, tokenizer_, o);
  expect_same(chunked.generate(rs), want);
  EXPECT_GT(chunked.stats().prefix_hit_tokens, 32 * 16);
  chunked.scheduler().check_invariants();
  o.max_num_batched_tokens = 512;
  // And preempted requests recompute from the cache.
  o.kv_memory.bytes = kv_layout_for(model_.config(), o.kv_format).block_bytes() * 24;
  o.max_num_seqs = 32;
  Engine small(model_, tokenizer_, o);
  expect_same(small.generate(rs), want);
  EXPECT_GT(small.stats().preemptions, 0);
  EXPECT_EQ(small.kv_cache().pool().n_used(), 0);
  small.scheduler().check_invariants();
}

TEST_F(EngineTest, ParallelSamplingForksOnePrefillIntoIndependentStreams) {
  Request r;
  r.prompt = Prompt::from_text(story_prefix(20));
  r.params.n = 4;
  r.params.max_tokens = 24;
  r.params.sampling.temperature = 1.0f;
  r.params.sampling.seed = 5;
  Engine e(model_, tokenizer_, options());
  const RequestResult got = e.generate({r}).at(0);
  ASSERT_EQ(got.completions.size(), 4u);
  EXPECT_EQ(e.stats().prompt_tokens, got.prompt_tokens);  // one prefill
  for (size_t i = 1; i < 4; ++i) EXPECT_NE(got.completions[i].token_ids, got.completions[0].token_ids) << i;
  // Completion 0 is what n = 1 samples with the same seed.
  Request one = r;
  one.params.n = 1;
  EXPECT_EQ(alone({one}, options()).at(0).completions.at(0).token_ids, got.completions[0].token_ids);
  // In a crowd, with preemption, every completion is the same.
  std::vector<Request> rs = crowd(24);
  rs.push_back(r);
  EngineOptions o = options();
  o.kv_memory.bytes = kv_layout_for(model_.config(), o.kv_format).block_bytes() * 20;
  Engine crowded(model_, tokenizer_, o);
  const std::vector<RequestResult> all = crowded.generate(rs);
  expect_same({all.back()}, {got});
  EXPECT_GT(crowded.stats().preemptions, 0);
  EXPECT_EQ(crowded.kv_cache().pool().n_used(), 0);
}

TEST_F(EngineTest, AbortMidPrefillFreesEverything) {
  EngineOptions o = options();
  o.max_num_batched_tokens = 8;
  Engine e(model_, tokenizer_, o);
  Request r;
  r.prompt = Prompt::from_text(story_prefix(50));
  const int64_t id = e.add_request(r);
  const int64_t other = e.add_request(crowd(1)[0]);
  e.step();
  EXPECT_GT(e.kv_cache().pool().n_used(), 0);
  EXPECT_TRUE(e.abort(id));
  EXPECT_FALSE(e.abort(id));
  const std::vector<RequestOutput> out = e.step();
  bool reported = false;
  for (const RequestOutput& o2 : out) {
    if (o2.request_id != id) continue;
    reported = true;
    EXPECT_TRUE(o2.finished);
    ASSERT_EQ(o2.completions.size(), 1u);
    EXPECT_EQ(o2.completions[0].finish, FinishReason::Abort);
  }
  EXPECT_TRUE(reported);
  while (e.has_unfinished()) e.step();
  EXPECT_FALSE(e.abort(other));
  EXPECT_EQ(e.kv_cache().pool().n_used(), 0);
}

TEST_F(EngineTest, RejectsWhatCanNeverRunAtAdmission) {
  EngineOptions o = options();
  o.max_model_len = 16;
  Engine e(model_, tokenizer_, o);
  Request r;
  r.prompt = Prompt::from_text(story_prefix(30));
  try {
    e.add_request(r);
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("max_model_len = 16"), std::string::npos) << err.what();
  }
  r.prompt = Prompt::from_ids({1, 5000000});
  EXPECT_THROW(e.add_request(r), Error);
  r.prompt = Prompt::from_text("Hi");
  r.params.sampling.top_p = 2.0f;
  EXPECT_THROW(e.add_request(r), Error);
  EXPECT_FALSE(e.has_unfinished());
}

TEST_F(EngineTest, StopStringsAndMaxTokensEndCompletions) {
  Request r;
  r.prompt = Prompt::from_text("Once upon a time");
  r.params.sampling.temperature = 0.0f;
  r.params.max_tokens = 40;
  Engine e(model_, tokenizer_, options());
  const CompletionResult full = e.generate({r}).at(0).completions.at(0);
  EXPECT_EQ(full.finish, FinishReason::Length);
  EXPECT_EQ(full.token_ids.size(), 40u);
  // Stop at the first word of the greedy text after its first 10 characters.
  const std::string cut = full.text.substr(10, 4);
  r.params.stop = {cut};
  const CompletionResult stopped = e.generate({r}).at(0).completions.at(0);
  EXPECT_EQ(stopped.finish, FinishReason::Stop);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(cut)));
}

}  // namespace
}  // namespace tokamak::engine
