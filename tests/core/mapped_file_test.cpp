// MappedFile: the huge-page copy holds the same bytes as the mapping, starts
// on a 2 MiB boundary, and kAuto keeps small files mapped.
#include <gtest/gtest.h>

#include <sys/sysinfo.h>

#include <cstring>
#include <fstream>

#include "common/test_data.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/memory_info.h"

namespace tokamak {
namespace {

TEST(MappedFile, HugePageCopyHoldsTheFileBytesOnA2MiBBoundary) {
  const auto path = testing::test_data("models/stories260K/stories260K.gguf");
  const MappedFile mapped = MappedFile::open(path);
  const MappedFile copy = MappedFile::open(path, MapMode::kHugePageCopy);
  EXPECT_FALSE(mapped.huge_page_copy());
  EXPECT_TRUE(copy.huge_page_copy());
  ASSERT_EQ(copy.bytes().size(), mapped.bytes().size());
  EXPECT_EQ(std::memcmp(copy.bytes().data(), mapped.bytes().data(), mapped.bytes().size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.bytes().data()) % (2u << 20), 0u);
  // Moving keeps the copy alive and leaves the source empty.
  MappedFile moved = MappedFile::open(path, MapMode::kHugePageCopy);
  const std::byte* data = moved.bytes().data();
  MappedFile target = std::move(moved);
  EXPECT_EQ(target.bytes().data(), data);
  EXPECT_TRUE(target.huge_page_copy());
  EXPECT_TRUE(moved.bytes().empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
}

TEST(MappedFile, AutoKeepsSmallFilesMappedAndEmptyFilesWork) {
  const auto path = testing::test_data("models/stories260K/stories260K.gguf");
  EXPECT_FALSE(MappedFile::open(path, MapMode::kAuto).huge_page_copy());  // 1.2 MB < 64 MiB
  const auto empty = testing::temp_file("empty.bin");
  std::ofstream(empty).close();
  for (MapMode mode : {MapMode::kMapped, MapMode::kHugePageCopy, MapMode::kAuto}) {
    EXPECT_TRUE(MappedFile::open(empty, mode).bytes().empty());
  }
  EXPECT_THROW(MappedFile::open(empty.string() + ".missing", MapMode::kHugePageCopy), Error);
  std::filesystem::remove(empty);
}

// What kAuto (and widened weights) plan on: MemAvailable, somewhere between
// 0 and the machine's RAM as sysinfo counts it.
TEST(MemoryInfo, AvailableIsPositiveAndAtMostTheRam) {
  const std::optional<int64_t> available = memory_available_bytes();
  ASSERT_TRUE(available.has_value()) << "/proc/meminfo has no MemAvailable line";
  struct sysinfo si {};
  ASSERT_EQ(::sysinfo(&si), 0);
  EXPECT_GT(*available, 0);
  EXPECT_LE(static_cast<uint64_t>(*available), uint64_t{si.totalram} * si.mem_unit);
}

}  // namespace
}  // namespace tokamak
