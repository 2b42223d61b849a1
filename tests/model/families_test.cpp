// Architecture options against the plain f64 reference implementation
// (tests/common/reference_model.*), on small random models built here.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "common/reference_model.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace tokamak {
namespace {

using testing::RandomModelSpec;

struct FamilyCase {
  const char* name;
  RandomModelSpec spec;
};

RandomModelSpec spec_with(std::function<void(RandomModelSpec&)> edit) {
  RandomModelSpec s;
  edit(s);
  return s;
}

const FamilyCase kFamilies[] = {
    {"llama", spec_with([](RandomModelSpec&) {})},
    {"llama_tied_mqa", spec_with([](RandomModelSpec& s) { s.tied_output = true; s.n_kv_heads = 1; })},
    {"qwen2_neox_bias", spec_with([](RandomModelSpec& s) { s.architecture = "qwen2"; s.qkv_bias = true; s.rope_base = 1e6f; })},
    {"mistral_sliding_window", spec_with([](RandomModelSpec& s) { s.architecture = "mistral"; s.sliding_window = 7; })},
    {"partial_rotary", spec_with([](RandomModelSpec& s) { s.rope_dim = 4; })},
    {"linear_scaling", spec_with([](RandomModelSpec& s) { s.rope_scaling = "linear"; s.rope_scaling_factor = 4; })},
    {"yarn", spec_with([](RandomModelSpec& s) {
       s.rope_scaling = "yarn"; s.rope_scaling_factor = 4; s.rope_n_ctx_orig = 64; })},
    {"llama3_freq_factors", spec_with([](RandomModelSpec& s) { s.rope_freqs = true; s.rope_base = 500000.0f; })},
    {"softcapping", spec_with([](RandomModelSpec& s) { s.attn_softcap = 2.0f; s.final_softcap = 3.0f; })},
};

class Families : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(Families, LogitsMatchThePlainReference) {
  const RandomModelSpec& spec = GetParam().spec;
  const std::string path = ::testing::TempDir() + "/family_" + GetParam().name + ".gguf";
  testing::write_random_model(spec, path);
  const auto file = std::make_shared<const io::GgufFile>(io::GgufFile::open(path));
  const Model model = Model::from_gguf(file);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 24; ++i) tokens.push_back((i * 37 + 5) % spec.n_vocab);
  ThreadPool pool(2);
  kv::KvFormat f32_kv;  // the reference keeps K/V in f64; f16 storage would cost ~1e-3
  f32_kv.k_type = f32_kv.v_type = kernels::KvType::F32;
  f32_kv.block_size = 8;
  kv::KvCache kv(kv_layout_for(model.config(), f32_kv), 8);
  Forward forward(model, pool);
  Batch batch;
  for (size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, true);
  const std::span<const float> got = forward.run(batch, kv);
  const std::vector<double> expected = testing::reference_logits(*file, tokens);
  ASSERT_EQ(got.size(), expected.size());
  double max_diff = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(got[i] - expected[i]));
    max_abs = std::max(max_abs, std::fabs(expected[i]));
  }
  // f32 accumulation over rows of <= 48 terms against f64: ~1e-6 relative.
  EXPECT_LE(max_diff, 1e-4) << "max |logit| " << max_abs;
  EXPECT_GT(max_abs, 0.5);  // the model is not degenerate
}

INSTANTIATE_TEST_SUITE_P(AllOptions, Families, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<FamilyCase>& info) { return std::string(info.param.name); });

TEST(FamiliesLoad, UnsupportedArchitectureIsNamed) {
  RandomModelSpec s;
  s.architecture = "gptj";
  const std::string path = ::testing::TempDir() + "/family_gptj.gguf";
  testing::write_random_model(s, path);
  try {
    Model::load(path);
    FAIL() << "loaded an unsupported architecture";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported architecture 'gptj'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tokamak
