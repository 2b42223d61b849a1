// `tokamak run` and `tokamak chat` without -m/-hf: the default hub model when
// it is cached or downloadable, else the embedded stories260K with one notice
// line on stderr. The hub is a loopback server (or a port that refuses), the
// cache an empty temporary XDG_CACHE_HOME; the text is compared with
// llama2.c's greedy output for stories260K.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/loopback_hub.h"
#include "common/test_data.h"

namespace tokamak {
namespace {

namespace fs = std::filesystem;
using testing::LoopbackHub;
using testing::run_command;
using testing::TempDir;
using testing::test_data;
using testing::tokamak_bin;

constexpr const char* kNotice = "tokamak: running the embedded toy model ";
const std::string kDefaultInCache = "tokamak/ggml-org/models/tinyllamas/stories15M-q4_0.gguf";

std::vector<std::string> notice_lines(const std::string& err) {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (line.find("embedded") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// The model file a notice names: "... model <path> (260K parameters) ...".
fs::path noticed_model(const std::string& line) {
  const size_t from = line.find(kNotice);
  if (from == std::string::npos) return {};
  const size_t start = from + std::string(kNotice).size();
  return line.substr(start, line.find(" (260K", start) - start);
}

std::string greedy_200() { return testing::read_text_file(test_data("models/stories260K/expected_greedy_t0_n200.txt")); }
std::string stories_bytes() { return testing::read_text_file(test_data("models/stories260K/stories260K.gguf")); }

// The hub's layout with stories260K standing in for the default stories15M-q4_0.
void serve_default_model(const TempDir& served) {
  const fs::path file = served.path() / "ggml-org/models/resolve/main/tinyllamas/stories15M-q4_0.gguf";
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << stories_bytes();
}

std::vector<std::string> env_for(const TempDir& cache, const std::string& endpoint, const std::string& offline) {
  return {"XDG_CACHE_HOME=" + cache.path().string(), "HF_ENDPOINT=" + endpoint, "HF_HUB_OFFLINE=" + offline,
          "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1"};
}

const std::vector<std::string> kRunArgs = {"run", "-n", "200", "--temp", "0", "-t", "2"};

std::vector<std::string> run_argv() {
  std::vector<std::string> argv = {tokamak_bin()};
  argv.insert(argv.end(), kRunArgs.begin(), kRunArgs.end());
  return argv;
}

// The fallback's notice: one line, naming the embedded file (the same bytes as
// the shared fixture), why, and how to get a real model.
void expect_one_notice(const std::string& err, const std::string& why) {
  const std::vector<std::string> lines = notice_lines(err);
  ASSERT_EQ(lines.size(), 1u) << err;
  EXPECT_NE(lines[0].find(why), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("-m FILE.gguf"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("-hf REPO:FILE"), std::string::npos) << lines[0];
  const fs::path model = noticed_model(lines[0]);
  EXPECT_EQ(model.filename(), "stories260K.gguf") << lines[0];
  EXPECT_TRUE(testing::read_text_file(model) == stories_bytes()) << model;
}

TEST(DefaultModel, RefusedDownloadFallsBackToTheEmbeddedModel) {
  TempDir cache;
  testing::RefusingPort refusing;
  const auto r = run_command(run_argv(), env_for(cache, refusing.endpoint(), ""));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, greedy_200());
  expect_one_notice(r.err, "download of " + refusing.endpoint() + "/ggml-org/models/resolve/main/tinyllamas/");
  // Nothing half-downloaded is left in the cache.
  EXPECT_FALSE(fs::exists(cache.path() / kDefaultInCache));
  EXPECT_FALSE(fs::exists(cache.path() / (kDefaultInCache + ".part")));
}

TEST(DefaultModel, OfflineMakesNoRequestAndFallsBack) {
  // The hub has the file: only HF_HUB_OFFLINE keeps it from being fetched.
  TempDir served, cache;
  serve_default_model(served);
  LoopbackHub hub(served.path());
  for (const char* offline : {"1", "true", "YES", "On"}) {
    const auto r = run_command(run_argv(), env_for(cache, hub.endpoint(), offline));
    ASSERT_EQ(r.exit_code, 0) << offline << ": " << r.err;
    EXPECT_EQ(r.out, greedy_200()) << offline;
    expect_one_notice(r.err, "HF_HUB_OFFLINE");
  }
  EXPECT_TRUE(hub.requests().empty()) << hub.requests().size() << " requests, the first " << hub.requests()[0].target;
  EXPECT_FALSE(fs::exists(cache.path() / kDefaultInCache));
}

TEST(DefaultModel, DownloadedOnceThenUsedFromTheCacheWithoutNotice) {
  // The stand-in has the embedded model's bytes: the missing notice and the
  // cache file tell which one ran.
  TempDir served, cache;
  serve_default_model(served);
  LoopbackHub hub(served.path());
  const auto first = run_command(run_argv(), env_for(cache, hub.endpoint(), "0"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, greedy_200());
  EXPECT_TRUE(notice_lines(first.err).empty()) << first.err;
  ASSERT_EQ(hub.requests().size(), 1u);
  EXPECT_EQ(hub.requests()[0].target, "/ggml-org/models/resolve/main/tinyllamas/stories15M-q4_0.gguf");
  EXPECT_TRUE(testing::read_text_file(cache.path() / kDefaultInCache) == stories_bytes());

  const auto again = run_command(run_argv(), env_for(cache, hub.endpoint(), "1"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, greedy_200());
  EXPECT_TRUE(notice_lines(again.err).empty()) << again.err;
  EXPECT_EQ(hub.requests().size(), 1u);
}

TEST(DefaultModel, ChatFallsBackToo) {
  TempDir cache;
  testing::RefusingPort refusing;
  const auto r = run_command({tokamak_bin(), "chat", "--temp", "0", "-n", "8", "-t", "2"},
                             env_for(cache, refusing.endpoint(), ""), "Hello\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  expect_one_notice(r.err, "download of " + refusing.endpoint());
}

TEST(DefaultModel, ExplicitHfOfflineIsAnErrorWithoutRequest) {
  TempDir served, cache;
  LoopbackHub hub(served.path());
  const auto r = run_command({tokamak_bin(), "run", "-hf", "ggml-org/models:tinyllamas/stories260K.gguf", "-n", "1"},
                             env_for(cache, hub.endpoint(), "1"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ggml-org/models:tinyllamas/stories260K.gguf is not in the model cache"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("HF_HUB_OFFLINE"), std::string::npos) << r.err;
  EXPECT_TRUE(notice_lines(r.err).empty()) << r.err;
  EXPECT_TRUE(hub.requests().empty());
}

}  // namespace
}  // namespace tokamak
