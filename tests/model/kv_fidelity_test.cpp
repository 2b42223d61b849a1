// What the KV cache's storage types cost in model output: logits against
// llama.cpp's F32-KV fixtures, KL divergence against F32 KV, greedy text, and
// the bitwise rules (incremental == batched, batch invariance with
// flash-decoding splits) with quantized and mixed-precision KV.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <span>
#include <nlohmann/json.hpp>

#include "common/forward_logits.h"
#include "common/reference_model.h"
#include "common/test_data.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "kernels/attention.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

using kernels::KvType;

using testing::kSanitized;
using testing::read_f32_file;
using testing::test_data;

using testing::fixture_sequence;
using testing::kv_format;
using testing::max_abs_diff;

std::string format_name(const kv::KvFormat& f) {
  std::string s(kernels::kv_type_name(f.k_type));
  if (f.v_type != f.k_type) s.append("/").append(kernels::kv_type_name(f.v_type));
  if (f.recent > 0) s.append(" + f16 recent ").append(std::to_string(f.recent));
  return s;
}

// Logits of every position of `ids` with KV storage `f`, as one batch or one
// token per step. Matmuls keep f32 activations (the all-f32 arithmetic of the
// fixtures' deqf32 files), so what differs between runs here is the KV storage alone.
std::vector<float> logits(const Model& model, const std::vector<int32_t>& ids, const kv::KvFormat& f, bool incremental,
                          int threads = 1, kernels::Isa isa = kernels::best_isa()) {
  return testing::forward_logits(model, ids, {f, incremental, threads, {isa, kernels::MatmulPrecision::kF32}});
}

// Mean over rows of KL(softmax(ref) || softmax(test)), in nats.
double mean_kl(const std::vector<float>& ref, const std::vector<float>& test, int64_t n_vocab) {
  const int64_t rows = static_cast<int64_t>(ref.size()) / n_vocab;
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = ref.data() + r * n_vocab;
    const float* b = test.data() + r * n_vocab;
    const double ma = *std::max_element(a, a + n_vocab), mb = *std::max_element(b, b + n_vocab);
    double za = 0.0, zb = 0.0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      za += std::exp(a[i] - ma);
      zb += std::exp(b[i] - mb);
    }
    double kl = 0.0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      const double lp = a[i] - ma - std::log(za), lq = b[i] - mb - std::log(zb);
      kl += std::exp(lp) * (lp - lq);
    }
    total += kl;
  }
  return total / static_cast<double>(rows);
}

// Greedy decoding from BOS, as llama2.c's `run -t 0 -n steps` does: `steps`
// forward passes at positions 0..steps-1; returns the `steps` generated ids.
std::vector<int32_t> greedy(const Model& model, const kv::KvFormat& f, int steps) {
  ThreadPool pool(1);
  const kv::KvLayout layout = kv_layout_for(model.config(), f);
  kv::KvCache kv(layout, (steps + 15) / 16 + 4 + layout.recent_blocks());
  Forward forward(model, pool);
  std::vector<int32_t> out;
  int32_t token = 1;  // BOS
  for (int pos = 0; pos < steps; ++pos) {
    Batch batch;
    batch.add(token, pos, 0, true);
    const std::span<const float> row = forward.run(batch, kv);
    token = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(token);
  }
  return out;
}

const kv::KvFormat kF32 = kv_format(KvType::F32, KvType::F32);
const kv::KvFormat kFormats[] = {
    kv_format(KvType::F16, KvType::F16),  kv_format(KvType::BF16, KvType::BF16), kv_format(KvType::Q8, KvType::Q8),
    kv_format(KvType::Q4, KvType::Q4),    kv_format(KvType::Q8, KvType::Q4),     kv_format(KvType::Q8, KvType::Q8, 8),
    kv_format(KvType::Q4, KvType::Q4, 8),
};

