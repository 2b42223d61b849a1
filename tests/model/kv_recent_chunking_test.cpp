// Mixed-precision KV (--kv-recent) and how a prompt is cut into steps: a
// query reads a key in f16 or in the quantized type by the two positions
// alone (KvLayout::recent_begin), so a request's logits at every position and
// its greedy tokens are bitwise the same whether its prompt runs as one step,
// in chunks of 1, 7, 32 or 100 tokens, alone or beside other sequences that
// prefill and decode in the same steps.
//
// Models: stories260K (heads of 8) and a random model with heads of 64, which
// on a CPU with AVX-512 VNNI takes the integer attention path for q8/q4 K and
// V (key tiles below the f16 window) beside the float path (tiles in it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "common/forward_logits.h"
#include "common/reference_model.h"
#include "common/test_data.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/model.h"

namespace tokamak {
namespace {

using kernels::KvType;
using testing::kSanitized;
using testing::kv_format;

// One sequence fed step by step: its prompt in chunks, then greedy tokens one a step.
struct Stream {
  int32_t seq = 0;
  std::vector<int32_t> tokens;  // the prompt, then the greedy tokens
  size_t n_prompt = 0;
  size_t chunk = 0;  // prompt tokens per step; 0: all at once
  size_t n_gen = 0;
  bool all_logits = false;  // keep every position's logits (else only the newest)
  size_t fed = 0;
  std::vector<float> logits;  // rows of the positions whose logits were kept, in order

