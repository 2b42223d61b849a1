// Issue 19 findings 5-8 through the real binary: llama.cpp's flags, messages
// that say what is wrong and what helps, exit status 2 for usage errors and 1
// for runtime ones, --rng llama2c's f32 KV, logits' threads and -z.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "common/test_data.h"

namespace tokamak {
namespace {

using testing::read_text_file;
using testing::run_command;
using testing::temp_file;
using testing::test_data;
using testing::tokamak_bin;
namespace fs = std::filesystem;

const std::string kStories = test_data("models/stories260K/stories260K.gguf").string();

testing::CommandResult run(std::vector<std::string> args, const std::string& stdin_text = "") {
  args.insert(args.begin(), tokamak_bin().string());
  return run_command(args, {}, stdin_text);
}

// A greedy run of stories260K with `extra` flags; its text is stdout.
testing::CommandResult greedy(const std::vector<std::string>& extra, const std::string& stdin_text = "") {
  std::vector<std::string> args = {"run", "-m", kStories, "-n", "12", "--temp", "0", "-t", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run(args, stdin_text);
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Finding 5: -f FILE, -p - (stdin) and -f - all give the -p prompt.
TEST(Conventions, PromptFromFileAndStdin) {
  const fs::path file = temp_file("prompt.txt");
  write_file(file, "Once upon a time");
  const auto ref = greedy({"-p", "Once upon a time"});
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  ASSERT_FALSE(ref.out.empty());
  EXPECT_EQ(greedy({"-f", file.string()}).out, ref.out);
  EXPECT_EQ(greedy({"--file", file.string()}).out, ref.out);
  EXPECT_EQ(greedy({"-p", "-"}, "Once upon a time").out, ref.out);
  EXPECT_EQ(greedy({"-f", "-"}, "Once upon a time").out, ref.out);
  const auto both = greedy({"-p", "x", "-f", file.string()});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("give the prompt once: -p TEXT or -f FILE, not both"), std::string::npos) << both.err;
  const auto missing = greedy({"-f", "/nonexistent/prompt.txt"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/prompt.txt: cannot open the prompt file: No such file"), std::string::npos)
      << missing.err;
  fs::remove(file);
}

// The prompt's tokens as --verbose-prompt lists them (" 403 -> ..." lines).
std::string prompt_ids(const std::string& err) {
  static const std::regex line(R"(\n\s*(\d+) -> )");
  std::string ids;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it) {
    ids += (*it)[1].str() + " ";
  }
  return ids;
}

// Finding 5: escapes are processed by default (-e), not with --no-escape;
// --verbose-prompt lists the tokens; --parse-special matches </s>.
TEST(Conventions, EscapesVerbosePromptAndParseSpecial) {
  const auto real = greedy({"-p", "Tom\nsaid \"hi\"", "--verbose-prompt"});
  const auto escaped = greedy({"-p", "Tom\\nsaid \\\"hi\\\"", "--verbose-prompt"});
  const auto flagged = greedy({"-p", "Tom\\nsaid \\\"hi\\\"", "--verbose-prompt", "-e"});
  const auto literal = greedy({"-p", "Tom\\nsaid \\\"hi\\\"", "--verbose-prompt", "--no-escape"});
  ASSERT_EQ(real.exit_code, 0) << real.err;
  ASSERT_FALSE(prompt_ids(real.err).empty()) << real.err;
  EXPECT_NE(real.err.find("prompt: "), std::string::npos) << real.err;
  EXPECT_EQ(prompt_ids(escaped.err), prompt_ids(real.err));
  EXPECT_EQ(prompt_ids(flagged.err), prompt_ids(real.err));
  EXPECT_NE(prompt_ids(literal.err), prompt_ids(real.err));
  EXPECT_EQ(escaped.out, real.out);
  // \xHH, \t, \\ and an unknown escape kept as it is.
  EXPECT_EQ(prompt_ids(greedy({"-p", "a\\x41\\tb\\\\c\\q", "--verbose-prompt"}).err),
            prompt_ids(greedy({"-p", "aA\tb\\c\\q", "--verbose-prompt", "--no-escape"}).err));

  // stories260K's EOS is </s> (id 2): matched only with --parse-special.
  const auto special = greedy({"-p", "</s>", "--verbose-prompt", "--parse-special"});
  const auto plain = greedy({"-p", "</s>", "--verbose-prompt"});
  EXPECT_EQ(prompt_ids(special.err), "1 2 ") << special.err;
  EXPECT_NE(prompt_ids(plain.err), "1 2 ") << plain.err;
}

// Finding 5: --seed -1 is random (a fresh seed each run, reported); --version.
TEST(Conventions, RandomSeedAndVersion) {
  const std::regex seed_re(R"(seed (\d+))");
  std::set<std::string> seeds;
  for (int i = 0; i < 2; ++i) {
    const auto r = run({"run", "-m", kStories, "-n", "4", "-t", "1", "--seed", "-1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, seed_re)) << r.err;
    EXPECT_NE(m[1].str(), "18446744073709551615");
    seeds.insert(m[1].str());
  }
  EXPECT_EQ(seeds.size(), 2u);
  const auto bad = run({"run", "-m", kStories, "--seed", "-2"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("option --seed: -2 is outside [-1, "), std::string::npos) << bad.err;

  const auto v = run({"--version"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(std::regex_search(v.out, std::regex(R"(^tokamak \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown)\)\n)")))
      << v.out;
  EXPECT_NE(v.out.find("\nbuilt with "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("\nkernels: scalar"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("(best: "), std::string::npos) << v.out;
}

// Finding 5: `quantize IN OUT TYPE THREADS` and --allow-requantize.
TEST(Conventions, QuantizeThreadsArgumentAndRequantize) {
  const std::string f32 = test_data("fixtures/models/micro-llama-f32.gguf").string();
  const std::string q8 = test_data("fixtures/models/micro-llama-q8_0.gguf").string();
  const fs::path out = temp_file("conv_q.gguf");
  auto r = run({"quantize", "--pure", f32, out.string(), "q8_0", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("(2 threads)"), std::string::npos) << r.err;
  EXPECT_TRUE(read_text_file(out) == read_text_file(q8));  // llama-quantize's bytes
  r = run({"quantize", f32, out.string(), "q8_0", "two"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("THREADS: 'two' is not a thread count in [1, 1024]"), std::string::npos) << r.err;
  fs::remove(out);

  r = run({"quantize", q8, out.string(), "q4_0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is already quantized (q8_0); quantize the f32/f16/bf16 original, or pass --allow-requantize"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  r = run({"quantize", "--allow-requantize", q8, out.string(), "q4_0", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_text_file(out).starts_with("GGUF"));
  fs::remove(out);
}

// Finding 6: each message says what is wrong and what helps; 2 for a usage
// error, 1 for a runtime one.
TEST(Conventions, MessagesSayWhatIsWrongAndWhatHelps) {
  const fs::path empty = temp_file("empty.gguf");
  const fs::path text = temp_file("text.gguf");
  write_file(empty, "");
  write_file(text, "hello, I am not a model\n");
  struct Case {
    std::vector<std::string> args;
    int status;
    std::string message;
  };
  const Case cases[] = {
      {{"run", "-m", kStories, "--temp", "inf"}, 2, "option --temp: inf is outside [0, 1e+09]"},
      {{"run", "-m", kStories, "--temp", "warm"}, 2, "option --temp: 'warm' is not a number (expected one in [0, 1e+09])"},
      {{"run", "-m", kStories, "--repeat-penalty", "0"}, 2,
       "option --repeat-penalty: 0 is outside (0, 1e+09]; 1 turns the penalty off"},
      {{"run", "-m", ""}, 2, "option -m: the model path is empty; give a GGUF file or a llama2.c .bin, or leave -m out"},
      {{"run", "-m", empty.string()}, 1, empty.string() + ": not GGUF (the file is empty), and not a readable llama2.c"},
      {{"run", "-m", text.string()}, 1, text.string() + ": not GGUF (it starts with 'hell', not 'GGUF'), and not a readable llama2.c checkpoint: "},
      {{"run", "-m", kStories, "--bogus"}, 2, "unknown option '--bogus'"},
      {{"run", "-m", kStories, "-n", "4", "--kv-memory", "1K"}, 1, "holds no block"},
      {{"chat", "extra"}, 2, "unexpected argument 'extra' (chat reads its turns from stdin)"},
      {{"logits", "-m", kStories, "--ids", "1,99999", "-o", "x.f32"}, 2, "option --ids: token 99999 is outside the vocabulary of 512 tokens"},
  };
  for (const Case& c : cases) {
    const auto r = run(c.args);
    SCOPED_TRACE(c.args.back());
    EXPECT_EQ(r.exit_code, c.status) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    if (c.status == 2) {
      EXPECT_NE(r.err.find("--help' for its options"), std::string::npos) << r.err;
    }
  }
  fs::remove(empty);
  fs::remove(text);

  // -c above the training context: a warning, and the run goes on.
  const auto big = run({"run", "-m", kStories, "-c", "4096", "-n", "2", "-t", "1"});  // trained on 2048
  EXPECT_EQ(big.exit_code, 0) << big.err;
  EXPECT_NE(big.err.find("warning: -c 4096 is above the model's training context of 2048 tokens"), std::string::npos)
      << big.err;
  const auto help = run({"run", "--help"});
  EXPECT_NE(help.out.find("Without -m or -hf, run uses the default model"), std::string::npos) << help.out;
}

// Finding 7: --rng llama2c uses an f32 KV cache unless --kv-type says otherwise.
TEST(Conventions, Llama2cRngImpliesF32Kv) {
  auto sample = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"run",  "-m", kStories, "-n",    "48", "--temp", "1",
                                     "--rng", "llama2c", "--seed", "42", "-t", "1", "-p", "Once"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(sample({}), sample({"--kv-type", "f32"}));
}

// Finding 8: logits uses every core by default (the logits do not depend on
// the thread count) and takes -z for a llama2.c checkpoint.
TEST(Conventions, LogitsThreadsAndTokenizer) {
  const fs::path a = temp_file("logits_a.f32");
  const fs::path b = temp_file("logits_b.f32");
  const std::string ids = "1,403,407,261,378";
  auto r = run({"logits", "-m", kStories, "--ids", ids, "-o", a.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run({"logits", "-m", kStories, "--ids", ids, "-o", b.string(), "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_text_file(a) == read_text_file(b));
  const std::string bin = test_data("models/stories260K/stories260K.bin").string();
  r = run({"logits", "-m", bin, "-z", test_data("models/stories260K/tok512.bin").string(), "--ids", ids, "-o",
           b.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text_file(b).size(), read_text_file(a).size());
  const auto help = run({"logits", "--help"});
  EXPECT_NE(help.out.find("threads (default: all cores)"), std::string::npos) << help.out;
  fs::remove(a);
  fs::remove(b);
}

}  // namespace
}  // namespace tokamak
