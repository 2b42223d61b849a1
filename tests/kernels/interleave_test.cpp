// Weights interleaved 8 rows at a time (kernels/interleave.h): the layout
// round-trips, and the matmul over interleaved weights (the AVX2 kernels, or
// any other variant through de-interleaved copies) equals the exact dot of
// the dequantized operands, bitwise on exactly representable data and within
// the float error bound otherwise; a token's results do not depend on the
// batch, the thread count or fusion with plain weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "common/matmul_data.h"
#include "core/thread_pool.h"
#include "kernels/interleave.h"
#include "kernels/matmul.h"
#include "kernels/matmul_act.h"
#include "kernels/quants.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels {
namespace {

using tokamak::testing::make_activations;

const DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::Q2_K,
                        DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::IQ3_S_WIDE, DType::IQ3_XXS_WIDE,
                        DType::F16, DType::BF16};

bool super_block(DType t) { return dtype_traits(t).block_size == 256; }
bool float_type(DType t) { return t == DType::F16 || t == DType::BF16; }

// The activation format of t's kernels.
ActFormat act_format(DType t) {
  if (t == DType::F16) return ActFormat::kF32RoundF16;
  if (t == DType::BF16) return ActFormat::kF32RoundBF16;
  return super_block(t) ? ActFormat::kQ8_K : ActFormat::kQ8_0;
}

// Exact: random quants, scale 1/16 (every block); else Gaussian values quantized.
std::vector<std::byte> make_weights(DType t, int64_t rows, int64_t k, bool exact, std::mt19937& rng) {
  const size_t rb = row_bytes(t, k);
  std::vector<std::byte> w(rb * static_cast<size_t>(rows));
  if (exact && float_type(t)) {  // multiples of 1/16 up to 15/16: exact products and sums
    std::uniform_int_distribution<int> q(-15, 15);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = static_cast<float>(q(rng)) / 16;
      quantize_row(t, row.data(), w.data() + static_cast<size_t>(r) * rb, k);
    }
    return w;
  }
  if (exact || !can_quantize(t)) {  // random quants (IQ4_NL has no quantizer): scale 1/16, or 0.01-0.05 if not exact
    std::uniform_int_distribution<int> byte(0, 255);
    for (std::byte& b : w) b = static_cast<std::byte>(byte(rng));
    const uint16_t dmin = fp32_to_fp16(-1.0f / 32);
    const size_t bb = dtype_traits(t).block_bytes;
    for (size_t off = 0; off < w.size(); off += bb) {
      // Not exact: scales that differ from block to block, so a kernel that
      // takes a neighbouring block's scale is seen.
      const uint16_t d = fp32_to_fp16(exact ? 1.0f / 16 : 0.01f * static_cast<float>(1 + off / bb % 5));
      std::memcpy(w.data() + off, &d, sizeof(d));
      if (t == DType::Q4_1 || t == DType::Q5_1) std::memcpy(w.data() + off + 2, &dmin, sizeof(dmin));  // the min
      if (t == DType::Q4_K || t == DType::Q5_K) {  // scales and mins <= 15 keep exact sums below 2^24
        std::memcpy(w.data() + off + 2, &dmin, sizeof(dmin));
        for (size_t i = 4; i < 16; ++i) w[off + i] &= std::byte{0x0F};
      }
      if (t == DType::Q2_K) {  // d, dmin last
        std::memcpy(w.data() + off + 80, &d, sizeof(d));
        std::memcpy(w.data() + off + 82, &dmin, sizeof(dmin));
      }
      if (t == DType::Q3_K) {  // d last; scales -32..-17 keep exact sums below 2^24
        for (size_t i = 96; i < 108; ++i) w[off + i] &= std::byte{0x0F};
        std::memcpy(w.data() + off + 108, &d, sizeof(d));
      }
      if ((t == DType::IQ4_XS || t == DType::IQ3_S_WIDE || t == DType::IQ3_XXS_WIDE) && exact) {  // values up to 127: scales 0..3 (high bits 2, low 0..3) keep exact sums below 2^24
        const uint8_t scales_h[2] = {0xAA, 0xAA};
        std::memcpy(w.data() + off + 2, scales_h, 2);
        for (size_t i = 4; i < 8; ++i) w[off + i] &= std::byte{0x33};
      }
      if (t == DType::Q6_K) {  // d last; scales -16..16 keep exact sums below 2^24
        std::memcpy(w.data() + off + 208, &d, sizeof(d));
        for (size_t i = 192; i < 208; ++i) w[off + i] = static_cast<std::byte>(static_cast<int8_t>(std::to_integer<int>(w[off + i]) % 33 - 16));
      }
    }
    return w;
  }
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = normal(rng);
    quantize_row(t, row.data(), w.data() + static_cast<size_t>(r) * rb, k);
  }
  return w;
}

