// End to end through the tokamak executable: the reference engines' texts.
#include <gtest/gtest.h>

#include "common/test_data.h"

namespace tokamak {
namespace {

using testing::read_text_file;
using testing::run_command;
using testing::test_data;
using testing::tokamak_bin;

const std::string kStories = "models/stories260K/";

TEST(Run, GreedyGgufPrintsLlama2cText) {
  const auto r = run_command({tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"), "-n", "200",
                              "--temp", "0", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_text_file(test_data(kStories + "expected_greedy_t0_n200.txt")));
  EXPECT_NE(r.err.find("decode:"), std::string::npos) << r.err;
}

TEST(Run, GreedyLlama2cCheckpointPrintsLlama2cText) {
  const auto r = run_command({tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.bin"), "-z",
                              test_data(kStories + "tok512.bin"), "-n", "200", "--temp", "0", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_text_file(test_data(kStories + "expected_greedy_t0_n200.txt")));
}

TEST(Run, SeededLlama2cTopPMatchesLlama2c) {
  // llama2.c keeps its KV cache in f32. With the default f16 KV, a sampled
  // token whose random draw falls within ~1e-3 of a CDF boundary flips (here
  // the 60th), so this byte-exact golden asks for f32 KV.
  const auto r = run_command({tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.bin"), "-z",
                              test_data(kStories + "tok512.bin"), "--rng", "llama2c", "--temp", "1.0", "--top-p",
                              "0.9", "--seed", "133742", "-n", "256", "--kv-type", "f32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_text_file(test_data(kStories + "expected_t1.0_p0.9_s133742_n256.txt")));
}

// The KV flags reach the cache: q8 storage with an f16 window in a budget
// of 2 MiB keeps llama2.c's greedy story for its first tokens.
TEST(Run, KvFlagsChooseTheCacheStorage) {
  const auto r = run_command({tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"), "--temp", "0",
                              "-n", "40", "--kv-type", "q8", "--kv-type-v", "q4", "--kv-recent", "16",
                              "--block-size", "32", "--kv-memory", "2M"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected = read_text_file(test_data(kStories + "expected_greedy_t0_n200.txt"));
  EXPECT_EQ(r.out.substr(0, 60), expected.substr(0, 60));
}

TEST(Run, SameSeedSameText) {
  const std::vector<std::string> argv = {tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"),
                                         "-p", "Once upon a time", "-n", "40", "--seed", "42", "--temp", "0.9"};
  const auto a = run_command(argv);
  const auto b = run_command(argv);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(a.out.empty());
}

TEST(Run, UserErrorsGiveMessagesAndNonZeroExit) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string gguf = test_data(kStories + "stories260K.gguf");
  const Case cases[] = {
      {{"run", "-m", "/nonexistent/model.gguf"}, "/nonexistent/model.gguf"},
      {{"run", "-m", gguf, "--temp", "hot"}, "--temp"},
      {{"run", "-m", gguf, "-n", "-5"}, "-n"},
      {{"run", "-m", gguf, "--bogus"}, "--bogus"},
      {{"run", "-m", gguf, "-c", "4", "-p", "Once upon a time there was"}, "context"},
      {{"run", "-m", test_data(kStories + "stories260K.bin")}, "-z"},
      {{"run", "-m", test_data(kStories + "tok512.bin")}, "tok512.bin"},
      {{"run", "-m", gguf, "--rng", "mt"}, "--rng"},
      {{"run", "-m", gguf, "--kv-type", "q5"}, "unknown KV type 'q5'"},
      {{"run", "-m", gguf, "--kv-type-v", "q4", "--block-size", "0"}, "--block-size"},
      {{"run", "-m", gguf, "--kv-recent", "8"}, "needs a quantized K or V type"},
      {{"run", "-m", gguf, "--kv-memory", "12X"}, "KV memory '12X'"},
      {{"run", "-m", gguf, "--kv-memory", "1K"}, "holds no block"},
      {{"frobnicate"}, "frobnicate"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {tokamak_bin()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run_command(argv);
    EXPECT_NE(r.exit_code, 0) << c.args.back();
    EXPECT_LT(r.exit_code, 128) << "crashed: " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
}

TEST(Logits, CommandWritesTheFixtureLayout) {
  const std::string out = ::testing::TempDir() + "/logits_cmd.f32";
  const auto r = run_command({tokamak_bin(), "logits", "-m", test_data(kStories + "stories260K.gguf"), "--ids",
                              "1,403,407,261,378,432,383,286,261,376,298,315,421,395,317,426", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<float> got = testing::read_f32_file(out);
  const std::vector<float> expected = testing::read_f32_file(test_data("fixtures/logits/stories260K-f32.seqA.logits.f32"));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 5e-5f) << i;
}

}  // namespace
}  // namespace tokamak
