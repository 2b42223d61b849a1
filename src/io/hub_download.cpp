// download_file(): one resumable HTTP(S) GET through libcurl into <dest>.part.
//
// Per attempt: lock the .part, send `Range: bytes=<part size>-` when it is not
// empty, then on the first body bytes look at the answer:
//   206 -> the Content-Range must start at our offset; append.
//   200 -> the server ignored Range (or none was sent): truncate, start at 0.
//   416 -> the .part may already hold the whole file (`bytes */N`, N == size):
//          then it is complete; otherwise discard it and try once more from 0.
// Bodies of other statuses are discarded and become errors. The .part becomes
// <dest> only when the transfer ended cleanly and the size matches what the
// server announced.
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>

#include "core/error.h"
#include "io/hub.h"

namespace tokamak::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLocalHint = "pass a local model file with -m PATH";

// libcurl's global state is process-wide by its own design; initialize it once,
// from whichever thread downloads first.
void curl_init_once() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK) throw Error(std::string("cannot initialize libcurl: ") + curl_easy_strerror(rc));
}

std::string errno_text() { return std::strerror(errno); }

// The .part file: an fd opened for appending and held under an exclusive
// flock, so a second process (or thread) cannot interleave its bytes.
class PartFile {
 public:
  explicit PartFile(fs::path path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot open " + path_.string() + " for writing: " + errno_text());
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      if (err == EWOULDBLOCK) {
        throw Error(path_.string() + " is being downloaded by another process; wait for it to finish");
      }
      throw Error("cannot lock " + path_.string() + ": " + std::strerror(err));
    }
  }
  PartFile(const PartFile&) = delete;
  PartFile& operator=(const PartFile&) = delete;
  ~PartFile() { ::close(fd_); }  // also releases the lock

  const fs::path& path() const { return path_; }

  uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw Error("cannot stat " + path_.string() + ": " + errno_text());
    return static_cast<uint64_t>(st.st_size);
  }
  void truncate() {
    if (::ftruncate(fd_, 0) != 0) throw Error("cannot truncate " + path_.string() + ": " + errno_text());
  }
  void append(const char* data, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, data, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) throw Error("cannot write " + path_.string() + ": " + (w < 0 ? errno_text() : "no progress"));
      data += w;
      n -= static_cast<size_t>(w);
    }
  }
  void sync() {
    if (::fsync(fd_) != 0) throw Error("cannot flush " + path_.string() + " to disk: " + errno_text());
  }

 private:
  fs::path path_;
  int fd_ = -1;
};

struct ContentRange {
  uint64_t start = 0;  // first byte sent (0 for "bytes */N")
  uint64_t total = 0;  // 0: "*" (unknown)
  bool unsatisfied = false;  // "bytes */N", the answer of a 416
};

bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// RFC 9110 14.4: "bytes START-END/TOTAL", "bytes START-END/*" or "bytes */TOTAL".
std::optional<ContentRange> parse_content_range(std::string_view v) {
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (!v.starts_with("bytes ")) return std::nullopt;
  v.remove_prefix(6);
  const size_t slash = v.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view range = v.substr(0, slash);
  const std::string_view total = v.substr(slash + 1);
  ContentRange cr;
  if (total != "*" && !parse_u64(total, cr.total)) return std::nullopt;
  if (range == "*") {
    cr.unsatisfied = true;
    return cr;
  }
  const size_t dash = range.find('-');
  uint64_t end = 0;
  if (dash == std::string_view::npos || !parse_u64(range.substr(0, dash), cr.start) ||
      !parse_u64(range.substr(dash + 1), end) || end < cr.start) {
    return std::nullopt;
  }
  return cr;
}

// The Content-Range of the last response, if it has one.
std::optional<std::string> content_range_header(CURL* curl) {
  curl_header* h = nullptr;
  if (curl_easy_header(curl, "Content-Range", 0, CURLH_HEADER, -1, &h) != CURLHE_OK) return std::nullopt;
  return std::string(h->value);
}

long response_code(CURL* curl) {
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  return code;
}

std::string http_status_error(const std::string& url, long code) {
  std::string why;
  if (code == 404) why = " (not found: check the repository and file name)";
  if (code == 401 || code == 403) why = " (the repository may be private or gated, or its name misspelled)";
  return "download of " + url + " failed: HTTP " + std::to_string(code) + why + "; or " + kLocalHint;
}

// State shared with the write callback for one attempt.
struct Transfer {
  CURL* curl = nullptr;
  PartFile* part = nullptr;
  const DownloadProgress* progress = nullptr;
  const std::string* url = nullptr;
  uint64_t offset = 0;    // .part size when the request went out (what Range asked for)
  uint64_t done = 0;      // bytes in the .part now
  uint64_t total = 0;     // size of the whole file, 0 when unknown
  bool body_started = false;
  bool discard = false;   // body of a non-2xx answer
  std::exception_ptr error;

  // The first body bytes have come: the final status and headers are known.
  void begin_body() {
    body_started = true;
    const long code = response_code(curl);
    if (code < 200 || code >= 300) {
      discard = true;
      return;
    }
    curl_off_t length = -1;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    if (code == 206) {
      const std::optional<std::string> header = content_range_header(curl);
      const std::optional<ContentRange> cr = header ? parse_content_range(*header) : std::nullopt;
      if (!cr || cr->unsatisfied) {
        throw Error("download of " + *url + " failed: HTTP 206 with a missing or malformed Content-Range '" +
                    header.value_or("") + "'");
      }
      if (cr->start != offset) {
        throw Error("download of " + *url + " failed: asked for bytes from " + std::to_string(offset) +
                    ", the server sent bytes from " + std::to_string(cr->start));
      }
      total = cr->total != 0 ? cr->total : (length >= 0 ? offset + static_cast<uint64_t>(length) : 0);
      done = offset;
    } else {
      if (part->size() != 0) part->truncate();  // Range ignored: the body is the whole file
      offset = 0;
      total = length >= 0 ? static_cast<uint64_t>(length) : 0;
      done = 0;
    }
  }