  bool done() const { return tokens.size() == n_prompt + n_gen; }
  size_t take() const {
    if (fed >= n_prompt) return 1;
    return chunk == 0 ? n_prompt - fed : std::min(chunk, n_prompt - fed);
  }
};

std::vector<int32_t> prompt_ids(int n, int seed, int n_vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + (seed * 131 + i * 37 + i * i * 7) % (n_vocab - 3));
  return ids;
}

// Runs `streams` together until all are done: each step holds the next
// chunk (or greedy token) of every stream still going, in stream order.
void run_streams(const Model& model, const kv::KvFormat& f, std::vector<Stream>& streams) {
  ThreadPool pool(2);
  kv::KvCache kv(kv_layout_for(model.config(), f), 256);
  Forward forward(model, pool);
  const int32_t n_vocab = model.config().n_vocab;
  Batch batch;
  for (int step = 0; step < 1000; ++step) {
    batch.clear();
    for (const Stream& s : streams) {
      if (s.done()) continue;
      const size_t take = s.take();
      for (size_t i = 0; i < take; ++i) {
        batch.add(s.tokens[s.fed + i], static_cast<int32_t>(s.fed + i), s.seq, s.all_logits || i + 1 == take);
      }
    }
    if (batch.size() == 0) return;
    const std::span<const float> rows = forward.run(batch, kv);
    size_t row = 0;
    for (Stream& s : streams) {
      if (s.done()) continue;
      const size_t take = s.take();
      const size_t kept = s.all_logits ? take : 1;
      const float* first = rows.data() + row * n_vocab;
      s.logits.insert(s.logits.end(), first, first + kept * n_vocab);
      row += kept;
      s.fed += take;
      if (s.fed == s.tokens.size()) {  // the newest row picks the next token
        const float* last = first + (kept - 1) * n_vocab;
        s.tokens.push_back(static_cast<int32_t>(std::max_element(last, last + n_vocab) - last));
      }
    }
  }
  FAIL() << "streams did not finish in 1000 steps";
}

struct Result {
  std::vector<float> logits;    // every position of the subject
  std::vector<int32_t> tokens;  // its prompt and greedy tokens
};

// The subject (sequence 1): `n_prompt` tokens in steps of `chunk`, then
// `n_gen` greedy tokens; with `crowded`, sequences 0 and 2 share its steps
// (prompts of other lengths in chunks of 5 and 13, then decoding).
Result run_subject(const Model& model, const kv::KvFormat& f, int n_prompt, size_t chunk, int n_gen, bool crowded) {
  const int32_t n_vocab = model.config().n_vocab;
  Stream subject{1, prompt_ids(n_prompt, 1, n_vocab), static_cast<size_t>(n_prompt), chunk,
                 static_cast<size_t>(n_gen), true, 0, {}};
  std::vector<Stream> streams;
  if (crowded) streams.push_back({0, prompt_ids(n_prompt / 2, 2, n_vocab), static_cast<size_t>(n_prompt / 2), 5, 40, false, 0, {}});
  streams.push_back(subject);
  if (crowded) streams.push_back({2, prompt_ids(n_prompt + 9, 3, n_vocab), static_cast<size_t>(n_prompt + 9), 13, 3, false, 0, {}});
  run_streams(model, f, streams);
  const Stream& s = streams[crowded ? 1 : 0];
  return {s.logits, s.tokens};
}

std::string name(const kv::KvFormat& f) {
  return std::string(kernels::kv_type_name(f.k_type)) + "/" + std::string(kernels::kv_type_name(f.v_type)) +
         " + f16 recent " + std::to_string(f.recent);
}

void expect_chunking_invariant(const Model& model, int n_prompt, int n_gen) {
  const kv::KvFormat formats[] = {kv_format(KvType::Q8, KvType::Q8, 40), kv_format(KvType::Q4, KvType::Q4, 40),
                                  kv_format(KvType::Q8, KvType::Q4, 8), kv_format(KvType::Q4, KvType::F16, 20)};
  for (const kv::KvFormat& f : formats) {
    const Result whole = run_subject(model, f, n_prompt, 0, n_gen, false);
    ASSERT_EQ(whole.logits.size(), static_cast<size_t>(n_prompt + n_gen - 1) * model.config().n_vocab);
    // The f16 window matters: without it the logits differ.
    kv::KvFormat no_window = f;
    no_window.recent = 0;
    EXPECT_NE(run_subject(model, no_window, n_prompt, 0, n_gen, false).logits, whole.logits) << name(f);
    for (size_t chunk : {size_t{1}, size_t{7}, size_t{32}, size_t{100}, size_t{0}}) {
      for (bool crowded : {false, true}) {
        const Result got = run_subject(model, f, n_prompt, chunk, n_gen, crowded);
        const std::string what =
            name(f) + ", chunks of " + std::to_string(chunk) + (crowded ? ", beside 2 other sequences" : ", alone");
        EXPECT_EQ(got.tokens, whole.tokens) << what;
        ASSERT_EQ(got.logits.size(), whole.logits.size()) << what;
        const auto diff = std::mismatch(got.logits.begin(), got.logits.end(), whole.logits.begin());
        EXPECT_TRUE(diff.first == got.logits.end())
            << what << ": first differing logit at position "
            << (diff.first - got.logits.begin()) / model.config().n_vocab;
      }
    }
  }
}

TEST(KvRecentChunking, Stories260KIsBitwiseTheSameHoweverThePromptIsCut) {
  const Model model = Model::load(testing::test_data("models/stories260K/stories260K.gguf"));
  expect_chunking_invariant(model, kSanitized ? 90 : 150, 24);
}

TEST(KvRecentChunking, HeadsOf64AreBitwiseTheSameHoweverThePromptIsCut) {
  const testing::RandomModelSpec spec = testing::head64_spec();
  const std::string path = ::testing::TempDir() + "/kv_recent_chunking_head64.gguf";
  testing::write_random_model(spec, path);
  const Model model = Model::load(path);
  ASSERT_EQ(model.config().head_dim, 64);
  const bool integer = kernels::attention_integer_dots(kernels::best_isa(), {4, 1, 64}, KvType::Q8, KvType::Q8);
  std::printf("heads of 64 on %s: q8/q4 K and V through %s\n", std::string(kernels::isa_name(kernels::best_isa())).c_str(),
              integer ? "integer dot products" : "f32 tiles (no integer attention on this CPU)");
  expect_chunking_invariant(model, kSanitized ? 90 : 150, 24);
}

}  // namespace
}  // namespace tokamak
