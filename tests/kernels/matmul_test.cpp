// The matmul kernels: the scalar reference against exact arithmetic on the
// dequantized operands, every SIMD variant against the scalar one, batch and
// thread invariance, fusion, and the driver's errors.
//
// Two kinds of data:
// - "exact": power-of-two scales and activations that are multiples of 1/8
//   whose block maxima are 127/8, so every product and partial sum is exactly
//   representable in f32. Then every summation order gives the same float,
//   and a variant must equal the scalar kernel bitwise: one wrong element
//   anywhere shows.
// - "realistic": Gaussian weights quantized by quantize_row, Gaussian
//   activations with outliers; compared within the float error bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "common/matmul_data.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quants.h"
#include "kernels/quants_blocks.h"
#include "kernels/widen.h"

namespace tokamak::kernels {
namespace {

using tokamak::testing::make_activations;

const DType kTypes[] = {DType::F32,  DType::F16,    DType::BF16,   DType::Q4_0,    DType::Q4_1,  DType::Q5_0,
                        DType::Q5_1, DType::Q8_0,   DType::Q2_K,   DType::Q3_K,    DType::Q4_K,  DType::Q5_K,
                        DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::IQ3_XXS, DType::IQ3_S, DType::TQ1_0, DType::TQ2_0,
                        DType::IQ3_S_WIDE, DType::IQ3_XXS_WIDE};

int64_t block_size(DType t) { return dtype_traits(t).block_size; }

// Lengths per family: one block, odd block counts, large; float types also
// lengths that are not a multiple of the vector width.
std::vector<int64_t> lengths(DType t) {
  switch (block_size(t)) {
    case 1: return {1, 7, 16, 33, 172, 4097};
    case 32: return {32, 96, 224, 4096};
    default: return {256, 768, 4096};
  }
}

void put_u16(std::byte* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }

// Weights [rows, k] of type t in `out` (row-major, rows packed).
std::vector<std::byte> make_weights(DType t, int64_t rows, int64_t k, bool exact, std::mt19937& rng) {
  if (t == DType::IQ3_S_WIDE || t == DType::IQ3_XXS_WIDE) {  // what loading makes of IQ3_S / IQ3_XXS weights
    const DType stored = t == DType::IQ3_S_WIDE ? DType::IQ3_S : DType::IQ3_XXS;
    const std::vector<std::byte> compact = make_weights(stored, rows, k, exact, rng);
    std::vector<std::byte> w(row_bytes(t, k) * static_cast<size_t>(rows));
    widen_rows(stored, compact.data(), t, w.data(), rows, k);
    return w;
  }
  const size_t row_size = row_bytes(t, k);
  std::vector<std::byte> w(row_size * static_cast<size_t>(rows));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t bs = block_size(t);
  if (bs == 1) {
    std::uniform_int_distribution<int> eighths(-128, 128);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = exact ? static_cast<float>(eighths(rng)) / 8.0f : normal(rng);
      quantize_row(t, row.data(), w.data() + static_cast<size_t>(r) * row_size, k);
    }
    return w;
  }
  if (!exact && can_quantize(t)) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = 0.05f * normal(rng);
      quantize_row(t, row.data(), w.data() + static_cast<size_t>(r) * row_size, k);
    }
    return w;
  }
  // Random quants; scale fields set to powers of two (exact) or small values.
  for (std::byte& b : w) b = static_cast<std::byte>(byte(rng));
  const size_t bb = dtype_traits(t).block_bytes;
  const uint16_t d = exact ? fp32_to_fp16(1.0f / 16) : fp32_to_fp16(0.01f);
  const uint16_t dmin = exact ? fp32_to_fp16(-1.0f / 32) : fp32_to_fp16(0.005f);
  for (size_t off = 0; off < w.size(); off += bb) {
    std::byte* p = w.data() + off;
    auto mask = [&](size_t from, size_t n, uint8_t m) {
      for (size_t i = from; i < from + n; ++i) p[i] &= static_cast<std::byte>(m);
    };
    switch (t) {
      case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: case DType::IQ4_NL:
        put_u16(p, d);
        break;
      case DType::IQ4_XS:  // values up to 127: scales 0..3 keep exact sums below 2^24
        put_u16(p, d);
        if (exact) {
          put_u16(p + 2, 0xAAAA);
          mask(4, 4, 0x33);
        }
        break;
      case DType::Q4_1: case DType::Q5_1:
        put_u16(p, d);
        put_u16(p + 2, dmin);
        break;
      case DType::Q2_K:
        put_u16(p + 80, d);
        put_u16(p + 82, dmin);
        break;
      case DType::Q3_K:
        mask(96, 12, 0x0F);  // scales -32..-17: keeps exact sums below 2^24
        put_u16(p + 108, d);
        break;
      case DType::Q4_K: case DType::Q5_K:
        mask(4, 12, 0x0F);  // scales and mins <= 15
        put_u16(p, d);
        put_u16(p + 2, dmin);
        break;
      case DType::Q6_K:
        for (size_t i = 192; i < 208; ++i) p[i] = static_cast<std::byte>(static_cast<int8_t>(byte(rng) % 33 - 16));
        put_u16(p + 208, d);
        break;
      case DType::IQ3_XXS:  // magnitudes up to 62: scale 0 (x1) keeps exact sums below 2^24
        put_u16(p, d);
        if (exact) {
          for (size_t g = 0; g < 8; ++g) mask(66 + 4 * g + 3, 1, 0x0F);  // each group's top 4 bits
        }
        break;
      case DType::IQ3_S:
        put_u16(p, d);
        if (exact) mask(106, 4, 0x00);  // scales 1
        break;
      case DType::TQ1_0:  // any byte is a valid code
        put_u16(p + 52, d);
        break;
      case DType::TQ2_0:
        for (size_t i = 0; i < 64; ++i) {  // q in 0..2: 3 (unused by the format) becomes 2
          uint8_t v = static_cast<uint8_t>(p[i]);
          for (int j = 0; j < 4; ++j) {
            if (((v >> (2 * j)) & 3) == 3) v = static_cast<uint8_t>(v & ~(1u << (2 * j)));
          }
          p[i] = static_cast<std::byte>(v);
        }
        put_u16(p + 64, d);
        break;
      default: ADD_FAILURE() << "no weight maker for " << dtype_name(t);
    }
  }
  return w;
}