// llama.cpp's default KV type: the fixtures were made with F32 KV, and
// rounding K/V to f16 moves logits by up to ~1e-2 for stories260K (logit std
// ~7; the fixtures' README says the same of llama.cpp) and ~1e-3 for micro-llama (std ~0.8).
TEST(KvFidelity, F16KvStillMatchesTheLogitFixtures) {
  struct Case {
    const char* model;
    const char* fixture;
    const char* suffix;
    float tolerance;
  };
  const Case cases[] = {
      {"models/stories260K/stories260K.gguf", "stories260K-f32", ".logits.f32", 3e-2f},
      {"fixtures/models/micro-llama-f32.gguf", "micro-llama-f32", ".logits.f32", 3e-3f},
      {"fixtures/models/micro-llama-q8_0.gguf", "micro-llama-q8_0", ".deqf32.logits.f32", 3e-3f},
      {"fixtures/models/stories260K-q4_0.gguf", "stories260K-q4_0", ".deqf32.logits.f32", 3e-2f},
  };
  for (const Case& c : cases) {
    const Model model = Model::load(test_data(c.model));
    for (const std::string seq : {"A", "B"}) {
      const std::vector<float> expected =
          read_f32_file(test_data(std::string("fixtures/logits/") + c.fixture + ".seq" + seq + c.suffix));
      const float diff =
          max_abs_diff(logits(model, fixture_sequence(seq), kv_format(KvType::F16, KvType::F16), false), expected);
      EXPECT_LE(diff, c.tolerance) << c.fixture << " seq" << seq;
      std::printf("f16 KV: %s seq%s max |diff| = %.3g\n", c.fixture, seq.c_str(), diff);
    }
  }
}

// Tiles and chunks are aligned to absolute positions, and a recent window's
// split depends on the query's position alone, so a prompt run as one batch
// and the same tokens run one by one give the same bits
// (kv_recent_chunking_test cuts prompts every other way).
TEST(KvFidelity, IncrementalEqualsBatchedBitwiseForEveryType) {
  const Model model = Model::load(test_data("models/stories260K/stories260K.gguf"));
  const std::vector<int32_t> ids = fixture_sequence("B");
  for (const kv::KvFormat& f : {kF32, kv_format(KvType::F16, KvType::F16), kv_format(KvType::Q8, KvType::Q4),
                                kv_format(KvType::Q8, KvType::Q8, 8), kv_format(KvType::Q4, KvType::Q4, 8)}) {
    EXPECT_EQ(logits(model, ids, f, false), logits(model, ids, f, true)) << format_name(f);
  }
}

// Mean KL divergence of the next-token distribution against F32 KV, over
// every position of both fixture sequences, decoded token by token (a recent
// window of 8 reads 8 to 39 keys in f16, recent_begin). Bounds: ~2-3x the
// values measured (stories260K: f16 5e-7, bf16 4e-5, q8 1.1e-3, q4 0.23,
// q8/q4 3.7e-3, q8+8 4.5e-5, q4+8 1.9e-2; micro-llama: 5.6e-8, 3.7e-6,
// 3.7e-5, 1.1e-2, 8.4e-3, 6.3e-6, 1.4e-3 nats). stories260K's 8-wide heads
// and sharp attention make it the harsher case for q4. The f16 window must
// improve on its quantized type alone.
TEST(KvFidelity, KlDivergenceAgainstF32KvIsSmall) {
  struct ModelCase {
    const char* path;
    double bounds[7];  // per entry of kFormats
  };
  const ModelCase models[] = {
      {"models/stories260K/stories260K.gguf", {2e-6, 1e-4, 3e-3, 0.5, 1e-2, 1.2e-4, 5e-2}},
      {"fixtures/models/micro-llama-f32.gguf", {2e-7, 1e-5, 1e-4, 3e-2, 2.5e-2, 1.5e-5, 4e-3}},
  };
  // Instrumented builds check the smaller model only.
  for (const ModelCase& mc : std::span(models, kSanitized ? 1 : 2)) {
    const Model model = Model::load(test_data(mc.path));
    std::vector<float> ref;
    for (const std::string seq : {"A", "B"}) {
      const std::vector<float> l = logits(model, fixture_sequence(seq), kF32, true);
      ref.insert(ref.end(), l.begin(), l.end());
    }
    double kls[std::size(kFormats)] = {};
    for (size_t i = 0; i < std::size(kFormats); ++i) {
      std::vector<float> test;
      for (const std::string seq : {"A", "B"}) {
        const std::vector<float> l = logits(model, fixture_sequence(seq), kFormats[i], true);
        test.insert(test.end(), l.begin(), l.end());
      }
      const double kl = kls[i] = mean_kl(ref, test, model.config().n_vocab);
      std::printf("%s, KV %s: mean KL vs f32 KV = %.3g nats\n", mc.path, format_name(kFormats[i]).c_str(), kl);
      EXPECT_LE(kl, mc.bounds[i]) << mc.path << " " << format_name(kFormats[i]);
    }
    EXPECT_LT(kls[5], kls[2]) << "q8 + f16 window vs q8";
    EXPECT_LT(kls[6], kls[3]) << "q4 + f16 window vs q4";
  }
}