  void on_bytes(const char* data, size_t n) {
    if (!body_started) begin_body();
    if (discard) return;
    part->append(data, n);
    done += n;
    if (*progress) (*progress)(done, total);
  }
};

size_t write_callback(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  try {
    t->on_bytes(data, n);
    return n;
  } catch (...) {
    t->error = std::current_exception();
    return n == 0 ? 1 : 0;  // any other count than n makes libcurl stop with CURLE_WRITE_ERROR
  }
}

template <typename T>
void set_option(CURL* curl, CURLoption option, T value) {
  if (const CURLcode rc = curl_easy_setopt(curl, option, value); rc != CURLE_OK) {
    throw Error(std::string("cannot configure libcurl: ") + curl_easy_strerror(rc));
  }
}

enum class Attempt { kComplete, kRestart };

Attempt attempt_download(const std::string& url, PartFile& part, const DownloadLimits& limits,
                         const DownloadProgress& progress) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle(curl_easy_init(), &curl_easy_cleanup);
  if (!handle) throw Error("cannot create a libcurl handle for " + url);
  CURL* curl = handle.get();

  Transfer t;
  t.curl = curl;
  t.part = &part;
  t.progress = &progress;
  t.url = &url;
  t.offset = part.size();
  const std::string range = std::to_string(t.offset) + "-";
  char curl_error[CURL_ERROR_SIZE] = {};

  set_option(curl, CURLOPT_URL, url.c_str());
  set_option(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  set_option(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  set_option(curl, CURLOPT_FOLLOWLOCATION, 1L);  // the hub redirects to its CDN
  set_option(curl, CURLOPT_MAXREDIRS, 10L);
  set_option(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: other threads keep running
  set_option(curl, CURLOPT_USERAGENT, "tokamak");
  set_option(curl, CURLOPT_CONNECTTIMEOUT, limits.connect_timeout_s);
  set_option(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  set_option(curl, CURLOPT_LOW_SPEED_TIME, limits.stall_timeout_s);
  set_option(curl, CURLOPT_ERRORBUFFER, curl_error);
  set_option(curl, CURLOPT_WRITEFUNCTION, &write_callback);
  set_option(curl, CURLOPT_WRITEDATA, static_cast<void*>(&t));
  if (t.offset > 0) set_option(curl, CURLOPT_RANGE, range.c_str());

  const CURLcode rc = curl_easy_perform(curl);
  if (t.error) std::rethrow_exception(t.error);
  if (rc != CURLE_OK) {
    const std::string reason = curl_error[0] != '\0' ? std::string(curl_error) : curl_easy_strerror(rc);
    if (t.body_started && !t.discard && t.done > 0) {
      throw Error("download of " + url + " failed after " + std::to_string(t.done) + " of " +
                  (t.total != 0 ? std::to_string(t.total) : std::string("?")) + " bytes: " + reason +
                  ". The partial file " + part.path().string() + " is kept: run again to resume, or " + kLocalHint);
    }
    throw Error("download of " + url + " failed: " + reason + "; check the network connection, or " + kLocalHint);
  }

  const long code = response_code(curl);
  if (code == 416 && t.offset > 0) {
    // Nothing left after our offset: either the .part is the whole file, or it is
    // longer than the file (stale) and must go.
    const std::optional<std::string> header = content_range_header(curl);
    const std::optional<ContentRange> cr = header ? parse_content_range(*header) : std::nullopt;
    if (cr && cr->unsatisfied && cr->total == t.offset) {
      if (progress) progress(t.offset, t.offset);
      return Attempt::kComplete;
    }
    part.truncate();
    return Attempt::kRestart;
  }
  if (code < 200 || code >= 300) throw Error(http_status_error(url, code));
  if (!t.body_started) t.begin_body();  // an empty body: still truncates a .part a 200 replaces

  const uint64_t size = part.size();
  if (t.total != 0 && size != t.total) {
    part.truncate();
    throw Error("download of " + url + " failed: received " + std::to_string(size) + " bytes, the server announced " +
                std::to_string(t.total) + "; run again to download it afresh, or " + kLocalHint);
  }
  return Attempt::kComplete;
}

}  // namespace

void download_file(const std::string& url, const fs::path& dest, const DownloadLimits& limits,
                   const DownloadProgress& progress) {
  curl_init_once();
  fs::path part_path = dest;
  part_path += ".part";
  PartFile part(part_path);
  try {
    // A second attempt only follows a 416 for a stale .part, which it discarded.
    Attempt a = attempt_download(url, part, limits, progress);
    if (a == Attempt::kRestart) a = attempt_download(url, part, limits, progress);
    if (a == Attempt::kRestart) throw Error("download of " + url + " failed: the server keeps answering 416");
  } catch (...) {
    // An empty .part holds nothing to resume; leave no litter.
    std::error_code ec;
    if (fs::file_size(part_path, ec) == 0 && !ec) fs::remove(part_path, ec);
    throw;
  }
  part.sync();
  std::error_code ec;
  fs::rename(part_path, dest, ec);
  if (ec) throw Error("cannot move " + part_path.string() + " to " + dest.string() + ": " + ec.message());
}

}  // namespace tokamak::io
