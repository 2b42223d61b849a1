// Interactive input for the CLI: Ctrl-C without a signal handler's global
// state, and line reading that a Ctrl-C interrupts.
#pragma once

#include <atomic>
#include <csignal>
#include <string>
#include <thread>

namespace tokamak::cli {

// SIGINT is blocked in the constructing thread and, the mask being inherited,
// in every thread started after it (construct this before any thread, the
// thread pool included); a watcher thread takes each SIGINT with sigwait(),
// sets flag() and makes wake_fd() readable. So a Ctrl-C reaches the program
// wherever it is: a generate() loop polling flag(), or read_line() in poll().
class InterruptWatcher {
 public:
  InterruptWatcher();  // throws tokamak::Error when the pipe or the thread cannot be made
  // Stops the watcher, drops a SIGINT still pending and restores the signal mask.
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  const std::atomic<bool>& flag() const { return flag_; }  // true after a Ctrl-C, until clear()
  int wake_fd() const { return wake_read_; }               // readable after a Ctrl-C, until clear()
  void clear();

 private:
  sigset_t old_mask_;
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::atomic<bool> flag_{false};
  std::atomic<bool> stopping_{false};
  std::thread watcher_;
};

enum class LineStatus { Line, EndOfInput, Interrupted };

// Lines of a file descriptor (a terminal, a pipe, a file), without their
// "\n" or "\r\n". An unterminated last line is a line too.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  // Waits for a whole line, or returns Interrupted as soon as `wake_fd`
  // (-1: none) is readable. A read error other than EINTR ends the input.
  LineStatus read_line(std::string& line, int wake_fd);

 private:
  int fd_;
  std::string buffer_;  // bytes read past the last line returned
  bool eof_ = false;
};

}  // namespace tokamak::cli
