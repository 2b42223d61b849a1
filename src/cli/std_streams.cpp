#include "cli/std_streams.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "cli/args.h"
#include "core/error.h"

namespace tokamak::cli {

bool prepare_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open() takes the lowest free number: this one, the lower ones being open.
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened != fd) return false;
  }
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}

void write_stdout(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    throw Error(std::string("stdout: write failed: ") + std::strerror(errno));
  }
}

void TextOutput::write(std::string_view text) {
  if (text.empty()) return;
  write_stdout(text);
  at_line_start_ = text.back() == '\n';
}

void TextOutput::finish() {
  if (!at_line_start_ && ::isatty(STDOUT_FILENO) != 0) write_stdout("\n");
  at_line_start_ = true;
}

std::string finish_stdout() {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (flushed && std::ferror(stdout) == 0) return {};
  return std::string("stdout: write failed") + (errno != 0 ? std::string(": ") + std::strerror(errno) : "");
}

io::OutputFile open_output(const std::string& arg, std::string_view flag, bool binary) {
  if (arg.empty()) throw UsageError("option " + std::string(flag) + ": the file name is empty");
  if (arg != "-") return io::OutputFile::create(arg);
  if (binary && ::isatty(STDOUT_FILENO) != 0) {
    throw UsageError("option " + std::string(flag) +
                     " -: stdout is a terminal; redirect it to a file or a pipe to write binary data there");
  }
  if (std::fflush(stdout) != 0) throw Error(std::string("stdout: write failed: ") + std::strerror(errno));
  return io::OutputFile::of_descriptor(STDOUT_FILENO, "stdout");
}

}  // namespace tokamak::cli
