// The standard streams, made safe for the commands: descriptors 0-2 always
// open, stdout write errors (a full disk, a closed pipe) reported, never lost.
#pragma once

#include <string>
#include <string_view>

#include "io/output_file.h"

namespace tokamak::cli {

// Call first thing in main, before anything is opened. Opens /dev/null on
// each of descriptors 0-2 that is closed (a file opened later would otherwise
// take that number and receive the progress lines meant for stdout or stderr),
// and ignores SIGPIPE so that writing to a closed pipe is an error the
// command reports and cleans up after (its partial output file removed),
// not a death. Returns false when /dev/null cannot be opened.
bool prepare_standard_streams();

// Writes and flushes `text` on stdout; throws tokamak::Error
// "stdout: write failed: <reason>" when that fails.
void write_stdout(std::string_view text);

// Generated text on stdout, written and flushed as it comes. finish() ends it
// with a newline when stdout is a terminal and the text did not end with one,
// so that the shell's prompt starts on its own line; a file or pipe gets the
// text exactly.
class TextOutput {
 public:
  void write(std::string_view text);
  void finish();

 private:
  bool at_line_start_ = true;
};

// At the end of a command: flushes stdout and checks that no earlier write
// failed. Returns the empty string, or what went wrong.
std::string finish_stdout();

// `-o FILE` of a command: "-" is stdout (refused when stdout is a terminal and
// `binary`: bytes for a program, not for a screen), anything else a new file
// that appears only when complete (io::OutputFile::create). `flag` names the
// option in messages.
io::OutputFile open_output(const std::string& arg, std::string_view flag, bool binary);

}  // namespace tokamak::cli
