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
#include "io/hub.h"

namespace tokamak::io {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Test scaffolding: temp folders, file bytes, a fake environment.

class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "tokamak_hub_XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

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

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ---------------------------------------------------------------------------
// The loopback server. One thread accepts and answers one connection at a
// time; every answer carries `Connection: close`.

struct Knobs {
  bool ignore_range = false;  // answer 200 with the whole file even to a Range request
  int64_t drop_after = -1;    // send only this many body bytes, then close (>= 0)
  int status = 0;             // answer every request with this status (e.g. 404, 401)
  int delay_ms = 0;           // wait before the body (a stalled server)
  bool redirect = false;      // /<path> answers 302 to /cdn/<path>, like the hub
  bool no_length = false;     // no Content-Length: the body ends when the connection closes
};

struct Request {
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class LoopbackHub {
 public:
  explicit LoopbackHub(fs::path root) : root_(std::move(root)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 8) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        ::pipe2(wake_, O_CLOEXEC) != 0) {
      throw std::runtime_error("loopback server setup failed");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackHub() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    const char b = 1;
    (void)!::write(wake_[1], &b, 1);
    thread_.join();
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void set(const Knobs& k) {
    std::lock_guard<std::mutex> lock(mu_);
    knobs_ = k;
  }
  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  uint64_t body_bytes_sent() const { return body_bytes_sent_.load(); }

 private:
  void serve() {
    while (true) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents != 0) return;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      timeval tv{2, 0};  // a client that sends nothing must not hang the test
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      handle(fd);
      ::shutdown(fd, SHUT_WR);
      ::close(fd);
    }
  }

  void send_all(int fd, const char* data, size_t n, bool body) {
    while (n > 0) {
      const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
      if (w <= 0) return;
      if (body) body_bytes_sent_ += static_cast<uint64_t>(w);
      data += w;
      n -= static_cast<size_t>(w);
    }
  }

  void respond(int fd, int status, const std::string& reason, const std::vector<std::string>& headers,
               const std::string& body, bool send_length) {
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
    for (const std::string& h : headers) head += h + "\r\n";
    if (send_length) head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    head += "Connection: close\r\n\r\n";
    send_all(fd, head.data(), head.size(), false);
    send_all(fd, body.data(), body.size(), true);
  }

  void handle(int fd) {
    std::string in;
    char buf[4096];
    while (in.find("\r\n\r\n") == std::string::npos && in.size() < 65536) {
      const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
      if (r <= 0) return;
      in.append(buf, static_cast<size_t>(r));
    }
    Request req;
    const size_t line_end = in.find("\r\n");
    const std::string line = in.substr(0, line_end);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = line.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos) return;
    req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    for (size_t pos = line_end + 2; pos < in.size();) {
      const size_t end = in.find("\r\n", pos);
      if (end == std::string::npos || end == pos) break;
      const std::string h = in.substr(pos, end - pos);
      if (const size_t colon = h.find(':'); colon != std::string::npos) {
        req.headers[lower(h.substr(0, colon))] = h.substr(h.find_first_not_of(' ', colon + 1));
      }
      pos = end + 2;
    }
    Knobs k;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(req);
      k = knobs_;
    }

    if (k.status != 0) return respond(fd, k.status, "Forced", {}, "{\"error\":\"forced\"}", true);
    std::string path = req.target;
    if (path.starts_with("/cdn/")) {
      path = path.substr(4);
    } else if (k.redirect) {
      return respond(fd, 302, "Found", {"Location: /cdn" + req.target}, "redirect body, not the file", true);
    }
    const fs::path file = root_ / path.substr(1);
    if (path.find("..") != std::string::npos || !fs::is_regular_file(file)) {
      return respond(fd, 404, "Not Found", {}, "Entry not found", true);
    }
    const std::string content = read_file(file);

    std::string body = content;
    int status = 200;
    std::vector<std::string> headers = {"Content-Type: application/octet-stream", "Accept-Ranges: bytes"};
    const std::string range = req.header("range");
    if (!range.empty() && !k.ignore_range) {
      // Only the form the downloader sends: "bytes=N-".
      if (!range.starts_with("bytes=") || !range.ends_with("-") || range.size() < 8) {
        return respond(fd, 400, "Bad Range", {}, "", true);
      }
      const uint64_t from = std::stoull(range.substr(6));
      if (from >= content.size()) {
        return respond(fd, 416, "Range Not Satisfiable", {"Content-Range: bytes */" + std::to_string(content.size())},
                       "", true);
      }
      status = 206;
      body = content.substr(from);
      headers.push_back("Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(content.size() - 1) +
                        "/" + std::to_string(content.size()));
    }
    std::string head = "HTTP/1.1 " + std::to_string(status) + (status == 206 ? " Partial Content" : " OK") + "\r\n";
    for (const std::string& h : headers) head += h + "\r\n";
    if (!k.no_length) head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    head += "Connection: close\r\n\r\n";
    send_all(fd, head.data(), head.size(), false);
    if (k.delay_ms > 0) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(k.delay_ms), [this] { return stop_; });
      if (stop_) return;
    }
    const size_t n = k.drop_after >= 0 ? std::min(body.size(), static_cast<size_t>(k.drop_after)) : body.size();
    send_all(fd, body.data(), n, true);
  }

  fs::path root_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Knobs knobs_;
  std::vector<Request> requests_;
  std::atomic<uint64_t> body_bytes_sent_{0};
};

// A port on 127.0.0.1 that refuses connections: bound, never listening, held
// open for the test so no other process can take it.
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot bind a loopback port");
    }
    port_ = ntohs(addr.sin_port);
  }
  ~RefusingPort() { ::close(fd_); }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

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
