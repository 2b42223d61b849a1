// quantize_row -> dequantize_row on generated data (odd row counts, several
// blocks per row, zero / constant / tiny / outlier blocks), with error bounds
// derived from each format, and dot_row_ref against a double-precision dot.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/quants.h"
#include "kernels/quants_blocks.h"

namespace tokamak::kernels {
namespace {

// Deterministic normal samples (splitmix64 + Box-Muller), the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  double uniform() {  // (0, 1)
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (static_cast<double>(z >> 11) + 0.5) / 9007199254740992.0;
  }
  float normal() { return static_cast<float>(std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform())); }

 private:
  uint64_t state_;
};

// rows x n floats: N(0, s^2) with s varying by row over 1e-5..10, a row offset,
// a few outliers; one block of zeros, one constant block and (for n > 256)
// one block of tiny values (subnormal in fp16).
std::vector<float> make_rows(int rows, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(rows * n));
  const float scales[] = {0.05f, 10.0f, 1e-5f, 0.3f, 2.0f, 1e-3f, 0.02f};
  for (int r = 0; r < rows; ++r) {
    float* row = x.data() + r * n;
    const float s = scales[r % 7];
    const float offset = (r % 3 == 1) ? 2 * s : 0.0f;
    for (int64_t i = 0; i < n; ++i) row[i] = offset + s * rng.normal();
    for (int k = 0; k < 3; ++k) row[static_cast<int64_t>(rng.uniform() * static_cast<double>(n))] = s * (rng.uniform() < 0.5 ? -12.0f : 15.0f);
  }
  if (rows > 1 && n >= 64) {
    std::fill(x.begin() + n, x.begin() + n + 32, 0.0f);            // row 1: a zero block
    std::fill(x.begin() + 2 * n - 32, x.begin() + 2 * n, 0.25f);   // row 1: a constant block
  }
  return x;
}

// Bound on |x - fp16(x)| for |x| below the fp16 maximum: half an ulp, at
// least half the smallest subnormal.
double fp16_error(double v) { return std::max(std::fabs(v) * 0x1p-11, 0x1p-25); }

// Largest allowed |x - dequant(quant(x))| for each element of one block of a
// format with an element-wise bound (0: none; then only the RMSE is bounded).
// Derived from how each format chooses its scale d:
//   Q8_0: d = amax/127, rounding error d/2, plus 127 times d's fp16 rounding.
//   Q4_0/Q5_0: d = amax/8 (/16); the value opposite the extreme is clamped one
//     level short, so the error reaches d.
//   Q4_1/Q5_1: d = (max-min)/15 (/31), rounding d/2, plus the fp16 rounding of
//     d (times the top level) and of min.
//   Q8_K: float d = amax/127, rounding d/2.
// Each gets 2^-20 of amax for the float arithmetic of the (de)quantizer.
double elementwise_bound(DType t, const float* block, int64_t size) {
  float amax = 0, min = block[0], max = block[0];
  for (int64_t i = 0; i < size; ++i) {
    amax = std::max(amax, std::fabs(block[i]));
    min = std::min(min, block[i]);
    max = std::max(max, block[i]);
  }
  const double slop = amax * 0x1p-20;
  switch (t) {
    case DType::Q8_0: return amax / 127.0 * 0.5 + 127 * fp16_error(amax / 127.0) + slop;
    case DType::Q4_0: return amax / 8.0 + 8 * fp16_error(amax / 8.0) + slop;
    case DType::Q5_0: return amax / 16.0 + 16 * fp16_error(amax / 16.0) + slop;
    case DType::Q4_1: {
      const double d = (double(max) - min) / 15;
      return d / 2 + 15 * fp16_error(d) + fp16_error(min) + slop;
    }
    case DType::Q5_1: {
      const double d = (double(max) - min) / 31;
      return d / 2 + 31 * fp16_error(d) + fp16_error(min) + slop;
    }
    case DType::Q8_K: return amax / 127.0 * 0.5 + slop;
    default: return 0;
  }
}

// Bits per element of the K-quants' stored levels.
int k_quant_bits(DType t) {
  switch (t) {
    case DType::Q2_K: return 2;
    case DType::Q3_K: return 3;
    case DType::Q4_K: return 4;
    case DType::Q5_K: return 5;
    case DType::Q6_K: return 6;
    default: return 0;
  }
}

