// Logits against llama.cpp's reference fixtures (../shared/fixtures/logits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_data.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace tokamak {
namespace {

using testing::read_f32_file;
using testing::test_data;

std::vector<int32_t> sequence_ids(const std::string& name) {
  std::ifstream in(test_data("fixtures/logits/manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(in);
  return manifest.at("sequences").at(name).at("token_ids").get<std::vector<int32_t>>();
}

kv::KvFormat f32_kv() {
  kv::KvFormat f;
  f.k_type = f.v_type = kernels::KvType::F32;
  return f;
}

// Logits of every position of `ids` as one batch (or one token per call).
std::vector<float> compute_logits(const Model& model, const std::vector<int32_t>& ids, bool incremental,
                                  int threads = 1, kernels::MatmulOptions options = {}) {
  ThreadPool pool(threads);
  kv::KvCache kv(kv_layout_for(model.config(), f32_kv()), 64);
  Forward forward(model, pool, options);
  std::vector<float> out;
  Batch batch;
  for (size_t i = 0; i < ids.size(); ++i) {
    batch.add(ids[i], static_cast<int32_t>(i), 0, true);
    if (incremental) {
      const std::span<const float> row = forward.run(batch, kv);
      out.insert(out.end(), row.begin(), row.end());
      batch.clear();
    }
  }
  if (!incremental) {
    const std::span<const float> rows = forward.run(batch, kv);
    out.assign(rows.begin(), rows.end());
  }
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

struct FixtureCase {
  const char* model;    // relative to the test data dir
  const char* fixture;  // logits file prefix under fixtures/logits/, without ".seqX..."
  const char* suffix;   // ".logits.f32" (native F32 reference) or ".deqf32.logits.f32"
  float tolerance;      // max abs over all positions and the vocabulary
};

// Activations stay f32 here, so each file is compared with llama.cpp run on
// the same weights in f32 (the deqf32 references for quantized files). The
// differences left are summation order only. Measured: micro-llama (logit
// std ~0.8) 4e-6..6e-6, stories260K (std ~7, larger magnitudes) 1e-5..1.7e-5;
// the bounds leave ~3x headroom for a different compiler's rounding.
const FixtureCase kCases[] = {
    {"models/stories260K/stories260K.gguf", "stories260K-f32", ".logits.f32", 5e-5f},
    {"fixtures/models/micro-llama-f32.gguf", "micro-llama-f32", ".logits.f32", 2e-5f},
    {"fixtures/models/micro-llama-f16.gguf", "micro-llama-f16", ".deqf32.logits.f32", 2e-5f},
    {"fixtures/models/micro-llama-q8_0.gguf", "micro-llama-q8_0", ".deqf32.logits.f32", 2e-5f},
    {"fixtures/models/micro-llama-q4_0.gguf", "micro-llama-q4_0", ".deqf32.logits.f32", 2e-5f},
    {"fixtures/models/micro-llama-bf16.gguf", "micro-llama-bf16", ".deqf32.logits.f32", 2e-5f},
    {"fixtures/models/micro-llama-q4_k.gguf", "micro-llama-q4_k", ".deqf32.logits.f32", 2e-5f},
    {"fixtures/models/micro-llama-q6_k.gguf", "micro-llama-q6_k", ".deqf32.logits.f32", 2e-5f},
    {"fixtures/models/stories260K-q8_0.gguf", "stories260K-q8_0", ".deqf32.logits.f32", 5e-5f},
    {"fixtures/models/stories260K-q4_0.gguf", "stories260K-q4_0", ".deqf32.logits.f32", 5e-5f},
};

class FixtureLogits : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(FixtureLogits, MatchLlamaCppOnBothSequences) {
  const FixtureCase& c = GetParam();
  const Model model = Model::load(test_data(c.model));
  for (const std::string seq : {"A", "B"}) {
    const std::vector<float> expected =
        read_f32_file(test_data(std::string("fixtures/logits/") + c.fixture + ".seq" + seq + c.suffix));
    const std::vector<float> got =
        compute_logits(model, sequence_ids(seq), false, 1, {kernels::best_isa(), kernels::MatmulPrecision::kF32});
    const float diff = max_abs_diff(got, expected);
    EXPECT_LE(diff, c.tolerance) << c.fixture << " seq" << seq;
    std::printf("%s seq%s max |diff| = %.3g\n", c.fixture, seq.c_str(), diff);
  }
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, FixtureLogits, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FixtureCase>& info) {
                           std::string name = info.param.fixture;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Logits, TokenByTokenThroughKvCacheEqualsOneBatch) {
  const Model model = Model::load(test_data("models/stories260K/stories260K.gguf"));
  for (const std::string seq : {"A", "B"}) {
    const std::vector<int32_t> ids = sequence_ids(seq);
    const std::vector<float> batched = compute_logits(model, ids, false);
    const std::vector<float> incremental = compute_logits(model, ids, true);
    EXPECT_LE(max_abs_diff(batched, incremental), 1e-5f) << "seq" << seq;
    // And against llama.cpp's own incremental run.
    const std::vector<float> reference =
        read_f32_file(test_data("fixtures/logits/stories260K-f32.seq" + seq + ".incremental.logits.f32"));
    EXPECT_LE(max_abs_diff(incremental, reference), 1e-4f) << "seq" << seq;
  }
}

TEST(Logits, Llama2cCheckpointEqualsGguf) {
  const Model gguf = Model::load(test_data("models/stories260K/stories260K.gguf"));
  const Model bin = Model::load(test_data("models/stories260K/stories260K.bin"));
  EXPECT_EQ(bin.format(), ModelFormat::Llama2c);
  EXPECT_TRUE(bin.config().tied_output);
  const std::vector<int32_t> ids = sequence_ids("A");
  // Same weights, same kernels: bitwise equal.
  EXPECT_EQ(compute_logits(gguf, ids, false), compute_logits(bin, ids, false));
}

TEST(Logits, SequenceLogitsDoNotDependOnTheRestOfTheBatch) {
  const Model model = Model::load(test_data("fixtures/models/micro-llama-q8_0.gguf"));
  const std::vector<int32_t> a = sequence_ids("A");
  const std::vector<int32_t> b = sequence_ids("B");
  const std::vector<float> alone = compute_logits(model, a, false, 2);
  // A interleaved with B in one batch, on two sequences.
  ThreadPool pool(2);
  kv::KvCache kv(kv_layout_for(model.config(), f32_kv()), 64);
  Forward forward(model, pool);
  Batch batch;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i < a.size()) batch.add(a[i], static_cast<int32_t>(i), 0, true);
    batch.add(b[i], static_cast<int32_t>(i), 1, false);
  }
  const std::span<const float> rows = forward.run(batch, kv);
  EXPECT_EQ(alone, std::vector<float>(rows.begin(), rows.end()));  // bitwise
}

TEST(Logits, BadBatchesAreRejectedWithoutTouchingTheCache) {
  const Model model = Model::load(test_data("models/stories260K/stories260K.gguf"));
  ThreadPool pool(1);
  kv::KvCache kv(kv_layout_for(model.config(), f32_kv()), 2);
  Forward forward(model, pool);
  Batch bad_token;
  bad_token.add(512, 0, 0, true);
  EXPECT_THROW(forward.run(bad_token, kv), Error);
  Batch gap;
  gap.add(1, 3, 0, true);
  EXPECT_THROW(forward.run(gap, kv), Error);
  Batch too_long;
  for (int i = 0; i < 33; ++i) too_long.add(1, i, 0, false);
  EXPECT_THROW(forward.run(too_long, kv), Error);  // 33 positions need 3 blocks of 16
  EXPECT_EQ(kv.length(0), 0);
}

}  // namespace
}  // namespace tokamak
