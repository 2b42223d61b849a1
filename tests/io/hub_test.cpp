// The hub downloader against a loopback HTTP/1.1 server written here: it
// serves a temporary folder in the hub's /<owner>/<name>/resolve/main/<file>
// layout, honours `Range: bytes=N-`, and has knobs for the failures the
// downloader must survive. Only 127.0.0.1 is ever contacted.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "common/loopback_hub.h"
#include "io/hub.h"

namespace tokamak::io {
namespace {

namespace fs = std::filesystem;
using testing::Knobs;
using testing::LoopbackHub;
using testing::RefusingPort;
using testing::Request;
using testing::TempDir;

// ---------------------------------------------------------------------------
// Test scaffolding: temp folders, file bytes, a fake environment.

std::string pseudo_random_bytes(size_t n, uint32_t seed) {
  std::string out(n, '\0');
  uint32_t x = seed;
  for (char& c : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x >> 24);
  }
  return out;
}

void write_file(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}


// A served repo with one file, a cache folder, and options pointing at both.
class HubTest : public ::testing::Test {
 protected:
  static constexpr size_t kSize = 300'007;  // many 16 KiB curl chunks, odd tail

  void SetUp() override {
    // The loopback server must be reached directly even where a proxy is configured.
    ::setenv("NO_PROXY", "127.0.0.1", 1);
    ::setenv("no_proxy", "127.0.0.1", 1);
    content_ = pseudo_random_bytes(kSize, 12345);
    write_file(served_.path() / file_.repo / "resolve/main" / file_.file, content_);
    server_ = std::make_unique<LoopbackHub>(served_.path());
    options_.cache_dir = cache_.path() / "tokamak";
    options_.endpoint = server_->endpoint();
    options_.limits.connect_timeout_s = 5;
    options_.limits.stall_timeout_s = 5;
  }

  fs::path dest() const { return options_.cache_dir / "test-org" / "tiny-models" / "sub" / "model.gguf"; }
  fs::path part() const { return fs::path(dest().string() + ".part"); }
  std::string message_of_fetch() {
    try {
      hub_fetch(file_, options_);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "hub_fetch did not throw";
    return {};
  }

  HubFile file_{"test-org/tiny-models", "sub/model.gguf"};
  TempDir served_;
  TempDir cache_;
  std::string content_;
  std::unique_ptr<LoopbackHub> server_;
  HubOptions options_;
};

// Records every progress call and checks they never go backwards.
struct ProgressLog {
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  DownloadProgress callback() {
    return [this](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  }
  void expect_monotone() const {
    for (size_t i = 1; i < calls.size(); ++i) {
      EXPECT_GE(calls[i].first, calls[i - 1].first) << "progress call " << i;
    }
  }
};

// ---------------------------------------------------------------------------
// Downloads

TEST_F(HubTest, FreshDownloadIsByteIdenticalWithMonotoneProgress) {
  ProgressLog log;
  const fs::path got = hub_fetch(file_, options_, log.callback());
  EXPECT_EQ(got, dest());
  EXPECT_EQ(read_file(got), content_);
  EXPECT_FALSE(fs::exists(part()));
  ASSERT_GT(log.calls.size(), 2u);
  log.expect_monotone();
  EXPECT_EQ(log.calls.back(), std::make_pair(uint64_t{kSize}, uint64_t{kSize}));
  for (const auto& [done, total] : log.calls) EXPECT_EQ(total, kSize);
  const std::vector<Request> reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].target, "/test-org/tiny-models/resolve/main/sub/model.gguf");
  EXPECT_EQ(reqs[0].header("range"), "");
}

TEST_F(HubTest, CacheHitMakesNoRequest) {
  hub_fetch(file_, options_);
  ASSERT_EQ(server_->requests().size(), 1u);
  ProgressLog log;
  EXPECT_EQ(hub_fetch(file_, options_, log.callback()), dest());
  EXPECT_EQ(server_->requests().size(), 1u);
  EXPECT_TRUE(log.calls.empty());
  // Offline: a cached file needs no server at all.
  RefusingPort refusing;
  options_.endpoint = refusing.endpoint();
  EXPECT_EQ(read_file(hub_fetch(file_, options_)), content_);
}

TEST_F(HubTest, ResumesAfterADroppedConnection) {
  constexpr int64_t kCut = 100'000;
  server_->set({.drop_after = kCut});
  const std::string msg = message_of_fetch();
  EXPECT_NE(msg.find(hub_url(options_, file_)), std::string::npos) << msg;
  EXPECT_NE(msg.find("resume"), std::string::npos) << msg;
  EXPECT_NE(msg.find("-m PATH"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dest()));
  ASSERT_TRUE(fs::exists(part()));
  EXPECT_EQ(fs::file_size(part()), static_cast<uint64_t>(kCut));

  server_->set({});
  const uint64_t sent_before = server_->body_bytes_sent();
  ProgressLog log;
  EXPECT_EQ(read_file(hub_fetch(file_, options_, log.callback())), content_);
  EXPECT_FALSE(fs::exists(part()));
  EXPECT_EQ(server_->body_bytes_sent() - sent_before, kSize - kCut);  // only the rest travelled
  const std::vector<Request> reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].header("range"), "bytes=100000-");
  ASSERT_FALSE(log.calls.empty());
  EXPECT_GT(log.calls.front().first, static_cast<uint64_t>(kCut));
  log.expect_monotone();
  EXPECT_EQ(log.calls.back(), std::make_pair(uint64_t{kSize}, uint64_t{kSize}));
}