// Rows whose super-block scales fall in fp16's subnormal range (the 1e-5 row)
// lose most of their precision in every K-quant: ggml's format does the same
// (the fixtures' ffn_down row of tiny values checks that byte for byte), so
// the relative bound applies only to rows of larger magnitude.
constexpr double kKQuantMinRms = 1e-3;

const DType kQuantizable[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                              DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                              DType::Q6_K, DType::Q8_K};

class RoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(RoundTrip, ErrorWithinTheFormatsBound) {
  const DType t = GetParam();
  ASSERT_TRUE(can_quantize(t));
  const int64_t bs = dtype_traits(t).block_size;
  const int64_t group = t == DType::Q8_K ? kQK_K : bs;  // elements sharing one scale bound
  for (int rows : {1, 3, 7}) {
    for (int64_t blocks_per_row : {1, 3, 9}) {
      const int64_t n = std::max<int64_t>(bs * blocks_per_row, 64);  // plain types: 64+ elements
      SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(n));
      const std::vector<float> x = make_rows(rows, n, 1000 * rows + static_cast<uint64_t>(n));
      std::vector<uint8_t> q(row_bytes(t, n));
      std::vector<float> y(static_cast<size_t>(n));
      for (int r = 0; r < rows; ++r) {
        SCOPED_TRACE("row " + std::to_string(r));
        const float* xr = x.data() + r * n;
        quantize_row(t, xr, q.data(), n);
        dequantize_row(t, q.data(), y.data(), n);
        float amax = 0;
        double sq_err = 0, sq_x = 0;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(std::isfinite(y[i])) << "element " << i;
          amax = std::max(amax, std::fabs(xr[i]));
          sq_err += (double(y[i]) - xr[i]) * (double(y[i]) - xr[i]);
          sq_x += double(xr[i]) * xr[i];
        }
        if (t == DType::F32) {
          ASSERT_EQ(std::memcmp(xr, y.data(), static_cast<size_t>(n) * sizeof(float)), 0);
        } else if (t == DType::F16 || t == DType::BF16) {
          for (int64_t i = 0; i < n; ++i) {
            // bf16 keeps 8 significant bits: half an ulp is at most 2^-8 of |x|.
            const double bound = t == DType::F16 ? fp16_error(xr[i]) : std::fabs(xr[i]) * 0x1p-8;
            ASSERT_LE(std::fabs(double(y[i]) - xr[i]), bound) << "element " << i << " x " << xr[i];
          }
        } else if (k_quant_bits(t) > 0) {
          // Every element stays within the row's range (it is a scaled level)...
          for (int64_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(y[i]), 2 * amax) << "element " << i;
          // ...and the error is about 2^-(bits-1) of the row's RMS on this
          // outlier-heavy data; 1.5x that leaves room without hiding a bug
          // (a wrong scale or level layout costs far more).
          if (std::sqrt(sq_x / double(n)) >= kKQuantMinRms) {
            EXPECT_LE(std::sqrt(sq_err / sq_x), 1.5 * std::ldexp(1.0, 1 - k_quant_bits(t)));
          }
        } else {
          for (int64_t b = 0; b < n / group; ++b) {
            const double bound = elementwise_bound(t, xr + b * group, group);
            for (int64_t i = b * group; i < (b + 1) * group; ++i) {
              ASSERT_LE(std::fabs(double(y[i]) - xr[i]), bound) << "element " << i << " x " << xr[i];
            }
          }
        }
      }
    }
  }
}

