#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tokamak::kernels {

// The per-ISA tile loops (attention_scalar.cpp, attention_avx2.cpp, attention_avx512.cpp) and the
// integer ones for q8 / q4 K and V (attention_avx2_int_impl.h for AVX2 and AVX-VNNI, attention_avx512_vnni.cpp).
void attention_chunk_scalar(const AttentionParams&, const KvView&, const QueryTile&, int64_t, float*);
#if TOKAMAK_HAVE_X86_SIMD
void attention_chunk_avx2(const AttentionParams&, const KvView&, const QueryTile&, int64_t, float*);
void attention_chunk_avx512(const AttentionParams&, const KvView&, const QueryTile&, int64_t, float*);
void attention_chunk_avx512_vnni_int(const AttentionParams&, const KvView&, const QueryTile&, int64_t, float*);
void attention_chunk_avx2_int(const AttentionParams&, const KvView&, const QueryTile&, int64_t, float*);
void attention_chunk_avx_vnni_int(const AttentionParams&, const KvView&, const QueryTile&, int64_t, float*);
#endif

void attention_reset(const AttentionParams& dims, int64_t n_queries, float* state) {
  const int64_t sf = attention_state_floats(dims);
  for (int64_t q = 0; q < n_queries; ++q) {
    state[q * sf] = -std::numeric_limits<float>::infinity();
    std::fill(state + q * sf + 1, state + (q + 1) * sf, 0.0f);
  }
}

int64_t attention_chunks(const QueryTile& tile) {
  int64_t max_pos = -1;
  for (int i = 0; i < tile.n_tokens; ++i) max_pos = std::max<int64_t>(max_pos, tile.positions[i]);
  return (max_pos + kKeyChunk) / kKeyChunk;
}

int64_t attention_first_chunk(const AttentionParams& params, const QueryTile& tile) {
  int64_t first = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < tile.n_tokens; ++i) first = std::min(first, params.first_key(tile.positions[i]));
  return tile.n_tokens > 0 ? first / kKeyChunk : 0;
}

bool attention_integer_dots(Isa isa, const AttentionParams& dims, KvType k, KvType v) {
  if (!TOKAMAK_HAVE_X86_SIMD || !kv_type_is_quantized(k) || !kv_type_is_quantized(v)) return false;
  // The AVX2 kernel puts one token's query heads of a KV head across its 8
  // lanes: with 1 or 2 to a KV head most lanes idle, and dequantizing to f32
  // wins (attention_bench, decode over 2,048 keys, heads of 64, 32 query heads
  // (30 for 3), integer against f32, us: 1 to a KV head q8 1,586-1,610 /
  // 1,092-1,112, q4 2,136-2,202 / 1,247-1,289; 2: q8 803-812 / 718-722, q4
  // 1,089-1,138 / 786-811; 3: q8 681-724 / 807-859, q4 960-1,008 / 962-989;
  // 4: q8 400-410 / 483-489, q4 547-564 / 520-521). The group is the model's,
  // never the batch's.
  if (isa == Isa::kAvx2 || isa == Isa::kAvxVnni) return dims.head_dim % 32 == 0 && dims.group() >= kAvx2IntegerMinGroup;
  return isa >= Isa::kAvx512Vnni && isa != Isa::kNeon && dims.head_dim % 64 == 0;
}

void attention_chunk(Isa isa, const AttentionParams& dims, const KvView& kv, const QueryTile& tile, int64_t chunk,
                     float* partial) {
#if TOKAMAK_HAVE_X86_SIMD
  if (attention_integer_dots(isa, dims, kv.main.k_type, kv.main.v_type)) {
    if (isa == Isa::kAvx2) return attention_chunk_avx2_int(dims, kv, tile, chunk, partial);
    if (isa == Isa::kAvxVnni) return attention_chunk_avx_vnni_int(dims, kv, tile, chunk, partial);
    return attention_chunk_avx512_vnni_int(dims, kv, tile, chunk, partial);
  }
  if (isa >= Isa::kAvx512 && isa != Isa::kNeon && dims.head_dim % 16 == 0) return attention_chunk_avx512(dims, kv, tile, chunk, partial);
  if (isa >= Isa::kAvx2 && isa != Isa::kNeon && dims.head_dim % 8 == 0) return attention_chunk_avx2(dims, kv, tile, chunk, partial);
#endif
  attention_chunk_scalar(dims, kv, tile, chunk, partial);
}

