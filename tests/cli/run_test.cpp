// End to end through the tokamak executable: the reference engines' texts.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <sstream>

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

// Speculative decoding keeps greedy text byte for byte: a Q4_0 draft of the
// same model, and prompt lookup; the summary says what was drafted and kept.
TEST(Run, SpeculationKeepsLlama2cText) {
  const std::string expected = read_text_file(test_data(kStories + "expected_greedy_t0_n200.txt"));
  for (const std::vector<std::string> flags :
       {std::vector<std::string>{"--draft-model", test_data("fixtures/models/stories260K-q4_0.gguf").string(), "--draft-fixed"},
        std::vector<std::string>{"--spec-ngram", "2", "--draft-max", "3", "--draft-fixed"}}) {
    std::vector<std::string> argv = {tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"), "-n",
                                     "200", "--temp", "0", "-t", "1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const auto r = run_command(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected) << flags[0];
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"(speculation: (\d+) drafted, (\d+) accepted)"))) << r.err;
    EXPECT_GT(std::stoi(m[2]), 0) << r.err;
  }
}

TEST(Run, SpeculationFlagsAreChecked) {
  const std::string model = test_data(kStories + "stories260K.gguf").string();
  const std::string draft = test_data("fixtures/models/stories260K-q4_0.gguf").string();
  const auto both = run_command({tokamak_bin(), "run", "-m", model, "-n", "4", "--draft-model", draft, "--spec-ngram", "2"});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("--draft-model and --spec-ngram"), std::string::npos) << both.err;
  const auto order = run_command({tokamak_bin(), "run", "-m", model, "-n", "4", "--spec-ngram", "2", "--draft-min", "4",
                                  "--draft-max", "2"});
  EXPECT_EQ(order.exit_code, 1);
  EXPECT_NE(order.err.find("--draft-min 4 is above --draft-max 2"), std::string::npos) << order.err;
  // A draft with another vocabulary (make-model's synthetic one) is named, with the first differing token.
  const std::string other = testing::temp_file("spec_other_vocab.gguf").string();
  ASSERT_EQ(run_command({tokamak_bin(), "make-model", "--preset", "micro", "--type", "q8_0", "-o", other}).exit_code, 0);
  const auto vocab = run_command({tokamak_bin(), "run", "-m", model, "-n", "4", "--draft-model", other});
  std::filesystem::remove(other);
  EXPECT_EQ(vocab.exit_code, 1);
  EXPECT_NE(vocab.err.find("--draft-model " + other + ": the draft model's token"), std::string::npos) << vocab.err;
  EXPECT_NE(vocab.err.find("speculation needs the same vocabulary"), std::string::npos) << vocab.err;
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
// of 2 MiB keeps llama2.c's greedy story for its first tokens, and the
// logprobs show the quantized cache (they differ from the f16 cache's once
// the sequence outgrows the f16 window).
TEST(Run, KvFlagsChooseTheCacheStorage) {
  const std::vector<std::string> base = {tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"),
                                         "--temp", "0", "-n", "120", "--n-probs", "1"};
  std::vector<std::string> quantized = base;
  for (const char* a : {"--kv-type", "q8", "--kv-type-v", "q4", "--kv-recent", "16", "--block-size", "32",
                        "--kv-memory", "2M"}) {
    quantized.push_back(a);
  }
  const auto r = run_command(quantized);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected = read_text_file(test_data(kStories + "expected_greedy_t0_n200.txt"));
  EXPECT_EQ(r.out.substr(0, 60), expected.substr(0, 60));
  const auto f16 = run_command(base);
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  const auto table = [](const std::string& err) { return err.substr(0, err.find("\n\nprompt tokens")); };
  EXPECT_NE(table(r.err), table(f16.err)) << "the KV flags changed nothing";
}

TEST(Run, SameSeedSameText) {
  const std::vector<std::string> argv = {tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"),
                                         "-p", "Once upon a time", "-n", "40", "--seed", "42", "--temp", "0.9"};
  const auto a = run_command(argv);
  const auto b = run_command(argv);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(a.out.empty());
  std::vector<std::string> other = argv;
  other[other.size() - 3] = "43";  // --seed 43
  EXPECT_NE(run_command(other).out, a.out) << "--seed changed nothing";
}

// ---------------------------------------------------------- stop strings

