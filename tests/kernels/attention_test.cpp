// The paged attention kernels against the scalar reference (materialized
// softmax in double) on random shapes, for every KV type, mixed precision and
// every ISA this CPU runs; plus the bitwise rules of the reduction order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include "common/test_data.h"
#include "core/error.h"

#include "kernels/attention.h"
#include "kv/kv_cache.h"

namespace tokamak::kernels {
namespace {

using testing::kSanitized;
// Instrumented builds run the same shapes with shorter contexts.
constexpr int64_t kMaxLength = kSanitized ? 1200 : 5000;
constexpr int kRandomCases = kSanitized ? 12 : 40;

struct Shape {
  int n_heads = 1;
  int n_kv_heads = 1;
  int head_dim = 32;
  int64_t length = 1;
  int block_size = 16;
  KvType k = KvType::F32;
  KvType v = KvType::F32;
  int recent = 0;
  uint32_t seed = 1;
  float softcap = 0.0f;
  int32_t window = 0;

  std::string name() const {
    char buf[200];
    std::snprintf(buf, sizeof(buf), "heads %d/%d dim %d len %lld block %d K %s V %s recent %d softcap %g window %d",
                  n_heads, n_kv_heads, head_dim, static_cast<long long>(length), block_size,
                  std::string(kv_type_name(k)).c_str(), std::string(kv_type_name(v)).c_str(), recent, softcap, window);
    return buf;
  }
  AttentionParams dims() const { return {n_heads, n_kv_heads, head_dim, softcap, window}; }
};

// One sequence of `length` random K/V rows (N(0, 1), a few larger) in a KV
// cache whose blocks interleave with other sequences', and random queries.
struct Fixture {
  std::unique_ptr<kv::KvCache> cache;
  std::vector<float> q;  // [length, n_heads * head_dim]
  float v_max = 0.0f;    // max |v| stored