TensorView view_of(DType t, int64_t k, int64_t rows, const std::vector<std::byte>& data, RowLayout layout) {
  TensorView v;
  v.type = t;
  v.layout = layout;
  v.n_dims = 2;
  v.ne = {k, rows, 1, 1};
  v.data = data.data();
  return v;
}

std::vector<std::byte> interleaved(DType t, const std::vector<std::byte>& plain, int64_t rows, int64_t k) {
  std::vector<std::byte> out(plain.size());
  interleave_rows(t, plain.data(), out.data(), rows, k);
  return out;
}

// The dot of a plain weight row and an activation row as the kernels see
// them (dequantized weights, activations in the kernel's format), in double, and the
// sum of the magnitudes of its terms.
struct ExactDot {
  double value = 0;
  double magnitude = 0;
};
ExactDot exact_dot(DType t, const std::byte* w_row, int64_t k, const float* x) {
  std::vector<float> wd(static_cast<size_t>(k));
  dequantize_row(t, w_row, wd.data(), k);
  const ActFormat format = act_format(t);
  const int64_t block = super_block(t) ? 256 : 32;
  const ActLayout l = act_layout(format, k);
  std::vector<std::byte> act(l.row_bytes + 64);
  std::byte* a = act.data() + (64 - reinterpret_cast<uintptr_t>(act.data()) % 64) % 64;
  quantize_act_row(format, x, a, k);
  const auto* q = reinterpret_cast<const int8_t*>(a);
  const auto* d = reinterpret_cast<const float*>(a + l.d_offset);
  const auto* rounded = reinterpret_cast<const float*>(a);
  ExactDot e;
  for (int64_t i = 0; i < k; ++i) {
    const double xi = float_type(t) ? static_cast<double>(rounded[i]) : static_cast<double>(d[i / block]) * q[i];
    const double p = static_cast<double>(wd[static_cast<size_t>(i)]) * xi;
    e.value += p;
    e.magnitude += std::fabs(p);
  }
  return e;
}

// Lengths per type: one block, an odd count, large.
std::vector<int64_t> lengths(DType t) {
  if (super_block(t)) return {256, 768, 4096};
  if (float_type(t)) return {1, 37, 4096};
  return {32, 96, 4096};
}

double float_bound(int64_t k, double magnitude) { return static_cast<double>(k + 16) * 0x1p-24 * magnitude + 1e-30; }

// Where interleave.h puts line 0 of block 0's image, which plain byte of
// row r it holds (the row's first 4 qs bytes), and the plain offset of the
// fp16 scale that lands at 2r.
struct DocumentedOffsets {
  size_t line0, qs, d;
};
DocumentedOffsets documented_offsets(DType t) {
  switch (t) {
    case DType::Q4_1: return {32, 4, 0};
    case DType::Q5_0: return {48, 6, 0};
    case DType::Q5_1: return {64, 8, 0};
    case DType::Q2_K: return {160, 16, 80};
    case DType::Q3_K: return {112, 32, 108};
    case DType::Q4_K: return {128, 16, 0};
    case DType::Q5_K: return {128, 48, 0};
    case DType::Q6_K: return {144, 0, 208};
    case DType::IQ4_XS:
    case DType::IQ3_S_WIDE:
    case DType::IQ3_XXS_WIDE: return {64, 8, 0};
    default: return {16, 2, 0};  // Q4_0, Q8_0, IQ4_NL
  }
}

