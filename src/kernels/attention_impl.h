// Internal to attention_{scalar,avx2,avx512}.cpp: the tile loop of
// attention_chunk, written once over a vector-ops type V. Each of those files
// includes this inside its target region and instantiates it with its own V
// (in an anonymous namespace), so every instantiation is compiled for its ISA
// and stays local to its file.
//
// V provides, for arrays whose length is a multiple of V::kWidth:
//   dequant_row(KvType, const uint8_t* row, int d, float* dst)  bit-exact with dequantize_kv_row
//   dot(const float* a, const float* b, int d) -> float         fixed order
//   exp_shift(float* s, int n, float m)                          s[j] = exp(s[j] - m)
//   sum(const float* s, int n) -> float                          fixed order
//   exp1(float x) -> float                                       the same exp, one value
//   axpy_tile(float* acc, float c, const float* p, const float* vt, int n, int d)
//       acc = acc * c + sum_j p[j] * vt[j * d ..], j in [0, n) in order
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention.h"

namespace tokamak::kernels::detail {

// dst[j * d ..] = K (or V) of kv head `head` at positions t0 + j, j < n.
template <class V>
void load_tile(const KvView& kv, bool keys, int head, int64_t t0, int64_t n, int d, float* dst) {
  const int64_t split = keys ? kv.k_recent_begin : kv.v_recent_begin;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t pos = t0 + j;
    const KvPages& pages = pos >= split ? kv.recent : kv.main;
    const uint8_t* row = keys ? pages.k_row(pos, head) : pages.v_row(pos, head);
    V::dequant_row(keys ? pages.k_type : pages.v_type, row, d, dst + j * d);
  }
}

// One online-softmax step of one query over keys [jb, je) of a tile.
// state: [m, l, acc[d]]; s: kKeyTile floats of scratch.
template <class V>
void update_query(const AttentionParams& p, const float* q, const float* kt, const float* vt, int jb, int je,
                  float scale, float* state, float* s) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int d = p.head_dim;
  float tile_max = kNegInf;
  for (int j = jb; j < je; ++j) s[j] = V::dot(q, kt + static_cast<int64_t>(j) * d, d) * scale;
  if (p.softcap > 0.0f) {
    for (int j = jb; j < je; ++j) s[j] = p.softcap * std::tanh(s[j] / p.softcap);
  }
  for (int j = jb; j < je; ++j) tile_max = std::max(tile_max, s[j]);
  // Whole vectors from a multiple of the width; keys outside [jb, je) -> exp 0.
  const int vb = jb / V::kWidth * V::kWidth;
  const int ve = (je + V::kWidth - 1) / V::kWidth * V::kWidth;
  for (int j = vb; j < jb; ++j) s[j] = kNegInf;
  for (int j = je; j < ve; ++j) s[j] = kNegInf;
  const float m = state[0];
  const float m_new = std::max(m, tile_max);
  const float corr = m == kNegInf ? 0.0f : V::exp1(m - m_new);
  V::exp_shift(s + vb, ve - vb, m_new);
  state[0] = m_new;
  state[1] = state[1] * corr + V::sum(s + vb, ve - vb);
  V::axpy_tile(state + 2, corr, s + jb, vt + static_cast<int64_t>(jb) * d, je - jb, d);
}

template <class V>
void chunk_kernel(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk, float* partial) {
  const int d = p.head_dim;
  const int group = p.group();
  const int64_t sf = attention_state_floats(p);
  attention_reset(p, static_cast<int64_t>(tile.n_tokens) * group, partial);
  int64_t max_pos = -1;
  int64_t min_first = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < tile.n_tokens; ++i) {
    max_pos = std::max<int64_t>(max_pos, tile.positions[i]);
    min_first = std::min(min_first, p.first_key(tile.positions[i]));
  }
  // Tiles stay aligned to multiples of kKeyTile whatever the window skips.
  const int64_t k_begin = std::max(chunk * kKeyChunk, min_first / kKeyTile * kKeyTile);
  const int64_t k_end = std::min((chunk + 1) * kKeyChunk, max_pos + 1);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  alignas(64) float kt[kKeyTile * kMaxHeadDim];
  alignas(64) float vt[kKeyTile * kMaxHeadDim];
  alignas(64) float s[kKeyTile];
  for (int64_t t0 = k_begin; t0 < k_end; t0 += kKeyTile) {
    const int64_t n_tile = std::min(kKeyTile, k_end - t0);
    load_tile<V>(kv, true, tile.kv_head, t0, n_tile, d, kt);
    load_tile<V>(kv, false, tile.kv_head, t0, n_tile, d, vt);
    for (int i = 0; i < tile.n_tokens; ++i) {
      const int64_t pos = tile.positions[i];
      const int jb = static_cast<int>(std::clamp<int64_t>(p.first_key(pos) - t0, 0, n_tile));
      const int je = static_cast<int>(std::clamp<int64_t>(pos + 1 - t0, 0, n_tile));
      if (jb >= je) continue;
      for (int g = 0; g < group; ++g) {
        const float* q = tile.q[i] + (static_cast<int64_t>(tile.kv_head) * group + g) * d;
        update_query<V>(p, q, kt, vt, jb, je, scale, partial + (static_cast<int64_t>(i) * group + g) * sf, s);
      }
    }
  }
}

}  // namespace tokamak::kernels::detail