// Runs one kernel directly on activations converted to its own format.
std::vector<float> run_kernel(const GemmKernel& kern, DType t, const std::byte* w, int64_t rows, int64_t k,
                              const std::vector<float>& x, int64_t tokens) {
  std::vector<float> y(static_cast<size_t>(rows * tokens), -1.0f);
  GemmArgs a;
  a.type = t;
  a.w = w;
  a.w_stride = row_bytes(t, k);
  a.n_rows = rows;
  a.k = k;
  a.n_tokens = tokens;
  a.y = y.data();
  a.ldy = rows;
  AlignedBuffer act;
  if (kern.act == ActFormat::kF32) {
    a.act = reinterpret_cast<const std::byte*>(x.data());
    a.act_stride = static_cast<size_t>(k) * sizeof(float);
  } else {
    a.act_stride = act_layout(kern.act, k).row_bytes;
    act.reserve(a.act_stride * static_cast<size_t>(tokens));
    for (int64_t i = 0; i < tokens; ++i) quantize_act_row(kern.act, x.data() + i * k, act.data() + static_cast<size_t>(i) * a.act_stride, k);
    a.act = act.data();
  }
  kern.fn(a);
  return y;
}

// Sum over elements of |w_i * x_i| with both operands as the kernel sees them
// (dequantized weights, activations after conversion), and the exact dot in double.
struct ExactDot {
  double value = 0;
  double magnitude = 0;
};
ExactDot exact_dot(const GemmKernel& kern, DType t, const std::byte* w_row, int64_t k, const float* x) {
  std::vector<float> wd(static_cast<size_t>(k)), xd(static_cast<size_t>(k));
  dequantize_row(t, w_row, wd.data(), k);
  AlignedBuffer act;
  const ActLayout l = act_layout(kern.act, k);
  act.reserve(l.row_bytes);
  quantize_act_row(kern.act, x, act.data(), k);
  switch (kern.act) {
    case ActFormat::kF32: std::copy(x, x + k, xd.begin()); break;
    case ActFormat::kF32RoundF16: case ActFormat::kF32RoundBF16:
      std::memcpy(xd.data(), act.data(), static_cast<size_t>(k) * sizeof(float));
      break;
    case ActFormat::kBF16: dequantize_row(DType::BF16, act.data(), xd.data(), k); break;
    case ActFormat::kF16: dequantize_row(DType::F16, act.data(), xd.data(), k); break;
    case ActFormat::kQ8_0: case ActFormat::kQ8_K: {
      const int64_t bs = kern.act == ActFormat::kQ8_0 ? 32 : 256;
      const auto* q = reinterpret_cast<const int8_t*>(act.data());
      const auto* d = reinterpret_cast<const float*>(act.data() + l.d_offset);
      for (int64_t i = 0; i < k; ++i) xd[static_cast<size_t>(i)] = d[i / bs] * q[i];
      break;
    }
  }
  ExactDot e;
  for (int64_t i = 0; i < k; ++i) {
    const double p = static_cast<double>(wd[static_cast<size_t>(i)]) * xd[static_cast<size_t>(i)];
    e.value += p;
    e.magnitude += std::fabs(p);
  }
  return e;
}