  Fixture(const Shape& s, bool stored_f32 = false) {
    kv::KvLayout layout;
    layout.n_layers = 1;
    layout.n_kv_heads = s.n_kv_heads;
    layout.head_dim = s.head_dim;
    layout.format.block_size = s.block_size;
    layout.format.k_type = stored_f32 ? KvType::F32 : s.k;
    layout.format.v_type = stored_f32 ? KvType::F32 : s.v;
    layout.format.recent = stored_f32 ? 0 : s.recent;
    const int64_t blocks = (s.length + s.block_size - 1) / s.block_size;
    cache = std::make_unique<kv::KvCache>(layout, static_cast<int32_t>(2 * blocks + layout.recent_blocks() + 4));
    std::mt19937 rng(s.seed);
    for (int64_t b = 0; b < blocks; ++b) {  // seq 0's blocks interleave with seqs 1..2
      cache->reserve(0, (b + 1) * s.block_size);
      if (rng() % 2)
        cache->reserve(1 + static_cast<int32_t>(rng() % 2), cache->table(1).blocks.size() * s.block_size + 1);
    }
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t kv_dim = static_cast<int64_t>(s.n_kv_heads) * s.head_dim;
    std::vector<float> k(static_cast<size_t>(kv_dim)), v(static_cast<size_t>(kv_dim));
    cache->prepare_write(0, 0, s.length);
    for (int64_t p = 0; p < s.length; ++p) {
      for (int64_t i = 0; i < kv_dim; ++i) {
        const float big = rng() % 50 == 0 ? 4.0f : 1.0f;  // outliers stress the quantizers
        k[static_cast<size_t>(i)] = normal(rng) * big;
        v[static_cast<size_t>(i)] = normal(rng) * big;
        v_max = std::max(v_max, std::fabs(v[static_cast<size_t>(i)]));
      }
      cache->write(0, 0, p, k.data(), v.data());
    }
    cache->set_length(0, s.length);
    q.resize(static_cast<size_t>(s.length * s.n_heads * s.head_dim));
    for (float& x : q) x = normal(rng) * 1.5f;  // scores ~N(0, 2.25): moderately peaked softmax
  }
  const float* q_row(int64_t pos, const Shape& s) const { return q.data() + pos * s.n_heads * s.head_dim; }
  // The cache as the last position's query reads it (in f16 from
  // recent_begin(length - 1) on); the kernels read every query so here.
  KvView view(const Shape& s) const { return cache->view(0, 0, s.length - 1); }
};

// The tile's outputs [n_tokens, n_heads * head_dim] from attention() over `view`.
std::vector<float> run_kernel(Isa isa, const Shape& s, const Fixture& f, const KvView& view,
                              const std::vector<int32_t>& positions) {
  const AttentionParams dims = s.dims();
  const int64_t row = static_cast<int64_t>(s.n_heads) * s.head_dim;
  std::vector<float> out(positions.size() * static_cast<size_t>(row), -999.0f);
  std::vector<const float*> q_rows;
  std::vector<float*> out_rows;
  for (size_t i = 0; i < positions.size(); ++i) {
    q_rows.push_back(f.q_row(positions[i], s));
    out_rows.push_back(out.data() + static_cast<int64_t>(i) * row);
  }
  std::vector<float> scratch(
      static_cast<size_t>(2 * attention_tile_state_floats(dims, static_cast<int>(positions.size()))));
  for (int h = 0; h < s.n_kv_heads; ++h) {
    QueryTile tile{q_rows.data(), positions.data(), static_cast<int>(positions.size()), h};
    attention(isa, dims, view, tile, out_rows.data(), scratch.data());
  }
  return out;
}
std::vector<float> run_kernel(Isa isa, const Shape& s, const Fixture& f, const std::vector<int32_t>& positions) {
  return run_kernel(isa, s, f, f.view(s), positions);
}

std::vector<float> run_ref(const Shape& s, const Fixture& f, const KvView& view, const std::vector<int32_t>& positions) {
  const int64_t row = static_cast<int64_t>(s.n_heads) * s.head_dim;
  std::vector<float> out(positions.size() * static_cast<size_t>(row));
  for (size_t i = 0; i < positions.size(); ++i) {
    attention_ref(s.dims(), view, f.q_row(positions[i], s), positions[i], out.data() + static_cast<int64_t>(i) * row);
  }
  return out;
}
std::vector<float> run_ref(const Shape& s, const Fixture& f, const std::vector<int32_t>& positions) {
  return run_ref(s, f, f.view(s), positions);
}

// max |a - b| over the largest |v| stored: attention outputs are convex
// combinations of V rows, so this is the error relative to the values' scale.
float rel_error(const std::vector<float>& a, const std::vector<float>& b, float v_max) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m / v_max;
}

// The bound against the reference over the same stored values: f32 rounding
// (1e-5), or, where q8/q4 K and V go through integer dot products, the
// rounding of the query and of the softmax weights. AVX-512 VNNI rounds the
// query to ~15 bits against q8 K (8 against q4 K) and the weights to 8
// (measured <= 8.7e-4 for q8/q8, <= 5.3e-3 with q4 over these shapes); AVX2
// rounds both to 16 bits (measured <= 2.6e-5 over these shapes, 4x headroom),
// as does AVX-VNNI (the same kernel, its products through VPDPWSSD) but for
// q8 V, whose weights it rounds to 8 bits for VPDPBUSD (measured <= 1.2e-3,
// a 7-key sliding window the largest).
constexpr float kFloatBound = 1e-5f;
constexpr float kIntegerBound = 1e-2f;
constexpr float kAvx2IntegerBound = 1e-4f;
float bound_for(Isa isa, const Shape& s) {
  if (!attention_integer_dots(isa, s.dims(), s.k, s.v)) return kFloatBound;
  if (isa == Isa::kAvxVnni && s.v == KvType::Q8) return kIntegerBound;
  return isa == Isa::kAvx2 || isa == Isa::kAvxVnni ? kAvx2IntegerBound : kIntegerBound;
}

std::vector<int32_t> query_positions(const Shape& s, std::mt19937& rng) {
  const int32_t last = static_cast<int32_t>(s.length - 1);
  std::vector<int32_t> p = {last};
  for (int i = 0; i < 2 && s.length > 1; ++i) p.push_back(static_cast<int32_t>(rng() % s.length));
  return p;
}

Shape random_shape(std::mt19937& rng, int i) {
  static constexpr int kDims[] = {32, 64, 128};
  static constexpr int kBlocks[] = {8, 16, 32};
  static constexpr KvType kTypes[] = {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8, KvType::Q4};
  Shape s;
  s.n_kv_heads = 1 << (rng() % 4);  // 1..8 KV heads, 1..8 query heads each, at most 32 in all
  s.n_heads = std::min(32, s.n_kv_heads << (rng() % 4));
  s.head_dim = kDims[rng() % 3];
  // Lengths of every kind: around chunk and block edges, or log-uniform in [1, kMaxLength].
  const int64_t edges[] = {1, 2, 31, 33, 511, 512, 513, 1025};
  const double log_len = std::uniform_real_distribution<double>(0.0, std::log(static_cast<double>(kMaxLength)))(rng);
  s.length = i % 3 == 0 ? edges[rng() % 8] : std::max<int64_t>(1, static_cast<int64_t>(std::exp(log_len)));
  s.block_size = kBlocks[rng() % 3];
  s.k = kTypes[rng() % 5];
  s.v = kTypes[rng() % 5];
  if (kv_type_is_quantized(s.k) || kv_type_is_quantized(s.v))
    s.recent = rng() % 2 ? 0 : 1 + static_cast<int>(rng() % 100);
  s.seed = 1000 + static_cast<uint32_t>(i);
  return s;
}

// Every ISA, every type: within 1e-5 of the reference that reads the same
// stored values (the kernel's only error is f32 arithmetic: dot products of
// head_dim terms, exp, and sums over tiles and chunks), or within
// kIntegerBound on the integer path.
TEST(Attention, MatchesTheReferenceOnRandomShapes) {
  std::mt19937 rng(42);
  std::vector<Shape> shapes;
  for (int i = 0; i < kRandomCases; ++i) shapes.push_back(random_shape(rng, i));
  // Fixed corners: the longest context, MQA, 32 heads over 8, tiny heads.
  shapes.push_back({32, 8, 128, kMaxLength, 16, KvType::F16, KvType::F16, 0, 7});
  shapes.push_back({8, 1, 64, 777, 8, KvType::Q8, KvType::Q4, 40, 8});
  shapes.push_back({8, 4, 8, 300, 16, KvType::Q8, KvType::Q8, 16, 9});  // stories260K's shape
  shapes.push_back({2, 2, 4, 50, 16, KvType::F16, KvType::Q4, 0, 10});  // head_dim 4: scalar only
  shapes.push_back({32, 4, 64, 3000, 16, KvType::Q8, KvType::Q8, 0, 12});  // TinyLlama's shape, integer q8
  shapes.push_back({16, 2, 128, 1500, 8, KvType::Q8, KvType::Q8, 50, 13});  // integer q8 beside the f16 ring
  shapes.push_back({8, 2, 256, 700, 16, KvType::Q4, KvType::Q8, 0, 14});    // the widest heads (Gemma), integer
  shapes.push_back({4, 4, 256, 300, 32, KvType::Q8, KvType::Q4, 0, 15});
  shapes.push_back({32, 2, 64, 900, 16, KvType::Q4, KvType::Q4, 30, 16});  // 16 heads a KV head: two AVX2 head blocks
  float worst = 0.0f, worst_integer = 0.0f, worst_avx2_integer = 0.0f;
  int avx2_integer_cases = 0;
  for (const Shape& s : shapes) {
    const Fixture f(s);
    const std::vector<int32_t> positions = query_positions(s, rng);
    const std::vector<float> ref = run_ref(s, f, positions);
    for (Isa isa : supported_isas()) {
      const float err = rel_error(run_kernel(isa, s, f, positions), ref, f.v_max);
      const float bound = bound_for(isa, s);
      float& w = bound == kFloatBound ? worst : bound == kAvx2IntegerBound ? worst_avx2_integer : worst_integer;
      w = std::max(w, err);
      avx2_integer_cases += bound == kAvx2IntegerBound;
      EXPECT_LE(err, bound) << isa_name(isa) << " " << s.name();
    }
  }
  // At least the six fixed q8 / q4 corners with heads of 64 and more.
  if (isa_supported(Isa::kAvx2)) {
    EXPECT_GE(avx2_integer_cases, 6) << "the AVX2 integer path must be exercised";
  }
  std::printf("attention vs reference: worst max|diff| / max|v| = %.3g (f32 paths), %.3g (AVX2 integer dots, %d cases), "
              "%.3g (VNNI integer dots) over %zu shapes\n",
              worst, worst_avx2_integer, avx2_integer_cases, worst_integer, shapes.size());
}

// Mistral's sliding window and Gemma-2's soft-capped scores, alone and together.
TEST(Attention, SlidingWindowAndSoftCapMatchTheReference) {
  std::mt19937 rng(5);
  float worst = 0.0f;
  for (int32_t window : {0, 1, 7, 100, 600}) {
    for (float softcap : {0.0f, 5.0f}) {
      if (window == 0 && softcap == 0.0f) continue;
      for (KvType k : {KvType::F16, KvType::Q8}) {
      const Shape s{8,       2,     64, 1100, 16, k, KvType::Q8, 0, 11u + static_cast<uint32_t>(window),
                    softcap, window};
      const Fixture f(s);
      const std::vector<int32_t> positions = {1099, 0, 5, 600, 599, 1050, static_cast<int32_t>(rng() % 1100)};
      const std::vector<float> ref = run_ref(s, f, positions);
      // Late queries only: with a window, the first chunks hold none of their keys.
      const std::vector<int32_t> late = {1099, 1050, 1098};
      const std::vector<float> late_ref = run_ref(s, f, late);
      for (Isa isa : supported_isas()) {
        const float err = rel_error(run_kernel(isa, s, f, positions), ref, f.v_max);
        const float late_err = rel_error(run_kernel(isa, s, f, late), late_ref, f.v_max);
        if (bound_for(isa, s) == kFloatBound) worst = std::max({worst, err, late_err});
        EXPECT_LE(err, bound_for(isa, s)) << isa_name(isa) << " " << s.name();
        EXPECT_LE(late_err, bound_for(isa, s)) << isa_name(isa) << " late queries, " << s.name();
      }
      }
    }
  }
  std::printf("windowed / soft-capped attention vs reference: worst max|diff| / max|v| = %.3g (f32 paths)\n", worst);
}

// Each token's outputs computed alone equal, bit for bit, its rows of
// `together` (all of `positions` in one tile).
void expect_each_alone_matches(Isa isa, const Shape& s, const Fixture& f, const std::vector<int32_t>& positions,
                               const std::vector<float>& together) {
  const int64_t row = static_cast<int64_t>(s.n_heads) * s.head_dim;
  for (size_t i = 0; i < positions.size(); ++i) {
    const std::vector<float> alone = run_kernel(isa, s, f, {positions[i]});
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + static_cast<int64_t>(i) * row))
        << isa_name(isa) << " " << s.name() << " position " << positions[i];
  }
}