// q8 and q4 K and V with heads of 64 go through integer dot products on
// AVX-512 VNNI (the query rounded to ~15 bits, the softmax weights to 8), on
// AVX2 (both to 16 bits) and on AVX-VNNI (as AVX2, but 8-bit weights for q8
// V). Their cost in KL against f32 KV, beside the same storage through f32
// arithmetic (the scalar path), on a random 64-wide-head model over 600
// positions (19 tiles, 2 chunks) decoded token by token, on each of those
// paths this CPU runs. Measured on VNNI: q8 0.0105 against 0.0106 nats, q4
// 1.11 against 1.11 (q4 is coarse for this random model's large activations;
// the arithmetic adds nothing); bound 1.2x + 1e-6.
TEST(KvFidelity, IntegerAttentionCostsLittleKl) {
  const kernels::AttentionParams dims{4, 1, 64};
  std::vector<kernels::Isa> isas;
  for (kernels::Isa isa : {kernels::Isa::kAvx2, kernels::Isa::kAvxVnni, kernels::Isa::kAvx512Vnni}) {
    if (kernels::isa_supported(isa) && kernels::attention_integer_dots(isa, dims, KvType::Q8, KvType::Q8)) {
      isas.push_back(isa);
    }
  }
  if (isas.empty()) GTEST_SKIP() << "no integer attention (AVX2, AVX-VNNI or AVX-512 VNNI) on this CPU";
  const testing::RandomModelSpec spec = testing::head64_spec();
  const std::string path = ::testing::TempDir() + "/kv_fidelity_head64.gguf";
  testing::write_random_model(spec, path);
  const Model model = Model::load(path);
  ASSERT_EQ(model.config().head_dim, 64);
  std::mt19937 rng(3);
  std::vector<int32_t> ids(kSanitized ? 200 : 600);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 256);
  const std::vector<float> ref = logits(model, ids, kv_format(KvType::F32, KvType::F32), true);
  for (KvType t : {KvType::Q8, KvType::Q4}) {
    const kv::KvFormat f = kv_format(t, t);
    const double kl_float = mean_kl(ref, logits(model, ids, f, true, 1, kernels::Isa::kScalar), spec.n_vocab);
    for (kernels::Isa isa : isas) {
      const double kl_integer = mean_kl(ref, logits(model, ids, f, true, 1, isa), spec.n_vocab);
      std::printf("random 64-wide heads, KV %s: mean KL vs f32 KV = %.3g nats (f32 arithmetic), %.3g (integer dots, %s)\n",
                  format_name(f).c_str(), kl_float, kl_integer, std::string(kernels::isa_name(isa)).c_str());
      EXPECT_LE(kl_integer, 1.2 * kl_float + 1e-6) << format_name(f) << " " << kernels::isa_name(isa);
    }
  }
}