// Float summation error bound for a dot of k terms in any order: each result
// is within (k + 16) * eps * sum|terms| of the exact value; two results
// within twice that.
double float_bound(int64_t k, double magnitude) { return 2.0 * static_cast<double>(k + 16) * 0x1p-24 * magnitude + 1e-30; }

std::string case_name(DType t, int64_t k, int64_t rows, int64_t tokens, size_t misalign) {
  return std::string(dtype_name(t)) + " k=" + std::to_string(k) + " rows=" + std::to_string(rows) +
         " tokens=" + std::to_string(tokens) + " misalign=" + std::to_string(misalign);
}

// ---- the scalar reference against exact arithmetic ----

TEST(MatmulScalar, EqualsTheExactDotOfTheDequantizedOperands) {
  std::mt19937 rng(7);
  for (DType t : kTypes) {
    const GemmKernel kern = gemm_kernel_scalar(t);
    ASSERT_NE(kern.fn, nullptr) << dtype_name(t);
    for (bool exact : {true, false}) {
      for (int64_t k : lengths(t)) {
        const int64_t rows = 3, tokens = 2;
        const std::vector<std::byte> w = make_weights(t, rows, k, exact, rng);
        const std::vector<float> x = make_activations(tokens, k, exact, rng);
        const std::vector<float> y = run_kernel(kern, t, w.data(), rows, k, x, tokens);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < tokens; ++i) {
            const ExactDot e = exact_dot(kern, t, w.data() + static_cast<size_t>(r) * row_bytes(t, k), k, x.data() + i * k);
            const double got = y[static_cast<size_t>(i * rows + r)];
            if (exact) {
              EXPECT_EQ(got, e.value) << case_name(t, k, rows, tokens, 0) << " r=" << r << " t=" << i;
            } else {
              EXPECT_NEAR(got, e.value, float_bound(k, e.magnitude)) << case_name(t, k, rows, tokens, 0);
            }
          }
        }
      }
    }
  }
}

TEST(MatmulScalar, TypesWithoutPartnerFormatUseF32Activations) {
  for (DType t : {DType::Q8_K}) {
    const GemmKernel kern = gemm_kernel_scalar(t);
    EXPECT_EQ(kern.fn, gemm_f32_reference) << dtype_name(t);
    EXPECT_EQ(kern.act, ActFormat::kF32);
  }
  EXPECT_EQ(gemm_kernel_scalar(DType::I32).fn, nullptr);
}

// ---- every variant against the scalar reference ----

class MatmulVariant : public ::testing::TestWithParam<Isa> {};

