// `tokamak run` without -m: the model comes from the hub, here a loopback
// server in the hub's layout; the cache folder comes from XDG_CACHE_HOME.
#include <gtest/gtest.h>

#include "common/loopback_hub.h"
#include "common/test_data.h"

namespace tokamak {
namespace {

using testing::run_command;
using testing::test_data;
using testing::tokamak_bin;

TEST(RunFromHub, DownloadsOnceIntoTheCacheThenRunsOffline) {
  testing::TempDir served, cache;
  const std::string model = testing::read_text_file(test_data("models/stories260K/stories260K.gguf"));
  const auto served_path = served.path() / "ggml-org/models/resolve/main/tinyllamas/stories260K.gguf";
  std::filesystem::create_directories(served_path.parent_path());
  std::ofstream(served_path, std::ios::binary).write(model.data(), static_cast<std::streamsize>(model.size()));
  const std::vector<std::string> env = {"XDG_CACHE_HOME=" + cache.path().string(), "HF_HUB_OFFLINE=",
                                        "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1"};
  const std::vector<std::string> argv = {tokamak_bin(), "run", "-hf", "ggml-org/models:tinyllamas/stories260K.gguf",
                                         "-n", "200", "--temp", "0"};
  const std::string expected = testing::read_text_file(test_data("models/stories260K/expected_greedy_t0_n200.txt"));
  {
    testing::LoopbackHub hub(served.path());
    std::vector<std::string> with_endpoint = env;
    with_endpoint.push_back("HF_ENDPOINT=" + hub.endpoint());
    const auto r = run_command(argv, with_endpoint);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected);
    EXPECT_TRUE(std::filesystem::exists(cache.path() / "tokamak/ggml-org/models/tinyllamas/stories260K.gguf"));
  }
  // The server is gone: the cached file is used without the network.
  const auto again = run_command(argv, env);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, expected);
}

// An explicit -hf never falls back to the embedded model (default_model_test.cpp).
TEST(RunFromHub, UnreachableHubSaysSoAndSuggestsDashM) {
  testing::TempDir cache;
  testing::RefusingPort refusing;
  const auto r = run_command({tokamak_bin(), "run", "-hf", "ggml-org/models:tinyllamas/stories260K.gguf", "-n", "1"},
                             {"XDG_CACHE_HOME=" + cache.path().string(), "HF_ENDPOINT=" + refusing.endpoint(),
                              "HF_HUB_OFFLINE=", "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("download of " + refusing.endpoint() + "/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("-m PATH"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("embedded"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tokamak
