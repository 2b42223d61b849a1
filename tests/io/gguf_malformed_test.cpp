// Malformed GGUF corpus, generated from valid files: each case must throw a
// tokamak::Error whose message names the file and the offending field/value,
// and never crash (this test is meant to run under ASan+UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "common/test_data.h"
#include "core/error.h"
#include "io/gguf.h"

namespace tokamak::io {
namespace {

using Bytes = std::vector<std::byte>;

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  Bytes b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

// Parses `bytes` (copied into an exactly-sized heap buffer so that ASan sees any
// overread) and returns the error message; fails the test if it parses.
std::string parse_error(const Bytes& bytes, const std::string& name = "bad.gguf") {
  auto buf = std::make_unique<std::byte[]>(bytes.size());
  if (!bytes.empty()) std::memcpy(buf.get(), bytes.data(), bytes.size());
  try {
    GgufFile::parse({buf.get(), bytes.size()}, name);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed without error";
  return {};
}

Bytes truncated(const Bytes& b, size_t n) { return Bytes(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n)); }

TEST(GgufMalformed, Stories260KTruncatedEverywhere) {
  const Bytes full = read_file(tokamak::testing::test_data("models/stories260K/stories260K.gguf"));
  const GgufFile ok = GgufFile::parse(full, "stories260K.gguf");
  // Every cut inside the header (magic .. last tensor info) and a stride of cuts
  // through the data: all must be errors naming the file.
  const size_t header_end = ok.data_offset();
  for (size_t n = 0; n < full.size(); n += (n < header_end + 64 ? 1 : 4093)) {
    const std::string msg = parse_error(truncated(full, n), "stories260K.gguf");
    ASSERT_EQ(msg.rfind("stories260K.gguf: ", 0), 0u) << "cut at " << n << ": " << msg;
  }
}

}  // namespace
}  // namespace tokamak::io