// A query's result is the same bits alone, beside other queries in a tile,
// and when its chunks are computed apart and folded (flash-decoding).
TEST(Attention, ResultsDoNotDependOnTilingOrSplitting) {
  const std::pair<KvType, KvType> kv_types[] = {
      {KvType::Q8, KvType::F16}, {KvType::Q8, KvType::Q8}, {KvType::Q4, KvType::Q4}};  // q8 / q4: integer paths too
  for (int32_t window : {0, 700}) {
    for (const auto& [k, v] : kv_types) {
    const Shape s{16, 4, 64, 1300, 16, k, v, 20, 3, 0.0f, window};
    const Fixture f(s);
    const std::vector<int32_t> positions = {1299, 5, 700, 1024, 512, 511, 1298};
    const AttentionParams dims = s.dims();
    const int64_t row = static_cast<int64_t>(s.n_heads) * s.head_dim;
    for (Isa isa : supported_isas()) {
      const std::vector<float> together = run_kernel(isa, s, f, positions);
      expect_each_alone_matches(isa, s, f, positions, together);
      // Chunk by chunk into separate partials, folded afterwards.
      std::vector<float> split(together.size());
      std::vector<const float*> q_rows;
      std::vector<float*> out_rows;
      for (size_t i = 0; i < positions.size(); ++i) {
        q_rows.push_back(f.q_row(positions[i], s));
        out_rows.push_back(split.data() + static_cast<int64_t>(i) * row);
      }
      const KvView view = f.view(s);
      const int n = static_cast<int>(positions.size());
      for (int h = 0; h < s.n_kv_heads; ++h) {
        const QueryTile tile{q_rows.data(), positions.data(), n, h};
        const int64_t state = attention_tile_state_floats(dims, n);
        const int64_t chunks = attention_chunks(tile);
        EXPECT_EQ(chunks, 3);
        std::vector<float> partials(static_cast<size_t>(chunks * state)), running(static_cast<size_t>(state));
        for (int64_t c = chunks - 1; c >= 0; --c)
          attention_chunk(isa, dims, view, tile, c, partials.data() + c * state);
        attention_reset(dims, n * dims.group(), running.data());
        for (int64_t c = 0; c < chunks; ++c)
          attention_fold(dims, n * dims.group(), partials.data() + c * state, running.data());
        attention_finish(dims, tile, running.data(), out_rows.data());
      }
      EXPECT_EQ(split, together) << isa_name(isa);
    }
    }
  }
}

