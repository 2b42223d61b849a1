// tokamak batch, through the executable on stories260K: one output line per
// request line in input order, texts equal to the reference (llama2.c's greedy
// story) and to `tokamak run` with the same sampling, errors by line number.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_data.h"

namespace tokamak {
namespace {

using Json = nlohmann::json;
using testing::read_text_file;
using testing::run_command;
using testing::temp_file;
using testing::test_data;
using testing::tokamak_bin;

const std::string kModel = "models/stories260K/stories260K.gguf";

std::vector<Json> parse_lines(const std::string& out) {
  std::vector<Json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
  return lines;
}

std::string greedy_story() { return read_text_file(test_data("models/stories260K/expected_greedy_t0_n200.txt")); }

// --max-num-seqs 2 keeps the window at 4 requests: later lines finish before
// earlier ones and must still come out in order.
testing::CommandResult batch(const std::string& input, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {tokamak_bin(), "batch", "-m", test_data(kModel), "-i", "-", "-t", "2",
                                   "--max-model-len", "256", "--max-num-seqs", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_command(argv, {}, input);
}

TEST(Batch, GoodAndBadLinesInInputOrder) {
  std::string long_prompt = "[1";
  for (int i = 0; i < 299; ++i) long_prompt += ", 5";
  long_prompt += "]";
  const std::string input =
      R"({"prompt": "", "max_tokens": 200, "temperature": 0})" "\n"                        // line 1
      R"({"prompt": "x",)" "\n"                                                             // line 2: bad JSON
      "\n"                                                                                  // line 3: skipped
      R"({"prompt": "Once upon a time", "max_tokens": 12, "n": 2, "temperature": 0.8, "seed": 42})" "\n"  // 4
      R"({"prompt": "x", "temperature": -1})" "\n"                                          // line 5
      R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5})" "\n"          // line 6
      R"({"prompt": [1, 99999]})" "\n"                                                      // line 7
      R"({"prompt": )" + long_prompt + "}\n"                                                // line 8
      R"({"prompt": "", "max_tokens": 200, "temperature": 0, "stop": "Lily"})" "\n"         // line 9
      R"({"prompt": "x", "n": "two"})";                                                     // line 10, no newline
  const auto r = batch(input);
  ASSERT_EQ(r.exit_code, 1) << r.err;  // every line written, but some failed
  const std::vector<Json> out = parse_lines(r.out);
  ASSERT_EQ(out.size(), 9u) << r.out;

  const std::string story = greedy_story();
  EXPECT_EQ(out[0]["text"], story);
  EXPECT_EQ(out[0]["finish_reason"], "length");
  EXPECT_EQ(out[0]["prompt_tokens"], 1);  // BOS
  EXPECT_EQ(out[0]["completion_tokens"], 200);
  EXPECT_FALSE(out[0].contains("error"));

  EXPECT_EQ(out[1].size(), 1u);
  EXPECT_EQ(out[1]["error"].get<std::string>().substr(0, 24), "line 2: not valid JSON: ");

  ASSERT_TRUE(out[2]["text"].is_array()) << out[2];
  ASSERT_EQ(out[2]["text"].size(), 2u);
  ASSERT_EQ(out[2]["finish_reason"].size(), 2u);
  EXPECT_NE(out[2]["text"][0], out[2]["text"][1]);  // two RNG streams
  EXPECT_GE(out[2]["completion_tokens"].get<int>(), 2);
  EXPECT_LE(out[2]["completion_tokens"].get<int>(), 24);
  for (const Json& f : out[2]["finish_reason"]) EXPECT_TRUE(f == "length" || f == "stop") << f;

