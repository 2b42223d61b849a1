// A loopback HTTP/1.1 server for tests: it serves a folder in the Hugging Face
// hub's /<owner>/<name>/resolve/main/<file> layout, honours `Range: bytes=N-`,
// and has knobs for the failures a downloader must survive. It listens on
// 127.0.0.1 only, on a port the kernel picks.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/test_data.h"

namespace tokamak::testing {

namespace fs = std::filesystem;

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A temporary folder removed with everything in it.
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
    const std::string content = read_text_file(file);

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

}  // namespace tokamak::testing