// The AVX2 integer path puts up to 8 query heads of a token side by side in
// the lanes of a vector (a head block) and computes as many blocks per pass
// over the tiles as its buffer holds (10 at head_dim 128). A query's result
// must not depend on which heads, tokens or passes share its vectors: 16
// heads a KV head make two blocks, 13 tokens make 26 blocks in three passes,
// against each token alone (two blocks, one pass).
TEST(Attention, ResultsDoNotDependOnHeadBlocksOrPasses) {
  for (const auto& [k, v] : {std::pair{KvType::Q8, KvType::Q8}, std::pair{KvType::Q4, KvType::Q8}}) {
    const Shape s{32, 2, 128, 1100, 16, k, v, 40, 21};
    const Fixture f(s);
    std::vector<int32_t> positions;
    for (int32_t p = 1099; p > 1099 - 13 * 83; p -= 83) positions.push_back(p);
    for (Isa isa : supported_isas()) {
      expect_each_alone_matches(isa, s, f, positions, run_kernel(isa, s, f, positions));
    }
  }
}

// A query head's result does not depend on how many heads share its KV head
// (4 or more: below that the f32 paths score keys one at a time, a choice of
// the model): groups of 7 and 5 (run as blocks of 8 with spare slots on
// AVX-512 VNNI) give each head the bits that a group of 8 with the same first
// heads gives it, over the same cache, for a tile of three tokens; on VNNI
// also 3 (a block of 4) against 4.
// AVX-VNNI's integer attention is the AVX2 kernel with VPDPWSSD for VPMADDWD
// + VPADDD: the same exact int32 sums, so the same bits, for q4 V with q8 or
// q4 K, with several tokens, a sliding window and the f16 ring beside it.
// (With q8 V its values take VPDPBUSD and 8-bit weights: the reference checks
// them, within kIntegerBound.)
TEST(Attention, AvxVnniIntegerDotsGiveTheAvx2BitsForQ4Values) {
  if (!isa_supported(Isa::kAvxVnni)) GTEST_SKIP() << "no AVX-VNNI on this CPU";
  std::mt19937 rng(7);
  const KvType types[] = {KvType::Q8, KvType::Q4};
  int cases = 0;
  for (KvType k : types) {
    for (KvType v : {KvType::Q4}) {
      for (int recent : {0, 40}) {
        Shape s;
        s.n_heads = 32;
        s.n_kv_heads = 4;
        s.head_dim = 64;
        s.length = 1300;
        s.k = k;
        s.v = v;
        s.recent = recent;
        s.window = recent > 0 ? 700 : 0;
        s.seed = 500 + static_cast<uint32_t>(cases);
        ASSERT_TRUE(attention_integer_dots(Isa::kAvxVnni, s.dims(), k, v)) << s.name();
        const Fixture f(s);
        const std::vector<int32_t> positions = query_positions(s, rng);
        const std::vector<float> avx2 = run_kernel(Isa::kAvx2, s, f, positions);
        const std::vector<float> vnni = run_kernel(Isa::kAvxVnni, s, f, positions);
        ASSERT_EQ(avx2.size(), vnni.size());
        EXPECT_EQ(std::memcmp(avx2.data(), vnni.data(), avx2.size() * sizeof(float)), 0) << s.name();
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 4);
}

TEST(Attention, AHeadsResultDoesNotDependOnItsGroupsSize) {
  for (const auto& [full, part] : {std::pair{8, 7}, std::pair{8, 5}, std::pair{4, 3}}) {
    const Shape s_full{full, 1, 64, 700, 16, KvType::Q8, KvType::Q8, 0, 31};
    Shape s_part = s_full;
    s_part.n_heads = part;
    const Fixture f_full(s_full);
    Fixture f_part(s_part);  // the same K/V: the same seed and KV width
    const int d = s_full.head_dim;
    for (int64_t pos = 0; pos < s_full.length; ++pos) {
      std::copy_n(f_full.q_row(pos, s_full), part * d, f_part.q.begin() + pos * part * d);
    }
    const std::vector<int32_t> positions = {699, 512, 37};
    for (Isa isa : supported_isas()) {
      if (part < 4 && !(isa >= Isa::kAvx512Vnni && attention_integer_dots(isa, s_part.dims(), KvType::Q8, KvType::Q8))) {
        continue;
      }
      const std::vector<float> a = run_kernel(isa, s_full, f_full, positions);
      const std::vector<float> b = run_kernel(isa, s_part, f_part, positions);
      for (size_t i = 0; i < positions.size(); ++i) {
        for (int c = 0; c < part * d; ++c) {
          ASSERT_EQ(b[i * part * d + c], a[i * full * d + c])
              << isa_name(isa) << " group " << part << " token " << i << " value " << c;
        }
      }
    }
  }
}

// The reference and every kernel against a hand computation, independent of
// both: two query heads over one KV head (GQA 2:1), head_dim 8, f32 storage,
// keys k0 = 0 and k1 = (ln 3 * sqrt 8 / 2, 0, ...). Head 0's query (2, 0, ...)
// scores 0 and ln 3 after the 1 / sqrt(8) scale: weights 1/4 and 3/4; head
// 1's zero query weighs both keys 1/2. At position 0 only k0 is visible.
TEST(Attention, TwoKeysByHand) {
  kv::KvLayout layout;
  layout.n_layers = 1;
  layout.n_kv_heads = 1;
  layout.head_dim = 8;
  layout.format.k_type = layout.format.v_type = KvType::F32;
  kv::KvCache cache(layout, 2);
  const float k[2][8] = {{0}, {static_cast<float>(std::log(3.0) * std::sqrt(8.0) / 2)}};
  const float v[2][8] = {{4, 0, 8, 0, 1, 0, 0, 0}, {0, 4, 0, -4, 1, 0, 0, 0}};
  cache.prepare_write(0, 0, 2);
  for (int p = 0; p < 2; ++p) cache.write(0, 0, p, k[p], v[p]);
  cache.set_length(0, 2);
  const AttentionParams dims{2, 1, 8};
  const float q[16] = {2};  // [head 0 | head 1] at either position
  const std::vector<float> want = {4, 0, 8, 0, 1, 0, 0, 0, 4, 0, 8, 0, 1, 0, 0, 0,      // position 0
                                   1, 3, 2, -3, 1, 0, 0, 0, 2, 2, 4, -2, 1, 0, 0, 0};  // position 1
  const KvView view = cache.view(0, 0, 1);  // no ring: the same view for either query
  std::vector<float> ref(32);
  for (int32_t p = 0; p < 2; ++p) attention_ref(dims, view, q, p, ref.data() + 16 * p);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(ref[i], want[i], 1e-5) << "reference, element " << i;
  const int32_t positions[2] = {0, 1};
  const float* q_rows[2] = {q, q};
  for (Isa isa : supported_isas()) {
    std::vector<float> got(32, -999.0f);
    float* out_rows[2] = {got.data(), got.data() + 16};
    std::vector<float> scratch(static_cast<size_t>(2 * attention_tile_state_floats(dims, 2)));
    attention(isa, dims, view, QueryTile{q_rows, positions, 2, 0}, out_rows, scratch.data());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << isa_name(isa) << ", element " << i;
  }
}

// With one key, softmax is 1 and the output is that key's V as the kernel
// dequantized it: every ISA's loader must give the reference's exact bits
// (the integer paths scale the weight 1 by 255, or 32767 on AVX2, and back:
// 2 roundings).
TEST(Attention, OneKeyReturnsItsValueExactly) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8, KvType::Q4}) {
    for (int d : {8, 16, 32, 64, 128}) {
      const Shape s{2, 1, d, 1, 16, t, t, 0, 5};
      const Fixture f(s);
      const std::vector<float> ref = run_ref(s, f, {0});
      for (Isa isa : supported_isas()) {
        const std::vector<float> got = run_kernel(isa, s, f, {0});
        if (attention_integer_dots(isa, s.dims(), s.k, s.v)) {
          EXPECT_LE(rel_error(got, ref, f.v_max), 3e-7f) << isa_name(isa) << " " << s.name();
        } else {
          EXPECT_EQ(got, ref) << isa_name(isa) << " " << s.name();
        }
      }
    }
  }
}

