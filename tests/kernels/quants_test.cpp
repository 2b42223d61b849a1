// (De)quantization against ggml's own output: the fixtures of
// shared/fixtures/quant (llama-quantize --pure of 3 source tensors, and the
// dequantized reference floats, which are bit-identical to ggml's to_float).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quants.h"
#include "kernels/quants_impl.h"
#include "kernels/widen.h"

namespace tokamak::kernels {
namespace {

using testing::read_f32_file;
using testing::test_data;

// One tensor of one type in fixtures/quant/manifest.json.
struct FixtureTensor {
  std::string name;
  DType type;
  int64_t ne0 = 0;  // elements per row
  int64_t ne1 = 0;  // rows
  std::string gguf_file;
  uint64_t data_offset = 0;  // absolute offset of the tensor data in the GGUF
  uint64_t n_bytes = 0;
  std::string dequant_file;  // ggml's to_float of the stored blocks, [ne1, ne0] f32
  std::string source_file;   // what was quantized, [ne1, ne0] f32
  double rmse_vs_source = 0;
};

// type name ("Q4_K") -> its tensors.
const std::map<std::string, std::vector<FixtureTensor>>& manifest() {
  static const auto parsed = [] {
    std::map<std::string, std::vector<FixtureTensor>> out;
    const auto j = nlohmann::json::parse(testing::read_text_file(test_data("fixtures/quant/manifest.json")));
    for (const auto& type : j.at("types")) {
      const std::string type_name = type.at("type");
      for (const auto& t : type.at("tensors")) {
        FixtureTensor f;
        f.name = t.at("name");
        const auto dt = dtype_from_name(type_name);
        if (!dt) throw std::runtime_error("manifest: unknown type " + type_name);
        f.type = *dt;
        f.ne0 = t.at("ne").at(0);
        f.ne1 = t.at("ne").at(1);
        f.gguf_file = type.at("file");
        f.data_offset = t.at("data_offset");
        f.n_bytes = t.at("n_bytes");
        f.dequant_file = t.at("dequant_file");
        f.source_file = t.at("source_file");
        f.rmse_vs_source = t.at("rmse_vs_source");
        out[type_name].push_back(f);
      }
    }
    return out;
  }();
  return parsed;
}

// The stored blocks of a fixture tensor, read straight out of the GGUF.
std::vector<uint8_t> read_tensor_bytes(const FixtureTensor& f) {
  std::ifstream in(test_data(f.gguf_file), std::ios::binary);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (f.data_offset > size || f.n_bytes > size - f.data_offset) {
    throw std::runtime_error(f.gguf_file + ": tensor " + f.name + " lies past the end of the file");
  }
  std::vector<uint8_t> bytes(f.n_bytes);
  in.seekg(static_cast<std::streamoff>(f.data_offset));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

// Empty when a and b are bitwise equal, else where and how they first differ.
std::string first_bit_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) {
      std::ostringstream s;
      s.precision(9);
      s << "first mismatch at index " << i << ": got " << a[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(a[i])
        << "), want " << b[i] << " (0x" << std::bit_cast<uint32_t>(b[i]) << ")";
      return s.str();
    }
  }
  return "";
}

std::vector<float> dequantize_tensor(DType t, const std::vector<uint8_t>& bytes, int64_t ne0, int64_t ne1) {
  std::vector<float> out(static_cast<size_t>(ne0 * ne1));
  const size_t rb = row_bytes(t, ne0);
  for (int64_t r = 0; r < ne1; ++r) dequantize_row(t, bytes.data() + r * rb, out.data() + r * ne0, ne0);
  return out;
}

// As the manifest computes it: each difference rounded to f32, then squared
// and averaged in double.
double rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = a[i] - b[i];
    sum += diff * diff;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// Every type the fixtures hold, so that a missing one fails rather than passes.
const std::vector<std::string> kFixtureTypes = {"F32",  "F16",  "BF16", "Q4_0",   "Q4_1",   "Q5_0",    "Q5_1",
                                                "Q8_0", "Q2_K", "Q3_K", "Q4_K",   "Q5_K",   "Q6_K",    "IQ4_NL",
                                                "IQ4_XS", "IQ3_XXS", "IQ3_S", "TQ1_0", "TQ2_0"};

class QuantFixture : public ::testing::TestWithParam<std::string> {
 protected:
  const std::vector<FixtureTensor>& tensors() {
    const auto it = manifest().find(GetParam());
    if (it == manifest().end()) throw std::runtime_error("manifest has no type " + GetParam());
    return it->second;
  }
};

TEST_P(QuantFixture, DequantizeIsBitExactWithGgml) {
  ASSERT_EQ(tensors().size(), 3u);
  for (const FixtureTensor& f : tensors()) {
    SCOPED_TRACE(f.name);
    ASSERT_TRUE(can_dequantize(f.type));
    ASSERT_EQ(f.n_bytes, row_bytes(f.type, f.ne0) * static_cast<size_t>(f.ne1));
    const std::vector<float> got = dequantize_tensor(f.type, read_tensor_bytes(f), f.ne0, f.ne1);
    const std::vector<float> want = read_f32_file(test_data(f.dequant_file));
    const std::string mismatch = first_bit_mismatch(got, want);
    EXPECT_TRUE(mismatch.empty()) << mismatch;
  }
}

// Where quantize_row reproduces ggml's reference quantizer, the bytes must be
// the fixture's; its error then equals the fixture's by construction, but it is
// checked separately so that a byte-exactness regression names its cost.
TEST_P(QuantFixture, QuantizeMatchesGgmlBytesAndError) {
  for (const FixtureTensor& f : tensors()) {
    SCOPED_TRACE(f.name);
    if (!can_quantize(f.type)) {
      EXPECT_THROW(quantize_row(f.type, nullptr, nullptr, f.ne0), Error);
      continue;
    }
    const std::vector<float> src = read_f32_file(test_data(f.source_file));
    ASSERT_EQ(src.size(), static_cast<size_t>(f.ne0 * f.ne1));
    const size_t rb = row_bytes(f.type, f.ne0);
    std::vector<uint8_t> q(rb * static_cast<size_t>(f.ne1));
    for (int64_t r = 0; r < f.ne1; ++r) quantize_row(f.type, src.data() + r * f.ne0, q.data() + r * rb, f.ne0);

    const std::vector<uint8_t> want = read_tensor_bytes(f);
    ASSERT_EQ(q.size(), want.size());
    for (size_t i = 0; i < q.size(); ++i) {
      ASSERT_EQ(q[i], want[i]) << "first differing byte " << i << " (block " << i / dtype_traits(f.type).block_bytes
                               << ", byte " << i % dtype_traits(f.type).block_bytes << " within it)";
    }
    const double err = rmse(dequantize_tensor(f.type, q, f.ne0, f.ne1), src);
    // Same floats as the manifest's figure, computed the same way; allow only
    // for a different summation order.
    EXPECT_LE(err, f.rmse_vs_source * (1 + 1e-12) + 1e-30);
  }
}

// dot_row_ref over ggml's stored rows: bitwise the f32 sum, in element order,
// of ggml's dequantized floats times x; and within the recursive-summation
// bound gamma_n * sum |w x| (gamma_n = n u / (1 - n u), u = 2^-24) of the
// double-precision dot.
TEST_P(QuantFixture, DotRowRefMatchesTheDequantizedRow) {
  for (const FixtureTensor& f : tensors()) {
    SCOPED_TRACE(f.name);
    const std::vector<uint8_t> bytes = read_tensor_bytes(f);
    const std::vector<float> w = read_f32_file(test_data(f.dequant_file));
    std::vector<float> x(static_cast<size_t>(f.ne0));
    for (int64_t i = 0; i < f.ne0; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) + 0.1f;
    const size_t rb = row_bytes(f.type, f.ne0);
    for (int64_t r = 0; r < f.ne1; ++r) {
      const float* wr = w.data() + r * f.ne0;
      float ordered = 0;
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < f.ne0; ++i) {
        ordered += wr[i] * x[i];
        exact += double(wr[i]) * x[i];
        magnitude += std::fabs(double(wr[i]) * x[i]);
      }
      const float dot = dot_row_ref(f.type, bytes.data() + r * rb, x.data(), f.ne0);
      EXPECT_EQ(std::bit_cast<uint32_t>(dot), std::bit_cast<uint32_t>(ordered)) << "row " << r;
      const double u = 0x1p-24;
      const double gamma = double(f.ne0) * u / (1 - double(f.ne0) * u);
      EXPECT_LE(std::fabs(double(dot) - exact), gamma * magnitude) << "row " << r;
    }
  }
}