TEST_F(HubTest, ServerIgnoringRangeRestartsFromZero) {
  write_file(part(), std::string(5000, 'x'));  // would corrupt the file if appended to
  server_->set({.ignore_range = true});
  ProgressLog log;
  EXPECT_EQ(read_file(hub_fetch(file_, options_, log.callback())), content_);
  const std::vector<Request> reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].header("range"), "bytes=5000-");
  log.expect_monotone();
  EXPECT_EQ(log.calls.back().first, kSize);
}

TEST_F(HubTest, FollowsRedirectsAndResumesThroughThem) {
  server_->set({.drop_after = 7'000, .redirect = true});
  message_of_fetch();
  ASSERT_EQ(fs::file_size(part()), 7'000u);  // the 302's own body was not written
  server_->set({.redirect = true});
  EXPECT_EQ(read_file(hub_fetch(file_, options_)), content_);
  const std::vector<Request> reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[2].target, "/test-org/tiny-models/resolve/main/sub/model.gguf");
  EXPECT_EQ(reqs[3].target, "/cdn/test-org/tiny-models/resolve/main/sub/model.gguf");
  EXPECT_EQ(reqs[3].header("range"), "bytes=7000-");
}

TEST_F(HubTest, CompletePartFileIsFinishedBy416) {
  // A crash between the last write and the rename leaves a whole .part.
  write_file(part(), content_);
  EXPECT_EQ(read_file(hub_fetch(file_, options_)), content_);
  EXPECT_FALSE(fs::exists(part()));
  EXPECT_EQ(server_->body_bytes_sent(), 0u);
  ASSERT_EQ(server_->requests().size(), 1u);
}

TEST_F(HubTest, OverlongPartFileIsDiscarded) {
  write_file(part(), content_ + "stale tail");
  EXPECT_EQ(read_file(hub_fetch(file_, options_)), content_);
  const std::vector<Request> reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].header("range"), "bytes=" + std::to_string(kSize + 10) + "-");
  EXPECT_EQ(reqs[1].header("range"), "");
}

TEST_F(HubTest, UnknownLengthReportsZeroTotal) {
  server_->set({.no_length = true});
  ProgressLog log;
  EXPECT_EQ(read_file(hub_fetch(file_, options_, log.callback())), content_);
  ASSERT_FALSE(log.calls.empty());
  for (const auto& [done, total] : log.calls) EXPECT_EQ(total, 0u);
  EXPECT_EQ(log.calls.back().first, kSize);
}

TEST_F(HubTest, EmptyFileDownloads) {
  const HubFile empty{"test-org/tiny-models", "empty.bin"};
  write_file(served_.path() / empty.repo / "resolve/main" / empty.file, "");
  const fs::path got = hub_fetch(empty, options_);
  EXPECT_TRUE(fs::is_regular_file(got));
  EXPECT_EQ(fs::file_size(got), 0u);
}

