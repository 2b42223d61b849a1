#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "core/dtype.h"
#include "core/half.h"

namespace tokamak {
namespace {

TEST(Half, EveryFiniteHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);                // rounds to inf
  EXPECT_EQ(fp32_to_fp16(1e-9f), 0x0000);
}

TEST(Half, RoundsHalfwayToEven) {
  // Between consecutive halves a and b, the midpoint goes to the even mantissa.
  for (uint32_t h = 0x0001; h < 0x7bff; h += 97) {
    const float a = fp16_to_fp32(static_cast<uint16_t>(h));
    const float b = fp16_to_fp32(static_cast<uint16_t>(h + 1));
    const float mid = (a + b) / 2;  // exact in float
    const uint16_t even = (h % 2 == 0) ? h : h + 1;
    ASSERT_EQ(fp32_to_fp16(mid), even) << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 1e9f)), h + 1) << h;
  }
}

// The compiler's IEEE binary16 (_Float16, where the target has one) is a
// reference independent of core/half: every half widens to the same float,
// and floats over the whole half range and beyond (subnormals, ties,
// overflow) narrow to the same half.
#if defined(__FLT16_MAX__)
TEST(Half, AgreesWithTheCompilersFloat16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(h)));
    const float got = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "half 0x" << std::hex << h;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "half 0x" << std::hex << h;
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 1000000; ++i) {
    // Biased exponents 100..143: below the smallest subnormal half up to past its maximum.
    const uint32_t exponent = 100 + rng() % 44;
    const uint32_t bits = (rng() & 0x80000000u) | exponent << 23 | (rng() & 0x7fffffu);
    const float f = std::bit_cast<float>(bits);
    ASSERT_EQ(fp32_to_fp16(f), std::bit_cast<uint16_t>(static_cast<_Float16>(f))) << "float 0x" << std::hex << bits;
  }
}
#endif

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16_to_fp32(0xbf80), -1.0f);
}

TEST(DType, TraitsMatchGgml) {
  EXPECT_EQ(dtype_traits(DType::Q4_0).block_bytes, 18u);
  EXPECT_EQ(dtype_traits(DType::Q8_0).block_bytes, 34u);
  EXPECT_EQ(dtype_traits(DType::Q4_K).block_bytes, 144u);
  EXPECT_EQ(dtype_traits(DType::Q6_K).block_bytes, 210u);
  EXPECT_EQ(dtype_traits(DType::Q2_K).block_bytes, 84u);
  EXPECT_EQ(dtype_traits(DType::Q3_K).block_bytes, 110u);
  EXPECT_EQ(dtype_traits(DType::Q5_K).block_bytes, 176u);
  EXPECT_EQ(dtype_traits(DType::IQ4_XS).block_bytes, 136u);
  EXPECT_FALSE(dtype_from_id(4).has_value());
  EXPECT_FALSE(dtype_from_id(36).has_value());
  EXPECT_EQ(dtype_from_name("Q4_K"), DType::Q4_K);
  EXPECT_EQ(dtype_from_name("bf16"), DType::BF16);
  EXPECT_FALSE(dtype_from_name("q9_0").has_value());
}

}  // namespace
}  // namespace tokamak