TEST(Interleave, RoundTripsGroupsAndLeavesTheTailPlain) {
  std::mt19937 rng(1);
  for (DType t : kTypes) {
    const int64_t rows = 19, k = super_block(t) ? 512 : 96;  // 96: 32-element blocks, or 16-bit elements
    const std::vector<std::byte> plain = make_weights(t, rows, k, true, rng);
    const std::vector<std::byte> inter = interleaved(t, plain, rows, k);
    ASSERT_NE(inter, plain) << dtype_name(t);
    const size_t rb = row_bytes(t, k);
    std::vector<std::byte> back(8 * rb);
    for (int64_t g = 0; g < rows / 8; ++g) {
      deinterleave_group(t, inter.data() + static_cast<size_t>(g) * 8 * rb, back.data(), k);
      EXPECT_EQ(0, std::memcmp(back.data(), plain.data() + static_cast<size_t>(g) * 8 * rb, back.size())) << dtype_name(t) << " group " << g;
    }
    EXPECT_EQ(0, std::memcmp(inter.data() + 16 * rb, plain.data() + 16 * rb, 3 * rb)) << dtype_name(t);
    std::vector<std::byte> in_place = plain;
    interleave_rows_in_place(t, in_place.data(), rows, k);
    EXPECT_EQ(in_place, inter) << dtype_name(t) << " in place";
    if (float_type(t)) {  // element i of row r at 16i + 2r
      for (size_t r = 0; r < 8; ++r) {
        for (size_t i : {size_t{0}, size_t{1}, size_t{95}}) {
          EXPECT_EQ(0, std::memcmp(inter.data() + 16 * i + 2 * r, plain.data() + r * rb + 2 * i, 2)) << dtype_name(t) << " row " << r;
        }
      }
      continue;
    }
    // The documented layout: block 0 of group 0 starts with row r's scale at 2r,
    // and line 0 holds qs bytes 0..3 of each row (after Q4_K's 128 bytes of scales).
    // Q6_K: d at its block's end, line 0 after the 128 bytes of scales.
    // Q4_1 / Q5_1: the mins at 16; Q5_0 / Q5_1: the fifth-bit line before the nibble lines.
    const auto [line0, qs, d] = documented_offsets(t);
    for (size_t r = 0; r < 8; ++r) {
      EXPECT_EQ(0, std::memcmp(inter.data() + 2 * r, plain.data() + r * rb + d, 2)) << dtype_name(t) << " row " << r;
      EXPECT_EQ(0, std::memcmp(inter.data() + line0 + 4 * r, plain.data() + r * rb + qs, 4)) << dtype_name(t) << " row " << r;
      if (t == DType::Q4_1 || t == DType::Q5_1) {
        EXPECT_EQ(0, std::memcmp(inter.data() + 16 + 2 * r, plain.data() + r * rb + 2, 2)) << dtype_name(t) << " row " << r;
      }
      if (t == DType::Q3_K) {  // hmask line 0 at 624; scale s's low nibble at 16 + 8(s % 8) + r, high bits at 80 + 8(s % 4) + r
        EXPECT_EQ(0, std::memcmp(inter.data() + 624 + 4 * r, plain.data() + r * rb, 4)) << "q3_K row " << r;
        const auto* img = reinterpret_cast<const uint8_t*>(inter.data());
        for (int sub : {0, 5, 9, 15}) {
          const int v = (img[16 + 8 * (sub % 8) + r] >> (sub < 8 ? 0 : 4) & 0xF) | (img[80 + 8 * (sub % 4) + r] >> (2 * (sub / 4)) & 3) << 4;
          EXPECT_EQ(v - 32, detail::q3k_scale(reinterpret_cast<const uint8_t*>(plain.data() + r * rb + 96), sub)) << "q3_K row " << r;
        }
      }
      if (t == DType::Q5_K) {  // qh line 0 after the qs lines: qh bytes 0..3 of each row
        EXPECT_EQ(0, std::memcmp(inter.data() + 1152 + 4 * r, plain.data() + r * rb + 16, 4)) << "q5_K row " << r;
      }
      if (t == DType::Q5_0 || t == DType::Q5_1) {  // element e's fifth bit at bit 2c + h of byte j, e = 16h + 4c + j
        const size_t qh_at = t == DType::Q5_0 ? 2 : 4, line_at = t == DType::Q5_0 ? 16 : 32;
        uint32_t qh, line;
        std::memcpy(&qh, plain.data() + r * rb + qh_at, 4);
        std::memcpy(&line, inter.data() + line_at + 4 * r, 4);
        for (int e : {0, 3, 5, 14, 16, 21, 31}) {
          const int h = e / 16, c = e % 16 / 4, j = e % 4;
          EXPECT_EQ(qh >> e & 1u, line >> (8 * j + 2 * c + h) & 1u) << dtype_name(t) << " row " << r << " element " << e;
        }
      }
    }
  }
  EXPECT_FALSE(can_interleave(DType::IQ2_XXS));
}