// llama2.c's greedy 200-step story from BOS: F32 KV reproduces it byte for
// byte, f16 KV too; q8 KV must keep the same tokens for at least the first
// 100 (measured: 118; the f32 run's top-2 logit margin there is 0.12). Where
// the others first differ is printed; those are near-ties of the f32 run
// (margins 0.05 at token 71, 0.004 at 185), so the count is noisy.
TEST(KvFidelity, Q8KvKeepsTheGreedyStory) {
  const Model model = Model::load(test_data("models/stories260K/stories260K.gguf"));
  const Tokenizer tokenizer = Tokenizer::from_gguf(*model.gguf());
  const std::vector<int32_t> reference = greedy(model, kF32, 200);
  EXPECT_EQ(tokenizer.decode(reference, 1),
            testing::read_text_file(test_data("models/stories260K/expected_greedy_t0_n200.txt")));
  for (const kv::KvFormat& f : kFormats) {
    const std::vector<int32_t> got = greedy(model, f, 200);
    const size_t same =
        static_cast<size_t>(std::mismatch(got.begin(), got.end(), reference.begin()).first - got.begin());
    std::printf("greedy story, KV %s: %zu of %zu tokens as with f32 KV\n", format_name(f).c_str(), same,
                reference.size());
    if (f.k_type == KvType::Q8 && f.v_type == KvType::Q8 && f.recent == 0) {
      EXPECT_GE(same, 100u);
    }
    if (f.k_type == KvType::F16) {
      EXPECT_EQ(same, reference.size());
    }
  }
}

// A long sequence decoded alone (few tasks: its chunks are split across
// threads) and beside four others (no split) gives the same bits: for
// stories260K, and for a random model with a sliding window, whose first
// chunks hold no key of the decoded tokens.
std::vector<float> decode_after_long_prompt(const Model& model, const kv::KvFormat& f, bool crowded) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 1030; ++i) prompt.push_back(3 + (i * 37) % (model.config().n_vocab - 3));  // three chunks
  ThreadPool pool(2);
  kv::KvCache kv(kv_layout_for(model.config(), f), 256);
  Forward forward(model, pool);
  Batch batch;
  for (size_t i = 0; i < prompt.size(); ++i) batch.add(prompt[i], static_cast<int32_t>(i), 0, false);
  forward.run(batch, kv);
  std::vector<float> out;
  for (int step = 0; step < 3; ++step) {
    batch.clear();
    if (crowded) {
      for (int32_t s = 1; s <= 4; ++s) batch.add(5 + s, step, s, true);
    }
    batch.add(7 + step, static_cast<int32_t>(prompt.size()) + step, 0, true);
    const std::span<const float> rows = forward.run(batch, kv);
    out.insert(out.end(), rows.end() - model.config().n_vocab, rows.end());
  }
  return out;
}

TEST(KvFidelity, FlashDecodingSplitsKeepBatchInvariance) {
  const Model stories = Model::load(test_data("models/stories260K/stories260K.gguf"));
  const kv::KvFormat f = kv_format(KvType::Q8, KvType::Q4, 16);
  EXPECT_EQ(decode_after_long_prompt(stories, f, false), decode_after_long_prompt(stories, f, true));

  testing::RandomModelSpec spec;
  spec.n_ctx = 2048;
  spec.sliding_window = 300;
  const std::string path = ::testing::TempDir() + "/kv_fidelity_window.gguf";
  testing::write_random_model(spec, path);
  const Model windowed = Model::load(path);
  ASSERT_EQ(windowed.config().sliding_window, 300);
  EXPECT_EQ(decode_after_long_prompt(windowed, f, false), decode_after_long_prompt(windowed, f, true));
}

}  // namespace
}  // namespace tokamak