void attention_fold(const AttentionParams& dims, int64_t n_queries, const float* partial, float* running) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t sf = attention_state_floats(dims);
  for (int64_t q = 0; q < n_queries; ++q) {
    const float* p = partial + q * sf;
    float* r = running + q * sf;
    if (p[0] == kNegInf) continue;  // no keys in this chunk
    if (r[0] == kNegInf) {
      std::copy(p, p + sf, r);
      continue;
    }
    const float m = std::max(r[0], p[0]);
    const float a = std::exp(r[0] - m);
    const float b = std::exp(p[0] - m);
    r[0] = m;
    for (int64_t i = 1; i < sf; ++i) r[i] = r[i] * a + p[i] * b;
  }
}

void attention_finish(const AttentionParams& dims, const QueryTile& tile, const float* running, float* const* out) {
  const int d = dims.head_dim;
  const int group = dims.group();
  const int64_t sf = attention_state_floats(dims);
  for (int i = 0; i < tile.n_tokens; ++i) {
    for (int g = 0; g < group; ++g) {
      const float* r = running + (static_cast<int64_t>(i) * group + g) * sf;
      float* o = out[i] + (static_cast<int64_t>(tile.kv_head) * group + g) * d;
      // l >= 1 whenever the query saw a key (its max term is exp(0)).
      const float l = r[1];
      for (int k = 0; k < d; ++k) o[k] = l > 0.0f ? r[2 + k] / l : 0.0f;
    }
  }
}

void attention(Isa isa, const AttentionParams& dims, const KvView& kv, const QueryTile& tile, float* const* out,
               float* scratch) {
  const int64_t n_queries = static_cast<int64_t>(tile.n_tokens) * dims.group();
  float* running = scratch;
  float* partial = scratch + attention_tile_state_floats(dims, tile.n_tokens);
  attention_reset(dims, n_queries, running);
  const int64_t chunks = attention_chunks(tile);
  for (int64_t c = attention_first_chunk(dims, tile); c < chunks; ++c) {
    attention_chunk(isa, dims, kv, tile, c, partial);
    attention_fold(dims, n_queries, partial, running);
  }
  attention_finish(dims, tile, running, out);
}

void attention_ref(const AttentionParams& dims, const KvView& kv, const float* q, int64_t pos, float* out) {
  const int d = dims.head_dim;
  const int group = dims.group();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const int64_t n = pos + 1;
  const int64_t first = dims.first_key(pos);
  std::vector<float> k(static_cast<size_t>(n * d)), v(static_cast<size_t>(n * d));
  std::vector<double> scores(static_cast<size_t>(n), -std::numeric_limits<double>::infinity());
  for (int kvh = 0; kvh < dims.n_kv_heads; ++kvh) {
    for (int64_t p = first; p < n; ++p) {
      const KvPages& kp = kv.pages(p, true);
      const KvPages& vp = kv.pages(p, false);
      dequantize_kv_row(kp.k_type, kp.k_row(p, kvh), d, k.data() + p * d);
      dequantize_kv_row(vp.v_type, vp.v_row(p, kvh), d, v.data() + p * d);
    }
    for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
      const float* qh = q + static_cast<int64_t>(h) * d;
      double max_score = -std::numeric_limits<double>::infinity();
      for (int64_t p = first; p < n; ++p) {
        double dot = 0.0;
        for (int i = 0; i < d; ++i) dot += static_cast<double>(qh[i]) * k[static_cast<size_t>(p * d + i)];
        double s = dot * scale;
        if (dims.softcap > 0.0f) s = dims.softcap * std::tanh(s / dims.softcap);
        scores[static_cast<size_t>(p)] = s;
        max_score = std::max(max_score, s);
      }
      double sum = 0.0;
      for (int64_t p = first; p < n; ++p)
        sum += (scores[static_cast<size_t>(p)] = std::exp(scores[static_cast<size_t>(p)] - max_score));
      float* oh = out + static_cast<int64_t>(h) * d;
      for (int i = 0; i < d; ++i) {
        double acc = 0.0;
        for (int64_t p = first; p < n; ++p) acc += scores[static_cast<size_t>(p)] * v[static_cast<size_t>(p * d + i)];
        oh[i] = static_cast<float>(acc / sum);
      }
    }
  }
}

}  // namespace tokamak::kernels