// Every variant, on interleaved weights, against the exact dot of the plain rows.
TEST(InterleavedMatmul, EveryVariantEqualsTheExactDot) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  for (DType t : kTypes) {
    for (int64_t k : lengths(t)) {
      for (int64_t rows : {8, 19, 40}) {
        for (int64_t tokens : {1, 3, 7}) {
          for (bool exact : {true, false}) {
            const std::vector<std::byte> plain = make_weights(t, rows, k, exact, rng);
            const std::vector<std::byte> inter = interleaved(t, plain, rows, k);
            const TensorView v = view_of(t, k, rows, inter, RowLayout::kInterleaved8);
            const std::vector<float> x = make_activations(tokens, k, exact, rng);
            for (Isa isa : supported_isas()) {
              Matmul mm({isa, MatmulPrecision::kQuantized});
              std::vector<float> y(static_cast<size_t>(rows * tokens));
              mm.run(v, x.data(), tokens, y.data(), pool);
              for (int64_t r = 0; r < rows; ++r) {
                for (int64_t i = 0; i < tokens; ++i) {
                  const ExactDot e = exact_dot(t, plain.data() + static_cast<size_t>(r) * row_bytes(t, k), k, x.data() + i * k);
                  const double got = y[static_cast<size_t>(i * rows + r)];
                  const std::string where = std::string(dtype_name(t)) + " " + std::string(isa_name(isa)) + " k=" +
                                            std::to_string(k) + " rows=" + std::to_string(rows) + " tokens=" +
                                            std::to_string(tokens) + " r=" + std::to_string(r) + " t=" + std::to_string(i);
                  if (exact) {
                    ASSERT_EQ(got, e.value) << where;
                  } else {
                    ASSERT_NEAR(got, e.value, float_bound(k, e.magnitude)) << where;
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

// AVX-VNNI's kernels are the AVX2 ones with VPDPBUSD where those sum bytes
// in vpmaddubsw, int16 adds and vpmaddwd: exact either way, so the same bits,
// for decode and for token tiles.
TEST(InterleavedMatmul, AvxVnniGivesTheAvx2Bits) {
  if (!isa_supported(Isa::kAvxVnni)) GTEST_SKIP() << "no AVX-VNNI on this CPU";
  std::mt19937 rng(11);
  ThreadPool pool(2);
  int checked = 0;
  for (DType t : kTypes) {
    for (int64_t k : lengths(t)) {
      const int64_t rows = 19;
      const std::vector<std::byte> plain = make_weights(t, rows, k, false, rng);
      const std::vector<std::byte> inter = interleaved(t, plain, rows, k);
      const TensorView v = view_of(t, k, rows, inter, RowLayout::kInterleaved8);
      for (int64_t tokens : {1, 7}) {
        const std::vector<float> x = make_activations(tokens, k, false, rng);
        std::vector<float> avx2(static_cast<size_t>(rows * tokens)), vnni(avx2.size());
        Matmul({Isa::kAvx2, MatmulPrecision::kQuantized}).run(v, x.data(), tokens, avx2.data(), pool);
        Matmul({Isa::kAvxVnni, MatmulPrecision::kQuantized}).run(v, x.data(), tokens, vnni.data(), pool);
        EXPECT_EQ(vnni, avx2) << dtype_name(t) << " k=" << k << " tokens=" << tokens;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 12);
}

// Variants without interleaved kernels read de-interleaved copies: the same
// values as on plain weights, bitwise, and so does the f32 reference path.
TEST(InterleavedMatmul, PlainKernelsGiveThePlainResultsBitwise) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  const int64_t k = 256, rows = 27, tokens = 5;
  for (DType t : kTypes) {
    const std::vector<std::byte> plain = make_weights(t, rows, k, false, rng);
    const std::vector<std::byte> inter = interleaved(t, plain, rows, k);
    const std::vector<float> x = make_activations(tokens, k, false, rng);
    for (Isa isa : supported_isas()) {
      for (MatmulPrecision precision : {MatmulPrecision::kQuantized, MatmulPrecision::kF32}) {
        if (precision == MatmulPrecision::kQuantized && prefers_interleaved(t, isa)) continue;
        Matmul mm({isa, precision});
        std::vector<float> want(static_cast<size_t>(rows * tokens)), got(want.size());
        mm.run(view_of(t, k, rows, plain, RowLayout::kPlain), x.data(), tokens, want.data(), pool);
        mm.run(view_of(t, k, rows, inter, RowLayout::kInterleaved8), x.data(), tokens, got.data(), pool);
        EXPECT_EQ(got, want) << dtype_name(t) << " " << isa_name(isa) << (precision == MatmulPrecision::kF32 ? " f32" : "");
      }
    }
  }
}

// Batch invariance on the interleaved kernels: a token alone (the direct
// kernels) equals the same token in a batch of 11 (K-quants: groups unpacked
// once, a 6-token tile and a 5-token one); thread counts and fusion with a
// plain weight agree.
TEST(InterleavedMatmul, ATokensRowDoesNotDependOnBatchThreadsOrFusion) {
  std::mt19937 rng(4);
  const int64_t k = 768, rows = 77, n = 11;
  for (DType t : kTypes) {
    const std::vector<std::byte> plain = make_weights(t, rows, k, false, rng);
    const std::vector<std::byte> inter = interleaved(t, plain, rows, k);
    const TensorView v = view_of(t, k, rows, inter, RowLayout::kInterleaved8);
    const std::vector<std::byte> other = make_weights(DType::Q8_0, 24, k, false, rng);
    const TensorView vo = view_of(DType::Q8_0, k, 24, other, RowLayout::kPlain);
    const std::vector<float> x = make_activations(n, k, false, rng);
    for (Isa isa : supported_isas()) {
      Matmul mm({isa, MatmulPrecision::kQuantized});
      ThreadPool one(1);
      std::vector<float> batch(static_cast<size_t>(n * rows)), alone(static_cast<size_t>(rows));
      mm.run(v, x.data(), n, batch.data(), one);
      for (int64_t i = 0; i < n; ++i) {
        mm.run(v, x.data() + i * k, 1, alone.data(), one);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + i * rows))
            << dtype_name(t) << " " << isa_name(isa) << " token " << i;
      }
      for (int threads : {2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> fused(batch.size()), fused_other(static_cast<size_t>(n * 24));
        mm.run({{&v, fused.data()}, {&vo, fused_other.data()}}, x.data(), n, pool);
        EXPECT_EQ(fused, batch) << dtype_name(t) << " " << isa_name(isa) << " threads " << threads;
      }
    }
  }
}

// F16 over interleaved rows: the AVX-512 kernel (two groups a register) does
// each lane's arithmetic as the AVX2 kernel does, so the two give the same
// bits, one token or a batch, whatever rows are left to the AVX2 kernel.
TEST(InterleavedMatmul, F16VariantsGiveTheAvx2BitsOnEveryX86Path) {
  std::vector<Isa> others;  // the variants with interleaved F16 kernels of their own
  for (Isa isa : supported_isas()) {
    if (isa != Isa::kScalar && isa != Isa::kAvx2 && prefers_interleaved(DType::F16, isa)) others.push_back(isa);
  }
  if (!isa_supported(Isa::kAvx2) || others.empty()) GTEST_SKIP() << "no variant to hold against the AVX2 kernel here";
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const int64_t k = 300;
  for (int64_t rows : {16, 40, 77}) {
    const std::vector<std::byte> plain = make_weights(DType::F16, rows, k, false, rng);
    const std::vector<std::byte> inter = interleaved(DType::F16, plain, rows, k);
    const TensorView v = view_of(DType::F16, k, rows, inter, RowLayout::kInterleaved8);
    for (int64_t tokens : {1, 7}) {
      const std::vector<float> x = make_activations(tokens, k, false, rng);
      std::vector<float> want(static_cast<size_t>(rows * tokens));
      Matmul({Isa::kAvx2, MatmulPrecision::kQuantized}).run(v, x.data(), tokens, want.data(), pool);
      for (Isa isa : others) {
        std::vector<float> got(want.size());
        Matmul({isa, MatmulPrecision::kQuantized}).run(v, x.data(), tokens, got.data(), pool);
        EXPECT_EQ(got, want) << isa_name(isa) << " rows=" << rows << " tokens=" << tokens;
      }
    }
  }
}

}  // namespace
}  // namespace tokamak::kernels
