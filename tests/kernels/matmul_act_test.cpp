// The vectorized activation quantizers (Q8_0, Q8_K) against the portable
// scalar ones, byte for byte: the scalar code reproduces llama.cpp's
// quantize_row_q8_0 and ggml's quantize_row_q8_K, and every kernel reads
// these bytes, so any difference would move every quantized product.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/matmul_act.h"

namespace tokamak::kernels {
namespace {

std::vector<std::byte> quantized(ActFormat f, const std::vector<float>& x, bool scalar) {
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<std::byte> out(act_layout(f, k).row_bytes + 64);
  std::byte* dst = out.data() + (64 - reinterpret_cast<uintptr_t>(out.data()) % 64) % 64;
  if (scalar) {
    quantize_act_row_scalar(f, x.data(), dst, k);
  } else {
    quantize_act_row(f, x.data(), dst, k);
  }
  return {dst, dst + act_layout(f, k).row_bytes};
}

// Rows that probe the edges: ties of magnitude with either sign first, exact
// halves after scaling (round half to even), zero blocks, a lone value, tiny
// and huge magnitudes, and plain random rows at several scales.
std::vector<std::vector<float>> rows(int64_t k, std::mt19937& rng) {
  std::vector<std::vector<float>> out;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float scale : {1.0f, 1e-3f, 37.5f, 1e-30f, 1e20f}) {
    std::vector<float> x(static_cast<size_t>(k));
    for (float& v : x) v = scale * normal(rng);
    out.push_back(x);
  }
  std::vector<float> ties(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) ties[static_cast<size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
  for (int64_t b = 0; b < k; b += 32) {
    ties[static_cast<size_t>(b + 5)] = (b / 32) % 2 == 0 ? -127.0f : 127.0f;  // the block's largest, one sign
    ties[static_cast<size_t>(b + 9)] = (b / 32) % 2 == 0 ? 127.0f : -127.0f;  // the same magnitude, the other
    ties[static_cast<size_t>(b + 12)] = 2.5f;                                  // x * 127 / 127: a half
    ties[static_cast<size_t>(b + 13)] = -3.5f;
  }
  out.push_back(ties);
  std::vector<float> sparse(static_cast<size_t>(k), 0.0f);
  sparse[static_cast<size_t>(k / 2 + 3)] = -0.75f;  // one value; every other block all zeros
  sparse[1] = -0.0f;
  out.push_back(sparse);
  // For the f16 and bf16 roundings: NaNs with payloads and either sign,
  // infinities, values past f16's range and halfway to its next value,
  // f16 subnormals and their ties, f32 subnormals.
  std::vector<float> odd(static_cast<size_t>(k));
  const uint32_t specials[] = {0x7fc00000u, 0xffc01234u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x477ff000u,
                               0x477fefffu, 0x33800000u, 0x33c00000u, 0x387fe000u, 0x00000001u, 0x80400000u,
                               0x3f808000u, 0x3f818000u, 0x3f807fffu, 0xbf80c000u};
  for (int64_t i = 0; i < k; ++i) {
    const uint32_t bits = specials[i % 16] ^ (i % 32 >= 16 ? 0x80000000u : 0u);
    std::memcpy(&odd[static_cast<size_t>(i)], &bits, sizeof(float));
  }
  out.push_back(odd);
  return out;
}

TEST(ActivationQuantization, VectorizedEqualsScalarByteForByte) {
  std::mt19937 rng(11);
  for (ActFormat f : {ActFormat::kQ8_0, ActFormat::kQ8_K}) {
    for (int64_t k : {256, 2048, 5632}) {
      int n = 0;
      for (const std::vector<float>& x : rows(k, rng)) {
        if (n == 7) break;  // the specials row: NaN scales are not for the Q8 formats
        EXPECT_EQ(quantized(f, x, false), quantized(f, x, true))
            << (f == ActFormat::kQ8_0 ? "q8_0" : "q8_K") << " k=" << k << " row " << n;
        ++n;
      }
    }
  }
}

// The f16 and bf16 roundings of F16 and BF16 weights' activations: the
// vectorized copies bit for bit equal to fp32_to_fp16 / fp32_to_bf16 and
// back, on the edge rows and on k that leave a scalar tail.
TEST(ActivationQuantization, VectorizedRoundingEqualsScalarBitForBit) {
  std::mt19937 rng(12);
  for (ActFormat f : {ActFormat::kF32RoundF16, ActFormat::kF32RoundBF16, ActFormat::kF16}) {
    for (int64_t k : {7, 64, 2048, 2051}) {
      int n = 0;
      for (const std::vector<float>& x : rows(k + 32 - k % 32, rng)) {
        const std::vector<float> row(x.begin(), x.begin() + k);
        EXPECT_EQ(quantized(f, row, false), quantized(f, row, true))
            << (f == ActFormat::kF32RoundF16 ? "f16" : f == ActFormat::kF16 ? "f16 stored" : "bf16") << " k=" << k
            << " row " << n;
        ++n;
      }
    }
  }
}

// kF16 stores the halves that widen to kF32RoundF16's floats bit for bit
// (NaNs included): the AVX-512 F16 kernels read the former and compute the
// sums the others compute from the latter.
TEST(ActivationQuantization, F16StorageWidensToTheF16Rounding) {
  std::mt19937 rng(13);
  for (int64_t k : {7, 64, 2051}) {
    int n = 0;
    for (const std::vector<float>& x : rows(k + 32 - k % 32, rng)) {
      const std::vector<float> row(x.begin(), x.begin() + k);
      for (bool scalar : {true, false}) {
        const std::vector<std::byte> halves = quantized(ActFormat::kF16, row, scalar);
        const std::vector<std::byte> floats = quantized(ActFormat::kF32RoundF16, row, scalar);
        for (int64_t i = 0; i < k; ++i) {
          uint16_t h;
          uint32_t want, got;
          std::memcpy(&h, halves.data() + 2 * i, sizeof(h));
          std::memcpy(&want, floats.data() + 4 * i, sizeof(want));
          const float widened = fp16_to_fp32(h);
          std::memcpy(&got, &widened, sizeof(got));
          ASSERT_EQ(got, want) << "k=" << k << " row " << n << " i=" << i << (scalar ? " scalar" : " vectorized");
        }
      }
      ++n;
    }
  }
}

// fp32_to_fp16 by hand on the specials: a tie rounds to even, the largest
// finite f16 and the overflow threshold, a NaN keeps its sign.
TEST(ActivationQuantization, F16RoundingByHand) {
  const float in[8] = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f, 65520.0f, -std::nanf(""), 5.9604645e-08f, 2.9802322e-08f, 0.0f};
  std::vector<float> x(in, in + 8);
  for (bool scalar : {true, false}) {
    const std::vector<std::byte> b = quantized(ActFormat::kF32RoundF16, x, scalar);
    float out[8];
    std::memcpy(out, b.data(), sizeof(out));
    EXPECT_EQ(out[0], 1.0f);                  // halfway between 1 and 1 + 2^-10: to even
    EXPECT_EQ(out[1], 1.0f + 2.0f / 1024);    // halfway, odd below: up
    EXPECT_EQ(out[2], 65504.0f);
    EXPECT_TRUE(std::isinf(out[3]));          // past 65504 + half an ulp
    EXPECT_TRUE(std::isnan(out[4]) && std::signbit(out[4]));
    EXPECT_EQ(out[5], 5.9604645e-08f);        // the smallest f16 subnormal
    EXPECT_EQ(out[6], 0.0f);                  // half of it: ties to even (0)
  }
}

// The scalar Q8_0 against a hand computation: amax 127 makes the scale 1, so
// q is x rounded half to even, d is 1 and the sum is theirs.
TEST(ActivationQuantization, Q8_0RoundsHalvesToEven) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.5f;
  x[4] = 1.5f;
  for (bool scalar : {true, false}) {
    const std::vector<std::byte> q = quantized(ActFormat::kQ8_0, x, scalar);
    const auto* qs = reinterpret_cast<const int8_t*>(q.data());
    EXPECT_EQ(qs[0], 127);
    EXPECT_EQ(qs[1], 2);
    EXPECT_EQ(qs[2], -4);
    EXPECT_EQ(qs[3], 0);
    EXPECT_EQ(qs[4], 2);
    const ActLayout l = act_layout(ActFormat::kQ8_0, 32);
    float d;
    std::memcpy(&d, q.data() + l.d_offset, sizeof d);
    EXPECT_EQ(d, 1.0f);
    int16_t sum;
    std::memcpy(&sum, q.data() + l.sums_offset, sizeof sum);
    EXPECT_EQ(sum, 127 + 2 - 4 + 0 + 2);
  }
}

}  // namespace
}  // namespace tokamak::kernels
