#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace tokamak {
namespace {

TEST(HugePageBuffer, IsAlignedWritableZeroedAndMovable) {
  const size_t n = 3 * HugePageBuffer::kHugePage + 123;
  HugePageBuffer a(n, "test buffer");
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.size(), n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % HugePageBuffer::kHugePage, 0u);
  EXPECT_EQ(a.data()[0], std::byte{0});  // fresh anonymous pages read as zero
  EXPECT_EQ(a.data()[n - 1], std::byte{0});
  std::memset(a.data(), 7, n);
  std::byte* at = a.data();
  HugePageBuffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), at);
  EXPECT_EQ(b.data()[n - 1], std::byte{7});
  b = HugePageBuffer();
  EXPECT_EQ(b.data(), nullptr);
}

TEST(HugePageBuffer, EmptyAndImpossibleSizes) {
  EXPECT_EQ(HugePageBuffer(0, "empty").data(), nullptr);
  try {
    HugePageBuffer too_big(size_t{1} << 62, "KV cache of 9 blocks");
    FAIL() << "a 4 EiB mapping succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache of 9 blocks: cannot allocate 4611686018427387904 bytes"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tokamak