// Mixed precision's f16 rows read from a step's own copy of them
// (KvView::step: [n_kv_heads][m] rows, position p at row p % m, as
// PagedAttention lays out the rows a step writes) give the bits they give
// read from the ring, on every ISA and in the reference: tiles that take rows
// from both, runs that wrap around the copy's end, K and V both or one in f16.
TEST(Attention, StepRowsReadLikeRingRows) {
  for (KvType v_type : {KvType::Q8, KvType::Q4, KvType::F16}) {
    for (int d : {32, 64}) {
      const Shape s{8, 2, d, 300, 16, KvType::Q8, v_type, 40, 11};
      const Fixture f(s);
      const KvView ring = f.view(s);
      ASSERT_EQ(ring.k_recent_begin, 256);  // recent_begin(299) = (300 - 40) rounded down to 32
      const int64_t begin = 272, m = s.length - begin;  // rows 20..27, then 0..19
      std::vector<uint16_t> k_copy(static_cast<size_t>(s.n_kv_heads * m * d)), v_copy(k_copy.size());
      for (int64_t p = begin; p < s.length; ++p) {
        for (int h = 0; h < s.n_kv_heads; ++h) {
          const size_t at = static_cast<size_t>((h * m + p % m) * d);
          std::memcpy(k_copy.data() + at, ring.recent.k_row(p, h), 2 * static_cast<size_t>(d));
          if (v_type != KvType::F16) std::memcpy(v_copy.data() + at, ring.recent.v_row(p, h), 2 * static_cast<size_t>(d));
        }
      }
      const int32_t one_block = 0;
      KvView step = ring;
      KvPages& rows = step.step;
      rows.k_base = reinterpret_cast<const uint8_t*>(k_copy.data());
      rows.v_base = reinterpret_cast<const uint8_t*>(v_copy.data());
      rows.k_head_stride = rows.v_head_stride = m * 2 * d;  // [head][row]
      rows.block_table = &one_block;
      rows.block_size = static_cast<int32_t>(m);
      rows.ring_rows = m;
      rows.k_type = rows.v_type = KvType::F16;
      rows.k_row_bytes = rows.v_row_bytes = 2 * d;
      step.step_begin = begin;
      const std::vector<int32_t> positions = {299, 272, 273, 287, 290};
      EXPECT_EQ(run_ref(s, f, step, positions), run_ref(s, f, ring, positions)) << s.name();
      for (Isa isa : supported_isas()) {
        EXPECT_EQ(run_kernel(isa, s, f, step, positions), run_kernel(isa, s, f, ring, positions))
            << isa_name(isa) << " " << s.name();
      }
    }
  }
}