TEST_P(MatmulVariant, MatchesScalarOnEveryTypeSizeAndAlignment) {
  const Isa isa = GetParam();
  std::mt19937 rng(11);
  for (DType t : kTypes) {
    const GemmKernel kern = gemm_kernel(t, isa);
    const GemmKernel ref = gemm_kernel_scalar(t);
    ASSERT_NE(kern.fn, nullptr);
    for (int64_t k : lengths(t)) {
      for (int64_t rows : {1, 5, 19}) {
        for (int64_t tokens : {1, 3, 7}) {
          for (size_t misalign : {0, 1, 3}) {
            for (bool exact : {true, false}) {
              const std::vector<std::byte> w = make_weights(t, rows, k, exact, rng);
              std::vector<std::byte> shifted(w.size() + misalign);
              std::memcpy(shifted.data() + misalign, w.data(), w.size());
              const std::vector<float> x = make_activations(tokens, k, exact, rng);
              const std::vector<float> got = run_kernel(kern, t, shifted.data() + misalign, rows, k, x, tokens);
              const std::vector<float> want = run_kernel(ref, t, w.data(), rows, k, x, tokens);
              for (int64_t r = 0; r < rows; ++r) {
                for (int64_t i = 0; i < tokens; ++i) {
                  const size_t at = static_cast<size_t>(i * rows + r);
                  if (exact) {
                    ASSERT_EQ(got[at], want[at]) << case_name(t, k, rows, tokens, misalign) << " r=" << r << " t=" << i;
                  } else {
                    const ExactDot e = exact_dot(ref, t, w.data() + static_cast<size_t>(r) * row_bytes(t, k), k, x.data() + i * k);
                    ASSERT_NEAR(got[at], want[at], float_bound(k, e.magnitude)) << case_name(t, k, rows, tokens, misalign);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// An element never depends on the other rows or tokens of the call.
TEST_P(MatmulVariant, ElementsDoNotDependOnTheRestOfTheTile) {
  const Isa isa = GetParam();
  std::mt19937 rng(13);
  for (DType t : kTypes) {
    const GemmKernel kern = gemm_kernel(t, isa);
    const int64_t k = lengths(t)[1], rows = 11, tokens = 7;
    const std::vector<std::byte> w = make_weights(t, rows, k, false, rng);
    const std::vector<float> x = make_activations(tokens, k, false, rng);
    const std::vector<float> all = run_kernel(kern, t, w.data(), rows, k, x, tokens);
    const size_t rb = row_bytes(t, k);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < tokens; ++i) {
        const std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
        const std::vector<float> one = run_kernel(kern, t, w.data() + static_cast<size_t>(r) * rb, 1, k, xi, 1);
        ASSERT_EQ(one[0], all[static_cast<size_t>(i * rows + r)]) << dtype_name(t) << " r=" << r << " t=" << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSupported, MatmulVariant, ::testing::ValuesIn(supported_isas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

TEST(MatmulIsa, BestIsSupportedAndScalarAlwaysIs) {
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  EXPECT_EQ(supported_isas().front(), Isa::kScalar);
#if defined(__x86_64__)
  EXPECT_FALSE(isa_supported(Isa::kNeon));
#endif
}

// ---- activation formats ----

TEST(MatmulActivations, Q8_0RoundsHalfToEvenAgainstAmaxOver127) {
  // amax 127: d = 1 and x * 127 / amax = x, so the quants are x rounded to even.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = 0.4999f;
  x[5] = -126.5f;
  AlignedBuffer buf;
  const ActLayout l = act_layout(ActFormat::kQ8_0, 32);
  buf.reserve(l.row_bytes);
  quantize_act_row(ActFormat::kQ8_0, x.data(), buf.data(), 32);
  const auto* q = reinterpret_cast<const int8_t*>(buf.data());
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 2);
  EXPECT_EQ(q[2], 4);
  EXPECT_EQ(q[3], -2);
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(q[5], -126);
  EXPECT_EQ(reinterpret_cast<const float*>(buf.data() + l.d_offset)[0], 1.0f);
  EXPECT_EQ(reinterpret_cast<const int16_t*>(buf.data() + l.sums_offset)[0], 127 + 2 + 4 - 2 - 126);
}

TEST(MatmulActivations, Q8_0ScaleIsRoundedToFp16AndQuantsStayWithinHalfAStep) {
  std::mt19937 rng(3);
  const std::vector<float> x = make_activations(1, 256, false, rng);
  AlignedBuffer buf;
  const ActLayout l = act_layout(ActFormat::kQ8_0, 256);
  buf.reserve(l.row_bytes);
  quantize_act_row(ActFormat::kQ8_0, x.data(), buf.data(), 256);
  const auto* q = reinterpret_cast<const int8_t*>(buf.data());
  const auto* d = reinterpret_cast<const float*>(buf.data() + l.d_offset);
  for (int b = 0; b < 8; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(32 * b + j)]));
    EXPECT_EQ(d[b], fp16_to_fp32(fp32_to_fp16(amax / 127.0f)));
    for (int j = 0; j < 32; ++j) {
      // Quantized against 127 / amax, so within half a step of amax / 127 (not of the fp16 d).
      EXPECT_LE(std::fabs(x[static_cast<size_t>(32 * b + j)] - amax / 127.0f * q[32 * b + j]), amax / 127.0f * 0.5001f);
    }
  }
}

TEST(MatmulActivations, Q8_KIsGgmlsQ8_KRearranged) {
  std::mt19937 rng(5);
  const std::vector<float> x = make_activations(1, 512, false, rng);
  std::vector<std::byte> blocks(row_bytes(DType::Q8_K, 512));
  quantize_row(DType::Q8_K, x.data(), blocks.data(), 512);
  AlignedBuffer buf;
  const ActLayout l = act_layout(ActFormat::kQ8_K, 512);
  buf.reserve(l.row_bytes);
  quantize_act_row(ActFormat::kQ8_K, x.data(), buf.data(), 512);
  for (int b = 0; b < 2; ++b) {
    BlockQ8_K blk;
    std::memcpy(&blk, blocks.data() + b * sizeof(BlockQ8_K), sizeof(blk));
    EXPECT_EQ(std::memcmp(buf.data() + 256 * b, blk.qs, 256), 0);
    EXPECT_EQ(reinterpret_cast<const float*>(buf.data() + l.d_offset)[b], blk.d);
    EXPECT_EQ(std::memcmp(buf.data() + l.sums_offset + 32 * b, blk.bsums, 32), 0);
  }
}

TEST(MatmulActivations, FloatFormatsRoundToNearestEven) {
  const float x[3] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f};
  AlignedBuffer buf;
  buf.reserve(act_layout(ActFormat::kF32RoundF16, 3).row_bytes);
  quantize_act_row(ActFormat::kF32RoundF16, x, buf.data(), 3);
  const auto* f = reinterpret_cast<const float*>(buf.data());
  EXPECT_EQ(f[0], 1.0f);                 // tie -> even
  EXPECT_EQ(f[1], 1.0f + 0x1p-9f);       // tie -> even (up)
  quantize_act_row(ActFormat::kF32RoundBF16, x, buf.data(), 3);
  EXPECT_EQ(f[2], 1.0f);                 // tie -> even
  quantize_act_row(ActFormat::kBF16, x, buf.data(), 3);
  EXPECT_EQ(reinterpret_cast<const uint16_t*>(buf.data())[2], 0x3f80);
}

// ---- the driver ----

TensorView view_of(DType t, int64_t k, int64_t rows, const std::vector<std::byte>& data) {
  TensorView v;
  v.type = t;
  v.n_dims = 2;
  v.ne = {k, rows, 1, 1};
  v.data = data.data();
  return v;
}

TEST(Matmul, FusedEqualsSeparateAndThreadCountsAgreeBitwise) {
  std::mt19937 rng(17);
  const int64_t k = 512, n = 7;
  // Mixed types as in Q4_K_M (attn_v in Q6_K) and a float one.
  const std::vector<std::byte> wa = make_weights(DType::Q4_K, 96, k, false, rng);
  const std::vector<std::byte> wb = make_weights(DType::Q6_K, 40, k, false, rng);
  const std::vector<std::byte> wc = make_weights(DType::F16, 33, k, false, rng);
  const TensorView va = view_of(DType::Q4_K, k, 96, wa), vb = view_of(DType::Q6_K, k, 40, wb),
                   vc = view_of(DType::F16, k, 33, wc);
  const std::vector<float> x = make_activations(n, k, false, rng);
  for (Isa isa : supported_isas()) {
    Matmul mm({isa, MatmulPrecision::kQuantized});
    ThreadPool one(1);
    std::vector<float> ya(n * 96), yb(n * 40), yc(n * 33);
    mm.run(va, x.data(), n, ya.data(), one);
    mm.run(vb, x.data(), n, yb.data(), one);
    mm.run(vc, x.data(), n, yc.data(), one);
    // The driver's results are its kernel's (checked against the scalar one
    // above), not merely consistent with themselves.
    EXPECT_EQ(ya, run_kernel(gemm_kernel(DType::Q4_K, isa), DType::Q4_K, wa.data(), 96, k, x, n)) << isa_name(isa);
    EXPECT_EQ(yb, run_kernel(gemm_kernel(DType::Q6_K, isa), DType::Q6_K, wb.data(), 40, k, x, n)) << isa_name(isa);
    EXPECT_EQ(yc, run_kernel(gemm_kernel(DType::F16, isa), DType::F16, wc.data(), 33, k, x, n)) << isa_name(isa);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> fa(n * 96), fb(n * 40), fc(n * 33);
      mm.run({{&va, fa.data()}, {&vb, fb.data()}, {&vc, fc.data()}}, x.data(), n, pool);
      EXPECT_EQ(fa, ya) << isa_name(isa) << " threads " << threads;
      EXPECT_EQ(fb, yb) << isa_name(isa) << " threads " << threads;
      EXPECT_EQ(fc, yc) << isa_name(isa) << " threads " << threads;
    }
  }
}

TEST(Matmul, ATokensRowIsTheSameAloneAndInABatchOfSeven) {
  std::mt19937 rng(19);
  const int64_t k = 768, rows = 70, n = 7;
  ThreadPool pool(2);
  for (DType t : kTypes) {
    const std::vector<std::byte> w = make_weights(t, rows, k, false, rng);
    const TensorView v = view_of(t, k, rows, w);
    const std::vector<float> x = make_activations(n, k, false, rng);
    for (Isa isa : supported_isas()) {
      Matmul mm({isa, MatmulPrecision::kQuantized});
      std::vector<float> batch(n * rows), alone(rows);
      mm.run(v, x.data(), n, batch.data(), pool);
      EXPECT_EQ(batch, run_kernel(gemm_kernel(t, isa), t, w.data(), rows, k, x, n)) << dtype_name(t) << " " << isa_name(isa);
      for (int64_t i = 0; i < n; ++i) {
        mm.run(v, x.data() + i * k, 1, alone.data(), pool);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + i * rows)) << dtype_name(t) << " " << isa_name(isa) << " token " << i;
      }
    }
  }
}

// Tensor-parallel ranks hold consecutive column ranges: on the f32 path the
// second range's sums continue the first's, giving one whole run's bits.
TEST(Matmul, ContinuingSumsOverColumnRangesEqualsOneRunBitwise) {
  std::mt19937 rng(29);
  const int64_t k = 256, cut = 128, rows = 9, n = 3;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::F16}) {
    const std::vector<std::byte> w = make_weights(t, rows, k, false, rng);
    const std::vector<float> x = make_activations(n, k, false, rng);
    const size_t rb = row_bytes(t, k), rb_left = row_bytes(t, cut);
    std::vector<std::byte> left(rb_left * rows), right((rb - rb_left) * rows);
    std::vector<float> x_left(static_cast<size_t>(n * cut)), x_right(static_cast<size_t>(n * (k - cut)));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(left.data() + r * rb_left, w.data() + r * rb, rb_left);
      std::memcpy(right.data() + r * (rb - rb_left), w.data() + r * rb + rb_left, rb - rb_left);
    }
    for (int64_t i = 0; i < n; ++i) {
      std::copy(x.begin() + i * k, x.begin() + i * k + cut, x_left.begin() + i * cut);
      std::copy(x.begin() + i * k + cut, x.begin() + (i + 1) * k, x_right.begin() + i * (k - cut));
    }
    ThreadPool pool(2);
    Matmul mm({best_isa(), MatmulPrecision::kF32});
    std::vector<float> whole(static_cast<size_t>(n * rows)), pieces(whole.size());
    mm.run(view_of(t, k, rows, w), x.data(), n, whole.data(), pool);
    mm.run(view_of(t, cut, rows, left), x_left.data(), n, pieces.data(), pool);
    mm.run_continuing(view_of(t, k - cut, rows, right), x_right.data(), n, pieces.data(), pool);
    EXPECT_EQ(pieces, whole) << dtype_name(t);
    // A plain run after it starts from zero again.
    std::vector<float> again(whole.size(), 123.0f);
    mm.run(view_of(t, k, rows, w), x.data(), n, again.data(), pool);
    EXPECT_EQ(again, whole) << dtype_name(t);
  }
  Matmul native({best_isa(), MatmulPrecision::kQuantized});
  ThreadPool pool(1);
  const std::vector<std::byte> w = make_weights(DType::Q8_0, 2, 64, false, rng);
  std::vector<float> x(64, 1.0f), y(2);
  EXPECT_THROW(native.run_continuing(view_of(DType::Q8_0, 64, 2, w), x.data(), 1, y.data(), pool), Error);
}

TEST(Matmul, F32PrecisionIsDotRowRefForEveryElement) {
  std::mt19937 rng(23);
  const int64_t k = 256, rows = 9, n = 3;
  ThreadPool pool(2);
  for (DType t : {DType::Q4_0, DType::Q4_K, DType::F16, DType::IQ4_XS}) {
    const std::vector<std::byte> w = make_weights(t, rows, k, false, rng);
    const TensorView v = view_of(t, k, rows, w);
    const std::vector<float> x = make_activations(n, k, false, rng);
    Matmul mm({best_isa(), MatmulPrecision::kF32});
    std::vector<float> y(n * rows);
    mm.run(v, x.data(), n, y.data(), pool);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(y[static_cast<size_t>(i * rows + r)], dot_row_ref(t, v.row(r), x.data() + i * k, k)) << dtype_name(t);
      }
    }
  }
}