// A format loading widens (kernels/widen.h) holds ggml's values exactly:
// the widened rows dequantize bit for bit to ggml's own floats.
TEST_P(QuantFixture, WidenedRowsDequantizeBitExactWithGgml) {
  const std::optional<DType> to = widened_type(tensors().front().type, Isa::kAvx2);
  if (!to) return;  // not widened
  for (const FixtureTensor& f : tensors()) {
    SCOPED_TRACE(f.name);
    const std::vector<uint8_t> bytes = read_tensor_bytes(f);
    std::vector<uint8_t> wide(row_bytes(*to, f.ne0) * static_cast<size_t>(f.ne1));
    widen_rows(f.type, reinterpret_cast<const std::byte*>(bytes.data()), *to, reinterpret_cast<std::byte*>(wide.data()),
               f.ne1, f.ne0);
    const std::string mismatch =
        first_bit_mismatch(dequantize_tensor(*to, wide, f.ne0, f.ne1), read_f32_file(test_data(f.dequant_file)));
    EXPECT_TRUE(mismatch.empty()) << mismatch;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantFixture, ::testing::ValuesIn(kFixtureTypes),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(QuantFixtures, CoverEveryDequantizableType) {
  // Q8_K is an activation format: llama-quantize cannot store it, so the
  // round-trip tests cover it instead.
  std::set<DType> covered = {DType::Q8_K};
  for (const auto& [name, tensors] : manifest()) covered.insert(tensors.at(0).type);
  for (uint32_t id = 0; id < 64; ++id) {
    const auto t = dtype_from_id(id);
    if (t && can_dequantize(*t)) {
      EXPECT_TRUE(covered.count(*t)) << dtype_name(*t) << " has no fixture";
    }
  }
}

// can_dequantize / can_quantize say exactly which types the functions accept,
// and a refusal names the type.
TEST(Quants, CapabilitiesAreTruthfulAndErrorsNameTheType) {
  for (uint32_t id = 0; id < 64; ++id) {
    const auto t = dtype_from_id(id);
    if (!t) continue;
    SCOPED_TRACE(std::string(dtype_name(*t)));
    const int64_t n = 256;  // a whole number of blocks of every type
    std::vector<uint8_t> bytes(row_bytes(*t, n) + 16, 0);
    std::vector<float> floats(n, 0.5f);
    const std::string name(dtype_name(*t));
    if (can_dequantize(*t)) {
      EXPECT_NO_THROW(dequantize_row(*t, bytes.data(), floats.data(), n));
      EXPECT_NO_THROW(dot_row_ref(*t, bytes.data(), floats.data(), n));
    } else {
      try {
        dequantize_row(*t, bytes.data(), floats.data(), n);
        ADD_FAILURE() << "dequantize_row accepted an unsupported type";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      }
      EXPECT_THROW(dot_row_ref(*t, bytes.data(), floats.data(), n), Error);
    }
    if (can_quantize(*t)) {
      EXPECT_TRUE(can_dequantize(*t));
      EXPECT_NO_THROW(quantize_row(*t, floats.data(), bytes.data(), n));
    } else {
      try {
        quantize_row(*t, floats.data(), bytes.data(), n);
        ADD_FAILURE() << "quantize_row accepted an unsupported type";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Quants, RejectsPartialBlocks) {
  std::vector<uint8_t> bytes(1024);
  std::vector<float> floats(512);
  EXPECT_THROW(dequantize_row(DType::Q4_K, bytes.data(), floats.data(), 255), Error);
  EXPECT_THROW(quantize_row(DType::Q8_0, floats.data(), bytes.data(), 33), Error);
  EXPECT_THROW(dot_row_ref(DType::Q4_0, bytes.data(), floats.data(), -32), Error);
  try {
    dequantize_row(DType::Q6_K, bytes.data(), floats.data(), 100);
    ADD_FAILURE() << "accepted 100 elements of q6_K";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q6_K"), std::string::npos) << e.what();
  }
}

// The IQ3 codebooks were transcribed from ggml-common.h; their published
// structure catches a mistyped entry that the fixtures might not reach.
// Every byte value, not only those ggml's quantizer writes (a TQ1_0 byte
// from 243 up is no base-3 number of 5 digits, but it still dequantizes to
// some trits): widening keeps whatever the stored bytes say.
TEST(Quants, WideningKeepsTheValuesOfAnyBytes) {
  struct Widening {
    DType from, to;
    size_t d_at;  // where a block's fp16 d lies
  };
  const std::vector<Widening> widenings = {{DType::TQ1_0, DType::TQ2_0, offsetof(BlockTQ1_0, d)},
                                           {DType::IQ3_S, DType::IQ3_S_WIDE, offsetof(BlockIQ3_S, d)},
                                           {DType::IQ3_XXS, DType::IQ3_XXS_WIDE, offsetof(BlockIQ3_XXS, d)}};
  for (const Isa isa : {Isa::kAvx2, Isa::kAvx512Vnni}) {
    for (const Widening& w : widenings) EXPECT_EQ(widened_type(w.from, isa), w.to) << isa_name(isa);
  }
  for (const Widening& w : widenings) {
    SCOPED_TRACE(std::string(dtype_name(w.from)));
    EXPECT_EQ(widened_type(w.from, Isa::kScalar), std::nullopt) << "the scalar reference reads every format as stored";
    EXPECT_EQ(widened_type(w.from, Isa::kNeon), w.from != DType::TQ1_0 ? std::optional(w.to) : std::nullopt)
        << "NEON has IQ4_XS's kernel and no ternary one";
    constexpr int64_t k = 4 * 256, rows = 3;
    std::vector<uint8_t> bytes(row_bytes(w.from, k) * rows);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + i / 7);
    // Finite, varied fp16 scales.
    const size_t bb = dtype_traits(w.from).block_bytes;
    for (size_t b = 0; b < bytes.size() / bb; ++b) {
      bytes[b * bb + w.d_at] = static_cast<uint8_t>(b * 17);
      bytes[b * bb + w.d_at + 1] = static_cast<uint8_t>(0x30 + b % 8);
    }
    std::vector<uint8_t> wide(row_bytes(w.to, k) * rows);
    widen_rows(w.from, reinterpret_cast<const std::byte*>(bytes.data()), w.to, reinterpret_cast<std::byte*>(wide.data()), rows, k);
    const std::string mismatch =
        first_bit_mismatch(dequantize_tensor(w.to, wide, k, rows), dequantize_tensor(w.from, bytes, k, rows));
    EXPECT_TRUE(mismatch.empty()) << mismatch;
  }
}

TEST(Quants, IQ3GridsHaveThePublishedStructure) {
  auto check = [](const uint32_t* grid, int n, const std::set<int>& magnitudes) {
    for (int i = 0; i < n; ++i) {
      if (i > 0) {
        EXPECT_LT(grid[i - 1], grid[i]) << "entry " << i;
      }
      for (int k = 0; k < 4; ++k) EXPECT_TRUE(magnitudes.count((grid[i] >> (8 * k)) & 0xff)) << "entry " << i;
    }
  };
  check(detail::kIQ3XXSGrid, 256, {4, 12, 20, 28, 36, 44, 52, 62});
  check(detail::kIQ3SGrid, 512, {1, 3, 5, 7, 9, 11, 13, 15});
  EXPECT_EQ(detail::kIQ3XXSGrid[0], 0x04040404u);
  EXPECT_EQ(detail::kIQ3XXSGrid[255], 0x3e341c04u);
  EXPECT_EQ(detail::kIQ3SGrid[0], 0x01010101u);
  EXPECT_EQ(detail::kIQ3SGrid[511], 0x0f0f0101u);
}

}  // namespace
}  // namespace tokamak::kernels