// Quantized storage against the same values stored in f32: the bounds that
// q8 (absmax / 127 per row) and q4 (absmax / 8 per 32 values) allow, measured
// on N(0, 1) data with outliers and stated with ~2x headroom.
TEST(Attention, QuantizedStorageStaysWithinItsFormatsBounds) {
  struct Bound {
    KvType k, v;
    int recent;
    float bound;
  };
  const Bound bounds[] = {
      {KvType::F16, KvType::F16, 0, 1e-3f}, {KvType::BF16, KvType::BF16, 0, 1e-2f}, {KvType::Q8, KvType::Q8, 0, 2e-2f},
      {KvType::Q4, KvType::Q4, 0, 2e-1f},   {KvType::Q8, KvType::Q4, 0, 1e-1f},     {KvType::Q4, KvType::Q4, 64, 2e-1f},
  };
  std::mt19937 rng(9);
  for (const Bound& b : bounds) {
    float worst = 0.0f;
    for (int i = 0; i < 4; ++i) {
      const Shape s{8, 2, 64, 64 + static_cast<int64_t>(rng() % 900), 16, b.k, b.v, b.recent, 77u + i};
      const Fixture quantized(s);
      const Fixture exact(s, /*stored_f32=*/true);
      const std::vector<int32_t> positions = query_positions(s, rng);
      const float err =
          rel_error(run_kernel(best_isa(), s, quantized, positions), run_ref(s, exact, positions), exact.v_max);
      worst = std::max(worst, err);
      EXPECT_LE(err, b.bound) << s.name();
    }
    std::printf("K %s V %s recent %d: worst max|diff| / max|v| vs f32 storage = %.3g\n",
                std::string(kv_type_name(b.k)).c_str(), std::string(kv_type_name(b.v)).c_str(), b.recent, worst);
  }
}