  EXPECT_EQ(out[3], Json({{"error", "line 5: temperature = -1 is outside [0, 2]"}}));
  EXPECT_TRUE(out[4]["text"].is_string()) << out[4];
  EXPECT_LE(out[4]["completion_tokens"].get<int>(), 5);
  EXPECT_GT(out[4]["prompt_tokens"].get<int>(), 3);
  EXPECT_EQ(out[5], Json({{"error", "line 7: prompt token id 99999 is outside the vocabulary [0, 512)"}}));
  const std::string too_long = out[6]["error"].get<std::string>();
  EXPECT_NE(too_long.find("line 8: "), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("300"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("256"), std::string::npos) << too_long;

  ASSERT_NE(story.find("Lily"), std::string::npos);
  EXPECT_EQ(out[7]["text"], story.substr(0, story.find("Lily")));
  EXPECT_EQ(out[7]["finish_reason"], "stop");
  EXPECT_EQ(out[8], Json({{"error", "line 10: n = \"two\" is not an integer"}}));

  EXPECT_NE(r.err.find("batch: 9 requests, 5 errors (lines 2, 5, 7, 8, 10)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("requests"), std::string::npos);  // the progress line
}

// Completion 0 of a seeded request samples what `tokamak run` samples with
// the same chain (OpenAI's defaults spelled out as run's flags).
TEST(Batch, SeededSamplingMatchesRun) {
  const auto b = batch(R"({"prompt": "Once upon a time", "max_tokens": 30, "temperature": 0.8, "seed": 42, "n": 3})");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::vector<Json> out = parse_lines(b.out);
  ASSERT_EQ(out.size(), 1u);
  const auto run = run_command({tokamak_bin(), "run", "-m", test_data(kModel), "-p", "Once upon a time", "-n", "30",
                                "--temp", "0.8", "--seed", "42", "--top-k", "0", "--top-p", "1", "--min-p", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(out[0]["text"][0], run.out);
}

// 16 requests (greedy and seeded, two with n = 2) give the same output file
// run one at a time, all together, and in a pool of 20 blocks with 8-token
// steps, where prompts are chunked and sequences preempted.
TEST(Batch, OutputIsTheSameAloneTogetherAndPreempted) {
  const std::vector<std::string> prompts = {"Once upon a time", "The cat", "Lily and Tom went", ""};
  std::string input;
  for (int i = 0; i < 16; ++i) {
    Json r = {{"prompt", prompts[i % 4]}, {"max_tokens", 20 + 7 * i}};
    r["temperature"] = i % 3 == 0 ? 0.0 : 0.9;
    if (i % 3 != 0) r["seed"] = i;
    if (i % 5 == 0) r["n"] = 2;
    input += r.dump() + "\n";
  }
  const auto together = batch(input, {"--max-num-seqs", "64"});
  ASSERT_EQ(together.exit_code, 0) << together.err;
  ASSERT_EQ(parse_lines(together.out).size(), 16u);
  const auto alone = batch(input, {"--max-num-seqs", "1"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(alone.out, together.out);
  const auto squeezed = batch(input, {"--max-num-seqs", "64", "--kv-memory", "200K", "--max-num-batched-tokens", "8"});
  ASSERT_EQ(squeezed.exit_code, 0) << squeezed.err;
  EXPECT_EQ(squeezed.out, together.out);
  EXPECT_EQ(squeezed.err.find(", 0 preemptions"), std::string::npos) << squeezed.err;
  EXPECT_NE(squeezed.err.find(" preemptions"), std::string::npos) << squeezed.err;
}

TEST(Batch, LogprobsListEveryTokenWithItsAlternatives) {
  const auto r = batch(R"({"prompt": "", "max_tokens": 4, "temperature": 0, "logprobs": true, "top_logprobs": 2})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json out = parse_lines(r.out).at(0);
  ASSERT_EQ(out["logprobs"].size(), 4u) << out;
  std::string joined;
  for (const Json& t : out["logprobs"]) {
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_EQ(t["top_logprobs"][0]["id"], t["id"]);  // greedy takes the most likely
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    joined += t["token"].get<std::string>();
  }
  EXPECT_EQ(joined, out["text"]);
  EXPECT_EQ(out["text"], greedy_story().substr(0, out["text"].get<std::string>().size()));
}

TEST(Batch, FilesInAndOut) {
  const std::string in_path = temp_file("batch_in.jsonl"), out_path = temp_file("batch_out.jsonl");
  std::ofstream(in_path) << R"({"prompt": "", "max_tokens": 10, "temperature": 0})" << "\n"
                         << R"({"prompt": "", "max_tokens": 20, "temperature": 0})" << "\n";
  const auto r = run_command({tokamak_bin(), "batch", "-m", test_data(kModel), "-i", in_path, "-o", out_path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const std::vector<Json> out = parse_lines(read_text_file(out_path));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["completion_tokens"], 10);
  EXPECT_EQ(out[1]["completion_tokens"], 20);
  const std::string story = greedy_story();
  EXPECT_EQ(story.substr(0, out[1]["text"].get<std::string>().size()), out[1]["text"]);
  std::filesystem::remove(in_path);
  std::filesystem::remove(out_path);
}

TEST(Batch, BadInvocationsFailWithAMessage) {
  const auto no_input = run_command({tokamak_bin(), "batch", "-m", test_data(kModel)});
  EXPECT_EQ(no_input.exit_code, 1);
  EXPECT_NE(no_input.err.find("batch needs -i"), std::string::npos) << no_input.err;
  const auto missing = run_command({tokamak_bin(), "batch", "-m", test_data(kModel), "-i", "/nonexistent/x.jsonl"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("'/nonexistent/x.jsonl'"), std::string::npos) << missing.err;
  const auto both = batch("", {"--enable-prefix-caching", "--no-prefix-caching"});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("--no-prefix-caching"), std::string::npos) << both.err;
  const auto help = run_command({tokamak_bin(), "batch", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("top_logprobs: "), std::string::npos) << help.out;
}

}  // namespace
}  // namespace tokamak
