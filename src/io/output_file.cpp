#include "io/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/error.h"

namespace tokamak::io {
namespace {

std::string reason() { return std::strerror(errno); }

// "<path>.tmp.<pid>.<random>": beside the target, so the rename stays in one file system.
std::filesystem::path temp_name_for(const std::filesystem::path& path) {
  std::filesystem::path temp = path;
  temp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}() % 1000000);
  return temp;
}

}  // namespace

OutputFile OutputFile::create(const std::filesystem::path& path) {
  OutputFile f;
  f.owned_ = true;
  f.target_ = path;
  f.name_ = path.string();
  const std::filesystem::path folder = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  f.fd_ = ::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (f.fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // No O_TMPFILE here: a named temporary, created exclusively (0666 less the umask).
    for (int attempt = 0; attempt < 16 && f.fd_ < 0; ++attempt) {
      f.temp_ = temp_name_for(path);
      f.fd_ = ::open(f.temp_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
      if (f.fd_ < 0 && errno != EEXIST) break;
    }
    if (f.fd_ < 0) f.temp_.clear();
  }
  if (f.fd_ < 0) throw Error(f.name_ + ": cannot create a file in " + folder.string() + ": " + reason());
  return f;
}

OutputFile OutputFile::of_descriptor(int fd, std::string name) {
  OutputFile f;
  f.fd_ = fd;
  f.name_ = std::move(name);
  return f;
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : fd_(other.fd_),
      owned_(other.owned_),
      target_(std::move(other.target_)),
      temp_(std::move(other.temp_)),
      name_(std::move(other.name_)) {
  other.fd_ = -1;
  other.owned_ = false;
  other.temp_.clear();
}

OutputFile::~OutputFile() {
  if (!owned_) return;
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void OutputFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) throw Error(name_ + ": write after commit");
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(name_ + ": write failed: " + (n < 0 ? reason() : std::string("no progress")));
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void OutputFile::commit() {
  if (fd_ < 0) throw Error(name_ + ": committed twice");
  if (!owned_) {
    fd_ = -1;
    return;
  }
  if (::fsync(fd_) != 0) throw Error(name_ + ": cannot sync to disk: " + reason());
  if (temp_.empty()) {
    // Give the unnamed file a name: linkat through /proc (no capability needed).
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    for (int attempt = 0; attempt < 16 && temp_.empty(); ++attempt) {
      temp_ = temp_name_for(target_);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
      const int e = errno;
      temp_.clear();
      if (e != EEXIST) {
        errno = e;
        throw Error(name_ + ": cannot name the finished file: " + reason());
      }
    }
    if (temp_.empty()) throw Error(name_ + ": cannot name the finished file: every temporary name is taken");
  }
  // The rename follows the naming at once: a process killed between the two
  // leaves the named temporary behind, and a close() between them widened
  // that window enough for a SIGKILL in a loaded test run to land in it
  // (Streams.NoPartialFileAfterABrokenPipeOrAKill failed once that way). The
  // data is already synced, so closing after the rename loses nothing.
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    throw Error(name_ + ": cannot rename " + temp_.string() + " to it: " + reason());
  }
  temp_.clear();
  owned_ = false;
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) throw Error(name_ + ": write failed at close: " + reason());
}

}  // namespace tokamak::io