TEST(Matmul, RejectsMismatchedFusedWidthsUnsupportedTypesAndTooManyOutputs) {
  std::mt19937 rng(29);
  const std::vector<std::byte> wa = make_weights(DType::Q8_0, 4, 64, false, rng);
  const std::vector<std::byte> wb = make_weights(DType::Q8_0, 4, 32, false, rng);
  const TensorView va = view_of(DType::Q8_0, 64, 4, wa), vb = view_of(DType::Q8_0, 32, 4, wb);
  const std::vector<float> x(64, 1.0f);
  std::vector<float> y(8);
  ThreadPool pool(1);
  Matmul mm;
  EXPECT_THROW(mm.run({{&va, y.data()}, {&vb, y.data()}}, x.data(), 1, pool), Error);
  TensorView bad = va;
  bad.type = DType::I32;
  EXPECT_THROW(mm.run(bad, x.data(), 1, y.data(), pool), Error);
  std::vector<MatmulOut> many(Matmul::kMaxFused + 1, MatmulOut{&va, y.data()});
  EXPECT_THROW(mm.run(std::span<const MatmulOut>(many), x.data(), 1, pool), Error);
  mm.run(va, x.data(), 0, y.data(), pool);  // no tokens: nothing to do
}

// The cache blocks follow the L2 size: a quarter for weights, half for
// activations, 1 MiB when unknown, within [64 KiB, 1 MiB] and [128 KiB, 2 MiB].
TEST(Matmul, CacheBlocksFollowTheL2Size) {
  const auto kib = [](size_t n) { return n * 1024; };
  const struct {
    size_t l2, weights, acts;
  } cases[] = {{kib(1024), kib(256), kib(512)}, {0, kib(256), kib(512)},       {kib(512), kib(128), kib(256)},
               {kib(2048), kib(512), kib(1024)}, {kib(32), kib(64), kib(128)}, {kib(65536), kib(1024), kib(2048)}};
  for (const auto& c : cases) {
    const MatmulBlocks b = matmul_blocks(c.l2);
    EXPECT_EQ(b.weight_bytes, c.weights) << "L2 " << c.l2;
    EXPECT_EQ(b.act_bytes, c.acts) << "L2 " << c.l2;
  }
  const size_t l2 = l2_cache_bytes();  // 0 (unknown) or a real cache, not a stray value
  EXPECT_TRUE(l2 == 0 || (l2 >= kib(64) && l2 <= kib(65536))) << l2;
}

}  // namespace
}  // namespace tokamak::kernels
