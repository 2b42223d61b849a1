// Issue 19 findings 1-3 through the real binary and a shell: closed standard
// descriptors, a full stdout, a reader that goes away, a process killed while
// it writes. Output files are byte-compared with a run on ordinary streams.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "common/test_data.h"

namespace tokamak {
namespace {

using testing::read_text_file;
using testing::run_command;
using testing::temp_file;
using testing::test_data;
using testing::tokamak_bin;
namespace fs = std::filesystem;

// bash, for pipefail and PIPESTATUS.
testing::CommandResult shell(const std::string& script) { return run_command({"/bin/bash", "-c", script}); }

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

// A fresh folder per test: what is left in it is what a command left behind.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = temp_file(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

const std::string kF32 = test_data("fixtures/models/micro-llama-f32.gguf").string();
const std::string kStories = test_data("models/stories260K/stories260K.gguf").string();

// Finding 1: with stdout, stderr or stdin closed, a file the command opens
// must not take descriptor 0, 1 or 2 (it then received the progress lines).
TEST(Streams, ClosedDescriptorsLeaveOutputFilesByteIdentical) {
  const fs::path dir = fresh_dir("streams_closed");
  const std::string bin = q(tokamak_bin());
  auto r = shell(bin + " quantize " + q(kF32) + " " + q(dir / "ref.gguf") + " q8_0 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = shell(bin + " make-model --preset micro -o " + q(dir / "ref-m.gguf") + " -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string ref = read_text_file(dir / "ref.gguf");
  const std::string ref_m = read_text_file(dir / "ref-m.gguf");
  for (const std::string closed : {">&-", "2>&-", "<&-", ">&- 2>&- <&-"}) {
    SCOPED_TRACE(closed);
    r = shell(bin + " quantize " + q(kF32) + " " + q(dir / "q.gguf") + " q8_0 -t 1 " + closed);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(read_text_file(dir / "q.gguf") == ref);
    r = shell(bin + " make-model --preset micro -o " + q(dir / "m.gguf") + " -t 1 " + closed);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(read_text_file(dir / "m.gguf") == ref_m);
    r = shell(bin + " logits -m " + q(kStories) + " --ids 1,403,407 -o " + q(dir / "l.f32") + " " + closed);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(fs::file_size(dir / "l.f32"), 3u * 512u * sizeof(float));
  }
  // A closed stdin reads as empty: `-p -` then is the empty prompt (BOS only).
  const auto a = shell(bin + " run -m " + q(kStories) + " -p - -n 8 --temp 0 -t 1 <&-");
  const auto b = shell(bin + " run -m " + q(kStories) + " -n 8 --temp 0 -t 1 </dev/null");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"ref.gguf", "ref-m.gguf", "q.gguf", "m.gguf", "l.f32"}));
  fs::remove_all(dir);
}

// Finding 2: a failed write of stdout is an error with a non-zero exit.
TEST(Streams, AFullStdoutIsAnError) {
  const std::string bin = q(tokamak_bin());
  const std::string cases[] = {
      bin + " run -m " + q(kStories) + " -n 8 -t 1 -p Once",
      bin + " tokenize -m " + q(kStories) + " -p 'Once upon a time'",
      bin + " tokenize -m " + q(kStories) + " -p 'Once upon a time' --ids",
      bin + " quantize " + q(kF32) + " - q8_0 -t 1",
      bin + " make-model --preset micro -o - -t 1",
      bin + " logits -m " + q(kStories) + " --ids 1,403 -o -",
      bin + " --version",
      bin + " run --help",
  };
  for (const std::string& command : cases) {
    const auto r = shell(command + " >/dev/full");
    EXPECT_EQ(r.exit_code, 1) << command << "\n" << r.err;
    EXPECT_NE(r.err.find("write failed: No space left on device"), std::string::npos) << command << "\n" << r.err;
  }
}

// Finding 2: output files appear whole or not at all. A reader that goes away
// (SIGPIPE is ignored: the write fails) and a SIGKILL midway leave no partial
// file; an existing file at the name is kept until the new one is complete.
TEST(Streams, NoPartialFileAfterABrokenPipeOrAKill) {
  const fs::path dir = fresh_dir("streams_partial");
  const std::string bin = q(tokamak_bin());
  auto r = shell(bin + " quantize " + q(kF32) + " " + q(dir / "ref.gguf") + " q8_0 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string ref = read_text_file(dir / "ref.gguf");

  // The case: quantize's table into `head -1` (it was on stdout then).
  r = shell("set -o pipefail; " + bin + " quantize " + q(kF32) + " " + q(dir / "q.gguf") + " q8_0 -t 1 2>&1 | head -1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_text_file(dir / "q.gguf") == ref);

  // The file itself into a pipe that closes after 100 bytes: an error, no file.
  r = shell("set -o pipefail; " + bin + " quantize " + q(kF32) + " - q8_0 -t 1 | head -c 100 >/dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("tokamak quantize: error: stdout: write failed: Broken pipe"), std::string::npos) << r.err;

  // Generated text into a reader that stops: the run stops too, with status 1.
  r = shell("set -o pipefail; " + bin + " run -m " + q(kStories) + " -n 400 -t 1 | head -c 1 >/dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("stdout: write failed: Broken pipe"), std::string::npos) << r.err;

  // Killed at some point of writing (whenever it is): the old file or the new
  // one, whole, and nothing else.
  { std::ofstream(dir / "k.gguf") << "old"; }
  for (const char* delay : {"0.05", "0.2"}) {
    r = shell(bin + " make-model --preset micro -t 1 -o " + q(dir / "k.gguf") + " 2>/dev/null & sleep " + delay +
              "; kill -9 $! 2>/dev/null; wait $! 2>/dev/null; true");
    const std::string now = read_text_file(dir / "k.gguf");
    EXPECT_TRUE(now == "old" || now.starts_with("GGUF")) << now.size();
  }
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"ref.gguf", "q.gguf", "k.gguf"}));
  fs::remove_all(dir);
}

// Finding 3: stdout carries the result only; the progress goes to stderr.
TEST(Streams, DiagnosticsGoToStderr) {
  const fs::path dir = fresh_dir("streams_stderr");
  const std::string bin = q(tokamak_bin());
  auto r = shell(bin + " quantize " + q(kF32) + " " + q(dir / "q.gguf") + " q8_0 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("[  39/  39]"), std::string::npos) << r.err;
  r = shell(bin + " make-model --preset micro -o " + q(dir / "m.gguf") + " -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  // `-o -` puts the file itself on stdout: the same bytes as the named file.
  r = shell(bin + " quantize " + q(kF32) + " - q8_0 -t 1 > " + q(dir / "piped.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_text_file(dir / "piped.gguf") == read_text_file(dir / "q.gguf"));
  r = shell(bin + " make-model --preset micro -o - -t 1 > " + q(dir / "piped-m.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_text_file(dir / "piped-m.gguf") == read_text_file(dir / "m.gguf"));
  // run: the text alone on stdout, the summary on stderr.
  r = run_command({tokamak_bin(), "run", "-m", kStories, "-n", "8", "--temp", "0", "-t", "1", "-p", "Once"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("generated: 8 tokens"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tokamak