// Greedy text of stories260K (the llama2.c reference) cut by --stop options.
testing::CommandResult run_greedy_with(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"), "-n", "200",
                                   "--temp", "0", "-t", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_command(argv);
}

std::string greedy_text() { return read_text_file(test_data(kStories + "expected_greedy_t0_n200.txt")); }

TEST(RunStop, StopStringEndsTheTextBeforeIt) {
  const std::string full = greedy_text();
  const size_t at = full.find("park");
  ASSERT_NE(at, std::string::npos);
  const auto r = run_greedy_with({"--stop", "park"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, full.substr(0, at));  // "... play outside in the "
  EXPECT_NE(r.err.find("stop: stop string"), std::string::npos) << r.err;
}

TEST(RunStop, StopStringAcrossTokenBoundaries) {
  // The greedy tokens are " little", " g", "ir", "l": this stop string starts
  // inside one token and ends inside a third.
  const std::string full = greedy_text();
  const size_t at = full.find("ttle gi");
  ASSERT_NE(at, std::string::npos);
  const auto r = run_greedy_with({"--stop", "ttle gi"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, full.substr(0, at));
  EXPECT_EQ(r.out, "Once upon a time, there was a li");
}

TEST(RunStop, FirstOfSeveralStopStringsWins) {
  const std::string full = greedy_text();
  const auto r = run_greedy_with({"--stop", "park", "--stop", "Lily", "--stop", "ball"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, full.substr(0, full.find("Lily")));
}

TEST(RunStop, UnmatchedStopStringsChangeNothing) {
  // The text ends in "so she": " she wept" is held back as a possible start
  // of the stop string to the very end, then released.
  const auto r = run_greedy_with({"--stop", " she wept", "--stop", "dragon"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, greedy_text());
  EXPECT_NE(r.err.find("stop: max tokens"), std::string::npos) << r.err;
}

// ------------------------------------------------------------- --n-probs

// "#3 \"text\" (id 261, logprob -0.0123) | top: \"text\" 261 -0.0123, \"b\" 17 -4.5"
struct ProbsLine {
  std::string text;
  int id = -1;
  double logprob = 0.0;
  std::vector<std::pair<int, double>> top;
};

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
    } else if (s[++i] == 'n') {
      out += '\n';
    } else if (s[i] == 'x') {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<ProbsLine> parse_probs(const std::string& err) {
  const std::string q = R"re("((?:[^"\\]|\\.)*)")re";  // a quoted token text
  const std::regex line_re("^#(\\d+) " + q + R"( \(id (\d+), logprob (-?[0-9.]+|-inf)\) \| top:(.*)$)");
  const std::regex alt_re(q + R"( (\d+) (-?[0-9.]+|-inf))");
  std::vector<ProbsLine> out;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) continue;
    EXPECT_EQ(std::stoul(m[1]), out.size() + 1) << line;
    ProbsLine p{unescape(m[2]), std::stoi(m[3]), std::stod(m[4]), {}};
    const std::string alts = m[5];
    for (auto it = std::sregex_iterator(alts.begin(), alts.end(), alt_re); it != std::sregex_iterator(); ++it) {
      p.top.emplace_back(std::stoi((*it)[2]), std::stod((*it)[3]));
    }
    out.push_back(std::move(p));
  }
  return out;
}

TEST(RunProbs, GreedyLogprobsDescribeTheText) {
  const auto r = run_command({tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"), "-n", "40", "--temp",
                              "0", "-t", "1", "--n-probs", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, greedy_text().substr(0, r.out.size()));  // stdout stays the plain text
  EXPECT_GT(r.out.size(), 100u);
  const std::vector<ProbsLine> lines = parse_probs(r.err);
  ASSERT_EQ(lines.size(), 40u) << r.err;
  std::string joined;
  for (const ProbsLine& p : lines) {
    joined += p.text;
    ASSERT_EQ(p.top.size(), 3u);
    EXPECT_EQ(p.top[0].first, p.id);  // greedy picks the most likely token
    EXPECT_NEAR(p.top[0].second, p.logprob, 1e-4);
    double mass = 0.0;
    for (size_t k = 0; k < p.top.size(); ++k) {
      EXPECT_LE(p.top[k].second, 0.0);
      if (k > 0) {
        EXPECT_LE(p.top[k].second, p.top[k - 1].second);
      }
      mass += std::exp(p.top[k].second);
    }
    EXPECT_LE(mass, 1.0 + 1e-3);
  }
  EXPECT_EQ(joined, r.out);  // the chosen tokens' texts spell stdout
}

TEST(RunProbs, TopKLeavesADistributionOverKTokens) {
  const auto r = run_command({tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"), "-n", "30", "--temp",
                              "1", "--top-k", "5", "--top-p", "1", "--min-p", "0", "--seed", "3", "-t", "1",
                              "--n-probs", "8", "-p", "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<ProbsLine> lines = parse_probs(r.err);
  ASSERT_FALSE(lines.empty()) << r.err;
  std::string joined;
  for (const ProbsLine& p : lines) {
    joined += p.text;
    ASSERT_EQ(p.top.size(), 5u);  // only 5 candidates are left to list
    double mass = 0.0;
    bool chosen_listed = false;
    for (const auto& [id, lp] : p.top) {
      mass += std::exp(lp);
      if (id == p.id) chosen_listed = std::abs(lp - p.logprob) < 1e-4;
    }
    EXPECT_NEAR(mass, 1.0, 2e-3);  // the whole distribution the draw used
    EXPECT_TRUE(chosen_listed) << p.id;
  }
  EXPECT_EQ(joined, r.out);
}

TEST(RunProbs, ByteTokensAreShownEscaped) {
  // Token 229 is the byte 0xE2 (ids 3..258 are <0x00>..<0xFF>): forced by a
  // bias, it never completes a UTF-8 character. stdout gets the raw bytes (at
  // the end, when the incomplete character is flushed); stderr shows "\xE2".
  const auto r = run_command({tokamak_bin(), "run", "-m", test_data(kStories + "stories260K.gguf"), "-n", "3", "--temp",
                              "0", "-t", "1", "--n-probs", "2", "--logit-bias", "229=100"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\xE2\xE2\xE2");
  EXPECT_NE(r.err.find("#1 \"\\xE2\" (id 229, logprob "), std::string::npos) << r.err;
  const std::vector<ProbsLine> lines = parse_probs(r.err);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].text, "\xE2");
  ASSERT_EQ(lines[2].top.size(), 2u);
  EXPECT_EQ(lines[2].top[0].first, 229);
  EXPECT_GT(lines[2].top[0].second, -1e-4);  // p = 1 after a +100 bias
}

TEST(Run, UserErrorsGiveMessagesAndTheirExitStatus) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
    int status;  // 2: a usage error, 1: a runtime error
  };
  const std::string gguf = test_data(kStories + "stories260K.gguf");
  const Case cases[] = {
      {{"run", "-m", "/nonexistent/model.gguf"}, "/nonexistent/model.gguf", 1},
      {{"run", "-m", gguf, "--temp", "hot"}, "--temp", 2},
      {{"run", "-m", gguf, "-n", "-5"}, "-n", 2},
      {{"run", "-m", gguf, "--bogus"}, "--bogus", 2},
      {{"run", "-m", gguf, "-c", "4", "-p", "Once upon a time there was"}, "context", 1},
      {{"run", "-m", test_data(kStories + "stories260K.bin")}, "-z", 1},
      {{"run", "-m", test_data(kStories + "tok512.bin")}, "tok512.bin", 1},
      {{"run", "-m", gguf, "--rng", "mt"}, "--rng", 2},
      {{"run", "-m", gguf, "--stop", ""}, "stop string", 1},
      {{"run", "-m", gguf, "--n-probs", "-2"}, "--n-probs", 2},
      {{"run", "-m", gguf, "--n-probs", "100000"}, "n_probs", 1},
      {{"run", "-m", gguf, "--kv-type", "q5"}, "unknown KV type 'q5'", 2},
      {{"run", "-m", gguf, "--kv-type-v", "q4", "--block-size", "0"}, "--block-size", 2},
      {{"run", "-m", gguf, "--kv-recent", "8"}, "needs a quantized K or V type", 1},
      {{"run", "-m", gguf, "--kv-memory", "12X"}, "KV memory '12X'", 2},
      {{"run", "-m", gguf, "--kv-memory", "1K"}, "holds no block", 1},
      {{"frobnicate"}, "frobnicate", 2},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {tokamak_bin()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run_command(argv);
    EXPECT_EQ(r.exit_code, c.status) << c.args.back() << ": " << r.err;
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