// Which shapes and types take the integer paths: q8 / q4 K and V only, with
// head_dim a multiple of 32 and 3 or more query heads to a KV head on AVX2,
// head_dim a multiple of 64 on AVX-512 VNNI; AVX-512 without VNNI, the scalar
// path and NEON keep f32 arithmetic.
TEST(Attention, IntegerPathsAreChosenByTypeHeadDimAndGroup) {
  const AttentionParams d32{8, 2, 32}, d64{8, 2, 64}, d8{8, 4, 8};
  const AttentionParams mha{8, 8, 64}, pairs{8, 4, 64}, threes{15, 5, 64};  // 1, 2, 3 query heads to a KV head
  EXPECT_FALSE(attention_integer_dots(Isa::kAvx2, mha, KvType::Q8, KvType::Q8));
  EXPECT_FALSE(attention_integer_dots(Isa::kAvx2, pairs, KvType::Q4, KvType::Q4));
  EXPECT_EQ(attention_integer_dots(Isa::kAvx2, threes, KvType::Q8, KvType::Q8), static_cast<bool>(TOKAMAK_HAVE_X86_SIMD));
  EXPECT_EQ(attention_integer_dots(Isa::kAvx512Vnni, mha, KvType::Q8, KvType::Q8), static_cast<bool>(TOKAMAK_HAVE_X86_SIMD));
  EXPECT_EQ(attention_integer_dots(Isa::kAvx2, d32, KvType::Q8, KvType::Q4), static_cast<bool>(TOKAMAK_HAVE_X86_SIMD));
  EXPECT_EQ(attention_integer_dots(Isa::kAvx2, d64, KvType::Q4, KvType::Q8), static_cast<bool>(TOKAMAK_HAVE_X86_SIMD));
  EXPECT_FALSE(attention_integer_dots(Isa::kAvx2, d8, KvType::Q8, KvType::Q8));
  EXPECT_FALSE(attention_integer_dots(Isa::kAvx2, d64, KvType::Q8, KvType::F16));
  EXPECT_FALSE(attention_integer_dots(Isa::kAvx2, d64, KvType::BF16, KvType::Q8));
  EXPECT_FALSE(attention_integer_dots(Isa::kAvx512, d64, KvType::Q8, KvType::Q8));
  EXPECT_FALSE(attention_integer_dots(Isa::kAvx512Vnni, d32, KvType::Q8, KvType::Q8));
  EXPECT_EQ(attention_integer_dots(Isa::kAvx512Vnni, d64, KvType::Q8, KvType::Q8), static_cast<bool>(TOKAMAK_HAVE_X86_SIMD));
  EXPECT_FALSE(attention_integer_dots(Isa::kScalar, d64, KvType::Q8, KvType::Q8));
  EXPECT_FALSE(attention_integer_dots(Isa::kNeon, d64, KvType::Q8, KvType::Q8));
}