TEST_F(HubTest, ProgressCallbackExceptionStopsAndKeepsPart) {
  int calls = 0;
  const DownloadProgress stop_early = [&](uint64_t, uint64_t) {
    if (++calls == 2) throw std::runtime_error("cancelled by the test");
  };
  EXPECT_THROW(hub_fetch(file_, options_, stop_early), std::runtime_error);
  EXPECT_FALSE(fs::exists(dest()));
  ASSERT_TRUE(fs::exists(part()));
  EXPECT_GT(fs::file_size(part()), 0u);
  EXPECT_EQ(read_file(hub_fetch(file_, options_)), content_);
}

// ---------------------------------------------------------------------------
// Errors

TEST_F(HubTest, NotFoundNamesUrlAndStatus) {
  file_.file = "missing.gguf";
  const std::string msg = message_of_fetch();
  EXPECT_NE(msg.find(server_->endpoint() + "/test-org/tiny-models/resolve/main/missing.gguf"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("HTTP 404"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(options_.cache_dir / "test-org/tiny-models/missing.gguf.part"));  // no empty litter
}

TEST_F(HubTest, UnauthorizedSuggestsGatedRepo) {
  server_->set({.status = 401});
  const std::string msg = message_of_fetch();
  EXPECT_NE(msg.find("HTTP 401"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gated"), std::string::npos) << msg;
}

TEST_F(HubTest, ConnectionRefusedSuggestsLocalModel) {
  RefusingPort refusing;
  options_.endpoint = refusing.endpoint();
  const std::string msg = message_of_fetch();
  EXPECT_NE(msg.find("download of " + refusing.endpoint() + "/test-org/"), std::string::npos) << msg;
  EXPECT_NE(msg.find("onnect"), std::string::npos) << msg;  // curl's reason: "Couldn't connect ..."
  EXPECT_NE(msg.find("-m PATH"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(part()));
}

TEST_F(HubTest, StalledServerTimesOut) {
  server_->set({.delay_ms = 4000});
  options_.limits.stall_timeout_s = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = message_of_fetch();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_NE(msg.find("-m PATH"), std::string::npos) << msg;
}

TEST_F(HubTest, OfflineServesTheCacheAndRefusesTheRest) {
  options_.offline = true;
  const std::string msg = message_of_fetch();
  EXPECT_NE(msg.find("test-org/tiny-models:sub/model.gguf is not in the model cache (" + dest().string() + ")"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("HF_HUB_OFFLINE"), std::string::npos) << msg;
  EXPECT_TRUE(server_->requests().empty());
  EXPECT_FALSE(fs::exists(part()));
  write_file(dest(), "cached bytes");
  EXPECT_EQ(read_file(hub_fetch(file_, options_)), "cached bytes");
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(HubTest, SecondDownloaderOfTheSameFileIsRefused) {
  fs::create_directories(part().parent_path());
  const int fd = ::open(part().c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string msg = message_of_fetch();
  ::close(fd);
  EXPECT_NE(msg.find(part().string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("another process"), std::string::npos) << msg;
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(HubTest, UnwritableCacheNamesThePath) {
  write_file(cache_.path() / "not-a-folder", "x");
  options_.cache_dir = cache_.path() / "not-a-folder";
  const std::string msg = message_of_fetch();
  EXPECT_NE(msg.find((cache_.path() / "not-a-folder").string()), std::string::npos) << msg;
  EXPECT_TRUE(server_->requests().empty());
}

// ---------------------------------------------------------------------------
// Names, paths, environment

TEST(HubNames, DefaultModelUrlAndCachePath) {
  HubOptions o;
  o.cache_dir = "/cache/tokamak";
  const HubFile f = default_hub_file();
  EXPECT_EQ(f.repo, "ggml-org/models");
  EXPECT_EQ(f.file, "tinyllamas/stories15M-q4_0.gguf");
  EXPECT_EQ(kDefaultHubFileBytes, 19'077'344u);
  EXPECT_EQ(hub_url(o, f), "https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories15M-q4_0.gguf");
  EXPECT_EQ(hub_cache_path(o, f), fs::path("/cache/tokamak/ggml-org/models/tinyllamas/stories15M-q4_0.gguf"));
  o.endpoint = "http://mirror.example/hf/";
  EXPECT_EQ(hub_url(o, {"a/b", "dir/x y+z%.gguf"}), "http://mirror.example/hf/a/b/resolve/main/dir/x%20y%2Bz%25.gguf");
}

TEST(HubNames, ParseHfSpec) {
  const HubFile f = parse_hf_spec("ggml-org/models:tinyllamas/stories15M-q4_0.gguf");
  EXPECT_EQ(f.repo, "ggml-org/models");
  EXPECT_EQ(f.file, "tinyllamas/stories15M-q4_0.gguf");
  const HubFile g = parse_hf_spec("Org_1/Name.v2-GGUF:model:with:colons.gguf");  // the first ':' splits
  EXPECT_EQ(g.repo, "Org_1/Name.v2-GGUF");
  EXPECT_EQ(g.file, "model:with:colons.gguf");
}

TEST(HubNames, ParseHfSpecWithoutFileAsksForIt) {
  for (const char* spec : {"ggml-org/models", "ggml-org/models:"}) {
    try {
      parse_hf_spec(spec);
      ADD_FAILURE() << spec;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(spec), std::string::npos) << msg;
      EXPECT_NE(msg.find("REPO:FILE"), std::string::npos) << msg;
    }
  }
}

TEST(HubNames, ParseHfSpecRejectsUnsafeNames) {
  for (const char* spec : {"models:x.gguf", "a/b/c:x.gguf", "/b:x.gguf", "a/:x.gguf", "../b:x.gguf", "a/..:x.gguf",
                           "a b/c:x.gguf", "a/b:../x.gguf", "a/b:/etc/passwd", "a/b:x//y.gguf", "a/b:x/./y",
                           "a/b:dir/", "a/b:x\\y.gguf", "a/b:x\ny", ":x.gguf"}) {
    EXPECT_THROW(parse_hf_spec(spec), Error) << spec;
  }
  // hub_fetch checks names it did not parse itself.
  HubOptions o;
  o.cache_dir = "/nonexistent-cache";
  EXPECT_THROW(hub_fetch({"a/b", "../../escape"}, o), Error);
}

std::function<const char*(const char*)> fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(HubEnv, CacheFolderAndEndpoint) {
  HubOptions o = hub_options_from_env(fake_env({{"HOME", "/home/u"}}));
  EXPECT_EQ(o.cache_dir, fs::path("/home/u/.cache/tokamak"));
  EXPECT_EQ(o.endpoint, "https://huggingface.co");

  o = hub_options_from_env(fake_env({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}}));
  EXPECT_EQ(o.cache_dir, fs::path("/xdg/tokamak"));
  // Empty or relative XDG_CACHE_HOME is ignored (XDG Base Directory spec).
  o = hub_options_from_env(fake_env({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", ""}}));
  EXPECT_EQ(o.cache_dir, fs::path("/home/u/.cache/tokamak"));
  o = hub_options_from_env(fake_env({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "rel/cache"}}));
  EXPECT_EQ(o.cache_dir, fs::path("/home/u/.cache/tokamak"));

  o = hub_options_from_env(fake_env({{"HOME", "/home/u"}, {"HF_ENDPOINT", "https://hf-mirror.com/"}}));
  EXPECT_EQ(o.endpoint, "https://hf-mirror.com");
  o = hub_options_from_env(fake_env({{"HOME", "/home/u"}, {"HF_ENDPOINT", ""}}));
  EXPECT_EQ(o.endpoint, "https://huggingface.co");
  EXPECT_THROW(hub_options_from_env(fake_env({{"HOME", "/home/u"}, {"HF_ENDPOINT", "ftp://x"}})), Error);
}

TEST(HubEnv, OfflineTakesTheHuggingFaceTrueValues) {
  EXPECT_FALSE(hub_options_from_env(fake_env({{"HOME", "/home/u"}})).offline);
  for (const char* v : {"1", "ON", "on", "YES", "Yes", "TRUE", "true"}) {
    EXPECT_TRUE(hub_options_from_env(fake_env({{"HOME", "/home/u"}, {"HF_HUB_OFFLINE", v}})).offline) << v;
  }
  for (const char* v : {"", "0", "off", "no", "false", "2", "1 "}) {
    EXPECT_FALSE(hub_options_from_env(fake_env({{"HOME", "/home/u"}, {"HF_HUB_OFFLINE", v}})).offline) << v;
  }
}

TEST(HubEnv, NoHomeIsAnError) {
  try {
    hub_options_from_env(fake_env({}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-m PATH"), std::string::npos) << e.what();
  }
  EXPECT_THROW(hub_options_from_env(fake_env({{"HOME", ""}})), Error);
}

}  // namespace
}  // namespace tokamak::io
