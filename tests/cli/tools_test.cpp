// make-model, quantize and bench through the tokamak executable: the files
// they write, the output they print, and the messages of user errors.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/test_data.h"

namespace tokamak {
namespace {

using testing::run_command;
using testing::read_text_file;
using testing::temp_file;
using testing::test_data;
using testing::tokamak_bin;
namespace fs = std::filesystem;

TEST(MakeModelCli, DeterministicBySeedAndRuns) {
  const fs::path a = temp_file("tools_a.gguf");
  const fs::path b = temp_file("tools_b.gguf");
  const fs::path c = temp_file("tools_c.gguf");
  for (const auto& [path, seed] : {std::pair{a, "3"}, std::pair{b, "3"}, std::pair{c, "4"}}) {
    const auto r = run_command({tokamak_bin(), "make-model", "--preset", "micro", "--type", "q4_0", "-o", path,
                                "--seed", seed, "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("wrote " + path.string()), std::string::npos) << r.err;
  }
  EXPECT_TRUE(read_text_file(a) == read_text_file(b));
  EXPECT_FALSE(read_text_file(a) == read_text_file(c));

  const auto run = run_command({tokamak_bin(), "run", "-m", a, "-n", "5", "-p", "hello", "--seed", "1", "-t", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("generated: 5 tokens"), std::string::npos) << run.err;
  for (const fs::path& p : {a, b, c}) fs::remove(p);
}

// --layers overrides a preset's depth; --help lists every preset.
TEST(MakeModelCli, LayersOverrideAndPresetList) {
  const fs::path path = temp_file("tools_layers.gguf");
  const auto r = run_command(
      {tokamak_bin(), "make-model", "--preset", "smollm2-micro", "--layers", "3", "--type", "f32", "-o", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bytes = read_text_file(path);
  EXPECT_NE(bytes.find("blk.2.ffn_down.weight"), std::string::npos);
  EXPECT_EQ(bytes.find("blk.3."), std::string::npos);
  fs::remove(path);

  const auto bad = run_command({tokamak_bin(), "make-model", "--preset", "micro", "--layers", "0", "-o", path});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--layers"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(path));

  const auto help = run_command({tokamak_bin(), "make-model", "--help"});
  ASSERT_EQ(help.exit_code, 0);
  for (const char* name : {"llama-3.2-1b", "qwen2.5-0.5b", "smollm2-360m", "mistral-7b", "mistral-7b-v0.1",
                           "llama3-micro", "qwen2-micro", "smollm2-micro", "mistral-micro"}) {
    EXPECT_NE(help.out.find(std::string("  ") + name + " "), std::string::npos) << name;
  }
}

TEST(QuantizeCli, PureQ8_0IsByteIdenticalWithLlamaQuantize) {
  const fs::path out = temp_file("tools_q8.gguf");
  const auto r = run_command({tokamak_bin(), "quantize", "--pure", test_data("fixtures/models/micro-llama-f32.gguf"),
                              out, "q8_0", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;  // the table is a diagnostic: stderr
  EXPECT_NE(r.err.find("[  39/  39]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("f32 -> q8_0"), std::string::npos) << r.err;
  EXPECT_TRUE(read_text_file(out) == read_text_file(test_data("fixtures/models/micro-llama-q8_0.gguf")));
  fs::remove(out);
}

TEST(BenchCli, JsonLinesHaveTheKeys) {
  const auto r = run_command({tokamak_bin(), "bench", "-m", test_data("fixtures/models/micro-llama-q4_0.gguf"), "-p",
                              "16", "-n", "4", "-r", "2", "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> objects;
  for (std::string line; std::getline(lines, line);) objects.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objects.size(), 2u) << r.out;
  EXPECT_EQ(objects[0].at("test"), "pp16");
  EXPECT_EQ(objects[1].at("test"), "tg4");
  for (const nlohmann::json& j : objects) {
    EXPECT_EQ(j.at("type"), "Q4_0");
    EXPECT_EQ(j.at("threads"), 1);
    for (const char* key : {"tokens_per_s", "tokens_per_s_min", "tokens_per_s_max", "roofline_tokens_per_s",
                            "bandwidth_gbs", "roofline_percent", "gflops"}) {
      ASSERT_TRUE(j.at(key).is_number()) << key;
      EXPECT_GT(j.at(key).get<double>(), 0.0) << key;
    }
    EXPECT_LE(j.at("tokens_per_s_min").get<double>(), j.at("tokens_per_s").get<double>());
  }
}

// One repetition: the printed roofline is the measured bandwidth over the
// bytes a step reads (weights and KV rows), and its percentage is 100 x speed / roofline (the JSON's
// own numbers, so a wrong unit or factor in the printing shows).
TEST(BenchCli, OneRepetitionsRooflineIsBandwidthOverTheBytesAStepReads) {
  const auto r = run_command({tokamak_bin(), "bench", "-m", test_data("fixtures/models/micro-llama-q4_0.gguf"), "-p",
                              "16", "-n", "4", "-r", "1", "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("test") != "tg4") continue;
    const double bw = j.at("bandwidth_gbs").get<double>() * 1e9;
    const double roofline = j.at("roofline_tokens_per_s").get<double>();
    EXPECT_NEAR(roofline, bw / (j.at("weight_bytes").get<double>() + j.at("kv_bytes").get<double>()), roofline * 1e-9);
    const double percent = j.at("roofline_percent").get<double>();
    EXPECT_NEAR(percent, 100.0 * j.at("tokens_per_s").get<double>() / roofline, percent * 1e-9);
    return;
  }
  FAIL() << "no tg4 line in " << r.out;
}

// --ctx adds a decode test per context length; each JSON line names its ctx
// and the KV storage.
TEST(BenchCli, ContextLengthsGiveOneDecodeTestEach) {
  const auto r = run_command({tokamak_bin(), "bench", "-m", test_data("fixtures/models/micro-llama-q4_0.gguf"), "-p",
                              "0", "-n", "2", "--ctx", "0,100", "-r", "1", "-t", "1", "--kv-type", "q8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> objects;
  for (std::string line; std::getline(lines, line);) objects.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objects.size(), 2u) << r.out;
  EXPECT_EQ(objects[0].at("ctx"), 0);
  EXPECT_EQ(objects[1].at("ctx"), 100);
  for (const nlohmann::json& j : objects) {
    EXPECT_EQ(j.at("test"), "tg2");
    EXPECT_EQ(j.at("kv_type_k"), "q8");
    EXPECT_EQ(j.at("kv_type_v"), "q8");
  }
}

TEST(BenchCli, TablePrintsOneRowPerTest) {
  const auto r = run_command({tokamak_bin(), "bench", "-m", test_data("fixtures/models/micro-llama-f16.gguf"), "-p",
                              "8", "-n", "0", "-r", "1", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| model |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| micro-llama-f16.gguf |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| F16 | 1 | pp8 |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tg"), std::string::npos) << r.out;
}

TEST(ToolsCli, UserErrorsGiveMessagesAndTheirExitStatus) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
    int status;  // 2: a usage error, 1: a runtime error
  };
  const std::string f32 = test_data("fixtures/models/micro-llama-f32.gguf");
  const fs::path out = temp_file("tools_err.gguf");
  const Case cases[] = {
      {{"make-model", "--preset", "gpt-9", "-o", out}, "unknown preset 'gpt-9' (known: tinyllama-1.1b", 2},
      {{"make-model", "--preset", "micro", "--type", "q9_9", "-o", out}, "unknown type 'q9_9' (known: f32", 2},
      {{"make-model", "--preset", "micro"}, "needs --preset NAME and -o FILE", 2},
      {{"make-model", "--preset", "micro", "-o", "/nonexistent-dir/x.gguf"},
       "/nonexistent-dir/x.gguf: cannot create a file in /nonexistent-dir: ",
       1},
      {{"make-model", "--preset", "micro", "-o", out, "--vocab-from", "/nonexistent/v.gguf"}, "/nonexistent/v.gguf", 1},
      {{"make-model", "--preset", "micro", "-o", out, "--seed", "-1"}, "--seed", 2},
      {{"quantize", "/nonexistent/in.gguf", out, "q4_0"}, "/nonexistent/in.gguf", 1},
      {{"quantize", f32, out, "q4_z"}, "unknown type 'q4_z'", 2},
      {{"quantize", f32, out}, "needs IN.gguf OUT.gguf TYPE", 2},
      {{"quantize", f32, f32, "q8_0"}, "is the input file", 2},
      {{"bench"}, "needs -m MODEL", 2},
      {{"bench", "-m", "/nonexistent/m.gguf"}, "/nonexistent/m.gguf", 1},
      {{"bench", "-m", f32, "-p", "0", "-n", "0"}, "nothing to measure", 2},
      {{"bench", "-m", f32, "-r", "0"}, "-r", 2},
      {{"bench", "-m", f32, "--ctx", "128,x"}, "option --ctx: 'x'", 2},
      {{"bench", "-m", f32, "--kv-type", "q5"}, "unknown KV type 'q5'", 2},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {tokamak_bin()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run_command(argv);
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    SCOPED_TRACE(joined);
    EXPECT_EQ(r.exit_code, c.status);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(out.string() + ".part"));
  }
}

}  // namespace
}  // namespace tokamak