TEST(KvFormat, NamesRoundTripAndHeadDimsAreChecked) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::BF16, KvType::Q8, KvType::Q4}) {
    EXPECT_EQ(kv_type_from_name(kv_type_name(t)), t);
  }
  EXPECT_FALSE(kv_type_from_name("q5").has_value());
  EXPECT_THROW(check_kv_head_dim(KvType::Q4, 40), Error);
  EXPECT_THROW(check_kv_head_dim(KvType::F16, kMaxHeadDim + 1), Error);
  check_kv_head_dim(KvType::Q4, 24);
  EXPECT_EQ(kv_head_row_bytes(KvType::Q4, 24), 12 + 2);
}

// Round-trip error of each quantizer on one row, against its format's bound.
TEST(KvFormat, QuantizersRoundTripWithinHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int d : {4, 8, 32, 64, 128}) {
    std::vector<float> x(static_cast<size_t>(d)), y(static_cast<size_t>(d));
    std::vector<uint8_t> row(static_cast<size_t>(kv_head_row_bytes(KvType::F32, d)));
    for (float& v : x) v = normal(rng);
    x[0] = 0.0f;
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    quantize_kv_row(KvType::Q8, x.data(), d, row.data());
    dequantize_kv_row(KvType::Q8, row.data(), d, y.data());
    for (int i = 0; i < d; ++i) EXPECT_LE(std::fabs(x[i] - y[i]), amax / 127.0f * 0.5001f) << "q8 d " << d;
    EXPECT_EQ(y[0], 0.0f);
    quantize_kv_row(KvType::Q4, x.data(), d, row.data());
    dequantize_kv_row(KvType::Q4, row.data(), d, y.data());
    const int g = kv_q4_group(d);
    for (int k = 0; k < d / g; ++k) {
      float gmax = 0.0f;
      for (int i = 0; i < g; ++i) gmax = std::max(gmax, std::fabs(x[k * g + i]));
      // Step gmax / 8 (rounded scale adds ~2^-11), clamping at +7 steps costs one more step at most.
      for (int i = 0; i < g; ++i)
        EXPECT_LE(std::fabs(x[k * g + i] - y[k * g + i]), gmax / 8.0f * 1.01f) << "q4 d " << d;
    }
    std::vector<float> zeros(static_cast<size_t>(d), 0.0f);
    for (KvType t : {KvType::Q8, KvType::Q4}) {
      quantize_kv_row(t, zeros.data(), d, row.data());
      dequantize_kv_row(t, row.data(), d, y.data());
      EXPECT_EQ(y, zeros);
    }
  }
}

}  // namespace
}  // namespace tokamak::kernels
