// Each model family end to end through the tokamak executable: `make-model`
// writes a tiny random model with the family's options (the *-micro
// presets), `tokamak logits` computes its logits, and the plain f64 reference
// decoder of tests/common/reference_model.* (which reads the hyper-parameters
// from the file itself) must agree within 1e-4. `tokamak run` must generate
// with each file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "common/reference_model.h"
#include "common/test_data.h"
#include "io/gguf.h"

namespace tokamak {
namespace {

using testing::read_f32_file;
using testing::run_command;
using testing::temp_file;
using testing::tokamak_bin;
namespace fs = std::filesystem;

struct FamilyCase {
  const char* preset;
  const char* type;  // make-model --type
  // What the file must say, so that a preset losing its option fails here
  // rather than passing because the reference reads the same wrong metadata.
  const char* architecture;
  bool qkv_bias;
  bool tied;
  bool rope_freqs;
  int sliding_window;  // 0: no key
};

// Measured max |logit difference| (release build, x86-64 AVX2): see each row.
// The logits are near unit scale (max |logit| 3..5), so 1e-4 is ~1e-5
// relative: f32 accumulation over rows of <= 1792 terms against f64.
const FamilyCase kFamilies[] = {
    {"llama3-micro", "f16", "llama", false, true, true, 0},
    {"qwen2-micro", "f16", "qwen2", true, true, false, 0},
    {"smollm2-micro", "f16", "llama", false, true, false, 0},
    {"mistral-micro", "f16", "llama", false, false, false, 16},
    {"micro", "f16", "llama", false, false, false, 0},
    // K-quants with the fallbacks of 448-wide rows (Q5_0, Q8_0 for the tied
    // output): the reference dequantizes the same blocks, so only the
    // summation order differs here too.
    {"qwen2-micro", "q4_k_m", "qwen2", true, true, false, 0},
};

// 24 positions: more than mistral-micro's window of 16, so keys slide out.
constexpr int kTokens = 24;

std::vector<int32_t> test_tokens(int64_t n_vocab) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < kTokens; ++i) tokens.push_back(static_cast<int32_t>((i * 37 + 5) % n_vocab));
  return tokens;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

class FamilyCli : public ::testing::TestWithParam<FamilyCase> {
 protected:
  std::string label() const { return std::string(GetParam().preset) + "_" + GetParam().type; }
};

void check_family_options(const io::GgufFile& f, const FamilyCase& c) {
  const std::string arch = f.get_string("general.architecture").value_or("");
  EXPECT_EQ(arch, c.architecture);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.bias") != nullptr, c.qkv_bias);
  EXPECT_EQ(f.find_tensor("blk.1.attn_v.bias") != nullptr, c.qkv_bias);
  EXPECT_EQ(f.find_tensor("output.weight") == nullptr, c.tied);
  EXPECT_EQ(f.find_tensor("rope_freqs.weight") != nullptr, c.rope_freqs);
  const std::optional<int64_t> window = f.get_int(arch + ".attention.sliding_window");
  EXPECT_EQ(window.value_or(0), c.sliding_window);
}

TEST_P(FamilyCli, LogitsMatchThePlainReferenceAndRunGenerates) {
  const FamilyCase& c = GetParam();
  const fs::path model = temp_file("family_" + label() + ".gguf");
  const auto made = run_command(
      {tokamak_bin(), "make-model", "--preset", c.preset, "--type", c.type, "-o", model, "--seed", "5", "-t", "2"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const io::GgufFile file = io::GgufFile::open(model);
  check_family_options(file, c);
  const int64_t n_vocab = file.find_tensor("token_embd.weight")->ne[1];
  const std::vector<int32_t> tokens = test_tokens(n_vocab);
  const std::vector<double> expected = testing::reference_logits(file, tokens);

  // The whole prompt in one forward step, then one token per step (the
  // decode path through the KV cache).
  for (const bool incremental : {false, true}) {
    const fs::path out = temp_file("family_" + label() + (incremental ? "_inc" : "") + ".f32");
    std::vector<std::string> argv = {tokamak_bin(), "logits", "-m", model, "--ids", join_ids(tokens),
                                     "-o", out, "-t", "2", "--matmul", "f32"};
    if (incremental) argv.push_back("--incremental");
    const auto r = run_command(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<float> got = read_f32_file(out);
    fs::remove(out);
    ASSERT_EQ(got.size(), expected.size());
    double max_diff = 0.0, max_abs = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(got[i] - expected[i]));
      max_abs = std::max(max_abs, std::fabs(expected[i]));
    }
    std::printf("%s%s: max |logit - reference| %.3g, max |logit| %.3g\n", label().c_str(),
                incremental ? " (incremental)" : "", max_diff, max_abs);
    EXPECT_LE(max_diff, 1e-4) << label() << " max |logit| " << max_abs;
    EXPECT_GT(max_abs, 0.5) << label();  // not a degenerate model
  }

  // EOS banned so that exactly 8 tokens come out whatever the random weights like.
  const auto run = run_command({tokamak_bin(), "run", "-m", model, "-n", "8", "-p", "hello world", "--seed", "1",
                                "-t", "2", "--logit-bias", "2=-inf"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("generated: 8 tokens"), std::string::npos) << run.err;
  fs::remove(model);
}

INSTANTIATE_TEST_SUITE_P(Presets, FamilyCli, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<FamilyCase>& info) {
                           std::string name = std::string(info.param.preset) + "_" + info.param.type;
                           std::replace(name.begin(), name.end(), '-', '_');
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

}  // namespace
}  // namespace tokamak