// The reference kernels read and write packed blocks at any address, and
// quantize each block on its own, so a row can be quantized in pieces.
TEST_P(RoundTrip, UnalignedAndPiecewiseGiveTheSameBytes) {
  const DType t = GetParam();
  const int64_t bs = dtype_traits(t).block_size;
  const int64_t n = std::max<int64_t>(bs * 5, 64);
  const std::vector<float> x = make_rows(1, n, 77);
  const size_t rb = row_bytes(t, n);
  std::vector<uint8_t> whole(rb);
  quantize_row(t, x.data(), whole.data(), n);

  std::vector<uint8_t> shifted(rb + 1);
  quantize_row(t, x.data(), shifted.data() + 1, n);
  EXPECT_EQ(std::memcmp(whole.data(), shifted.data() + 1, rb), 0);

  std::vector<uint8_t> pieces(rb);
  const int64_t piece = bs == 1 ? 16 : bs;
  for (int64_t i = 0; i < n; i += piece) quantize_row(t, x.data() + i, pieces.data() + row_bytes(t, i), piece);
  EXPECT_EQ(pieces, whole);

  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n) + 1);
  dequantize_row(t, whole.data(), a.data(), n);
  dequantize_row(t, shifted.data() + 1, b.data() + 1, n);
  EXPECT_EQ(std::memcmp(a.data(), b.data() + 1, static_cast<size_t>(n) * sizeof(float)), 0);
}

// dot_row_ref sums w[i] * x[i] in f32 from i = 0 up (bitwise), and that sum is
// within the recursive-summation bound gamma_n * sum |w x| of the exact dot
// (gamma_n = n u / (1 - n u), u = 2^-24), computed here in double.
TEST_P(RoundTrip, DotRowRefIsTheOrderedF32SumOfTheDequantizedRow) {
  const DType t = GetParam();
  const int64_t bs = dtype_traits(t).block_size;
  for (int64_t blocks : {1, 3, 17}) {
    const int64_t n = std::max<int64_t>(bs * blocks, 64);
    SCOPED_TRACE(std::to_string(n) + " elements");
    const std::vector<float> w = make_rows(1, n, 5 + static_cast<uint64_t>(n));
    const std::vector<float> x = make_rows(1, n, 9 + static_cast<uint64_t>(n));
    std::vector<uint8_t> q(row_bytes(t, n));
    quantize_row(t, w.data(), q.data(), n);
    std::vector<float> wd(static_cast<size_t>(n));
    dequantize_row(t, q.data(), wd.data(), n);
    float ordered = 0;
    double exact = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      ordered += wd[i] * x[i];
      exact += double(wd[i]) * x[i];
      magnitude += std::fabs(double(wd[i]) * x[i]);
    }
    const float dot = dot_row_ref(t, q.data(), x.data(), n);
    EXPECT_EQ(std::bit_cast<uint32_t>(dot), std::bit_cast<uint32_t>(ordered)) << dot << " vs " << ordered;
    const double u = 0x1p-24;
    const double gamma = double(n) * u / (1 - double(n) * u);
    EXPECT_LE(std::fabs(double(dot) - exact), gamma * magnitude) << "dot " << dot << " exact " << exact;
  }
}

INSTANTIATE_TEST_SUITE_P(Quantizable, RoundTrip, ::testing::ValuesIn(kQuantizable),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

// Q8_K, the activation side of K-quant dot products: the largest magnitude
// maps to -127 exactly (d = -max/127, kept as f32), and bsums are the sums of
// each 16 quants.
TEST(Q8K, ScaleAndBlockSums) {
  const std::vector<float> x = make_rows(1, 3 * kQK_K, 4242);
  std::vector<BlockQ8_K> blocks(3);
  quantize_row(DType::Q8_K, x.data(), blocks.data(), 3 * kQK_K);
  for (int b = 0; b < 3; ++b) {
    const float* xb = x.data() + b * kQK_K;
    int imax = 0;
    for (int i = 1; i < kQK_K; ++i) {
      if (std::fabs(xb[i]) > std::fabs(xb[imax])) imax = i;
    }
    EXPECT_EQ(blocks[b].qs[imax], -127);
    EXPECT_FLOAT_EQ(blocks[b].d, -xb[imax] / 127.0f);
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sum += blocks[b].qs[i];
      EXPECT_EQ(blocks[b].bsums[j], sum) << "block " << b << " group " << j;
    }
  }
  std::vector<float> zeros(kQK_K, 0.0f);
  quantize_row(DType::Q8_K, zeros.data(), blocks.data(), kQK_K);
  EXPECT_EQ(blocks[0].d, 0.0f);
  for (int j = 0; j < kQK_K / 16; ++j) EXPECT_EQ(blocks[0].bsums[j], 0);
}

}  // namespace
}  // namespace tokamak::kernels
