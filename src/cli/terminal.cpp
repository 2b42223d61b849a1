#include "cli/terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/error.h"

namespace tokamak::cli {
namespace {

sigset_t sigint_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  return set;
}

void drain(int fd) {
  char buf[64];
  while (::read(fd, buf, sizeof buf) > 0) {
  }
}

}  // namespace

InterruptWatcher::InterruptWatcher() {
  const sigset_t set = sigint_set();
  if (const int e = pthread_sigmask(SIG_BLOCK, &set, &old_mask_); e != 0) {
    throw Error(std::string("cannot block SIGINT: ") + std::strerror(e));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int e = errno;
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    throw Error(std::string("cannot make a pipe for Ctrl-C: ") + std::strerror(e));
  }
  wake_read_ = fds[0];
  wake_write_ = fds[1];
  watcher_ = std::thread([this, set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (stopping_.load()) return;
      flag_.store(true);
      const char byte = 1;
      [[maybe_unused]] const ssize_t n = ::write(wake_write_, &byte, 1);  // full pipe: already readable
    }
  });
}

InterruptWatcher::~InterruptWatcher() {
  stopping_.store(true);
  pthread_kill(watcher_.native_handle(), SIGINT);
  watcher_.join();
  const sigset_t set = sigint_set();
  const timespec zero{};
  while (sigtimedwait(&set, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  ::close(wake_read_);
  ::close(wake_write_);
}

void InterruptWatcher::clear() {
  flag_.store(false);
  drain(wake_read_);
}

LineStatus LineReader::read_line(std::string& line, int wake_fd) {
  for (;;) {
    if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      line.assign(buffer_, 0, nl);
      buffer_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return LineStatus::Line;
    }
    if (eof_) {
      if (buffer_.empty()) return LineStatus::EndOfInput;
      line = std::move(buffer_);
      buffer_.clear();
      return LineStatus::Line;
    }
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    if (poll(fds, wake_fd >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      eof_ = true;
      continue;
    }
    if (wake_fd >= 0 && (fds[1].revents & POLLIN) != 0) return LineStatus::Interrupted;
    if (fds[0].revents == 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n > 0) {
      buffer_.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      eof_ = true;  // end of file, or a terminal hung up (EIO)
    }
  }
}

}  // namespace tokamak::cli
