// OutputFile: the file appears whole at commit() or not at all; a failing
// descriptor write is an error naming the target and the reason.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "io/output_file.h"

namespace tokamak::io {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tokamak_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t entries(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

std::span<const std::byte> bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

TEST(OutputFile, AppearsOnlyAtCommitAndReplacesTheOldFile) {
  const fs::path dir = fresh_dir("outfile_commit");
  const fs::path path = dir / "x.bin";
  { std::ofstream(path) << "old"; }
  {
    OutputFile f = OutputFile::create(path);
    f.write(bytes("new "));
    f.write(bytes("bytes"));
    EXPECT_EQ(read(path), "old");  // nothing visible yet
    f.commit();
  }
  EXPECT_EQ(read(path), "new bytes");
  EXPECT_EQ(entries(dir), 1u);
  fs::remove_all(dir);
}

TEST(OutputFile, WithoutCommitNothingIsLeft) {
  const fs::path dir = fresh_dir("outfile_abandon");
  { OutputFile f = OutputFile::create(dir / "a.bin"); f.write(bytes("partial")); }
  EXPECT_EQ(entries(dir), 0u);
  { std::ofstream(dir / "b.bin") << "keep"; }
  { OutputFile f = OutputFile::create(dir / "b.bin"); f.write(bytes("partial")); }
  EXPECT_EQ(read(dir / "b.bin"), "keep");
  EXPECT_EQ(entries(dir), 1u);
  fs::remove_all(dir);
}

TEST(OutputFile, ErrorsNameTheTargetAndTheReason) {
  try {
    (void)OutputFile::create("/nonexistent-dir/y.bin");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/y.bin: cannot create a file in /nonexistent-dir: "),
              std::string::npos)
        << e.what();
  }
  const int full = ::open("/dev/full", O_WRONLY);
  ASSERT_GE(full, 0);
  OutputFile f = OutputFile::of_descriptor(full, "stdout");
  try {
    f.write(bytes("x"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "stdout: write failed: No space left on device");
  }
  ::close(full);
}

}  // namespace
}  // namespace tokamak::io
