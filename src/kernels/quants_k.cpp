// The K-quants: 256-element super-blocks of 16 or 32-element sub-blocks whose
// scales (and mins) are themselves quantized against one fp16 per super-block.
// Also Q8_K, the activation format that K-quant dot products pair with.
//
// The quantizers reproduce ggml's reference quantizers (quantize_row_q*_K_ref,
// used without an importance matrix) operation for operation, so that the
// bytes equal ggml's: the scale searches below keep ggml's float expressions
// and evaluation order, its tie-breaking (nearest_int rounds ties to even)
// and its integer truncations.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels::detail {
namespace {

// Below this, a group is all zeros (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Value of largest magnitude, the first one on ties.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// Symmetric quants L[i] in [0, 2*nmax) (stored with +nmax) and their scale,
// chosen to minimise sum x^2 (x - scale*q)^2 over 19 candidate scales
// (ggml's make_qx_quants with rmse_type 1 and no importance weights).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  auto quant = [&](float iscale, int i) { return std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i]))); };
  float iscale = -fnmax / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = quant(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(fnmax + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(quant(iscale, i));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + quant(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric quants for Q3_K: the first guess, then up to 5 passes that move
// single quants when that lowers the x^2-weighted error (ggml's make_q3_quants
// with do_rmse). L[i] in [0, 2*nmax).
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  auto clamp = [&](int l) { return std::max(-nmax, std::min(nmax - 1, l)); };
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0.0f) {
        float sl2 = suml2 - w * li * li;
        const int new_l = clamp(nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          const float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Affine quants x ~ scale * L - the_min with L in [0, nmax]: a least-squares
// fit of scale and min for each of nstep+1 candidate grids, keeping the one of
// least weighted error (|diff| if use_mad, else diff^2). ggml's make_qkx2_quants.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  auto quant = [&](float iscale, float lo, int i) {
    return std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - lo))));
  };
  auto error = [&](float scale, float lo, const uint8_t* q) {
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      float diff = scale * static_cast<float>(q[i]) + lo - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      err += weights[i] * diff;
    }
    return err;
  };
  float iscale = fnmax / (max - min);
  float scale = 1.0f / iscale;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(quant(iscale, min, i));
  float best_error = error(scale, min, L);
  for (int is = 0; is <= nstep; ++is) {
    // ggml updates min inside this loop, so later candidates start from the best fit so far.
    iscale = (rmin + rdelta * static_cast<float>(is) + fnmax) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = quant(iscale, min, i);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      const float cur_error = error(this_scale, this_min, Laux);
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// The inverse of unpack_2bit (quants_impl.h) over one super-block.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
    }
  }
}


// The sub-block scales (and mins) of Q4_K/Q5_K quantized to 6 bits against
// their maxima, then each sub-block requantized with its stored scale and min.
void quant_q45_k(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out, uint16_t* dmin_out,
                 uint8_t scales_out[12], uint8_t* L) {
  uint8_t Laux[32];
  float weights[32];
  float mins[8];
  float scales[8];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = make_qkx2_quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8];
  uint8_t lm[8];
  for (int j = 0; j < 8; ++j) {
    // ggml stores nearest_int into a uint8_t before clamping to 63.
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  pack_scale_min_k4(ls, lm, scales_out);
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, scales_out, &sc, &m);
    const float d = fp16_to_fp32(*d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(*dmin_out) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int((x[32 * j + ii] + dm) / d))));
    }
  }
}

}  // namespace

void dequant_q2_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ2_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float min = fp16_to_fp32(b.dmin);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(b.scales[s] & 0xf);
      const float ml = min * static_cast<float>(b.scales[s] >> 4);
      for (int e = 16 * s; e < 16 * s + 16; ++e) dst[e] = dl * static_cast<float>(unpack_2bit(b.qs, e)) - ml;
    }
  }
}

void dequant_q3_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ3_K>(src, i);
    const float d_all = fp16_to_fp32(b.d);
    for (int s = 0; s < 16; ++s) {
      const float dl = d_all * static_cast<float>(q3k_scale(b.scales, s));
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        const bool high = (b.hmask[e % 32] >> (e / 32)) & 1;
        dst[e] = dl * static_cast<float>(unpack_2bit(b.qs, e) - (high ? 0 : 4));
      }
    }
  }
}

void dequant_q4_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ4_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float min = fp16_to_fp32(b.dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      scale_min_k4(s, b.scales, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = min * static_cast<float>(m);
      const uint8_t* q = b.qs + 32 * (s / 2);
      for (int l = 0; l < 32; ++l) {
        const int v = s % 2 == 0 ? q[l] & 0xf : q[l] >> 4;
        dst[32 * s + l] = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

void dequant_q5_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ5_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float min = fp16_to_fp32(b.dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      scale_min_k4(s, b.scales, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = min * static_cast<float>(m);
      const uint8_t* q = b.qs + 32 * (s / 2);
      for (int l = 0; l < 32; ++l) {
        const int v = (s % 2 == 0 ? q[l] & 0xf : q[l] >> 4) + (((b.qh[l] >> s) & 1) << 4);
        dst[32 * s + l] = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

void dequant_q6_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    // Per 128 elements: 64 bytes of ql and 32 of qh. Element 32k + l takes
    // the low (k < 2) or high (k >= 2) nibble of ql[l + 32*(k%2)] and bits
    // 2k..2k+1 of qh[l].
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = e % 128 / 32, l = e % 32;
      const uint8_t lo = b.ql[64 * h + l + 32 * (k % 2)];
      const int q = ((k < 2 ? lo & 0xf : lo >> 4) | ((b.qh[32 * h + l] >> (2 * k)) & 3) << 4) - 32;
      dst[e] = d * static_cast<float>(b.scales[e / 16]) * static_cast<float>(q);
    }
  }
}

void dequant_q8_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ8_K>(src, i);
    for (int e = 0; e < kQK_K; ++e) dst[e] = b.d * static_cast<float>(b.qs[e]);
  }
}

void quant_q2_k(const float* src, void* dst, int64_t nb) {
  constexpr float kQ4Scale = 15.0f;
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    uint8_t L[kQK_K];
    uint8_t Laux[16];
    float weights[16];
    float mins[16];
    float scales[16];
    float max_scale = 0.0f;
    float max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    BlockQ2_K b{};
    if (max_scale > 0.0f) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      b.d = fp32_to_fp16(max_scale / kQ4Scale);
    }
    if (max_min > 0.0f) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j) b.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      b.dmin = fp32_to_fp16(max_min / kQ4Scale);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(b.d) * static_cast<float>(b.scales[j] & 0xf);
      if (d == 0.0f) continue;
      const float dm = fp16_to_fp32(b.dmin) * static_cast<float>(b.scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, nearest_int((src[16 * j + ii] + dm) / d))));
      }
    }
    pack_2bit(L, b.qs);
    store_block(dst, i, b);
  }
}

void quant_q3_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = make_q3_quants(16, 4, src + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockQ3_K b{};
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        // ggml truncates nearest_int to int8_t before clamping.
        const int l = std::max(-32, std::min(31, static_cast<int>(static_cast<int8_t>(nearest_int(iscale * scales[j]))))) + 32;
        if (j < 8) {
          b.scales[j] = static_cast<uint8_t>(l & 0xf);
        } else {
          b.scales[j - 8] |= static_cast<uint8_t>((l & 0xf) << 4);
        }
        b.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      b.d = fp32_to_fp16(1.0f / iscale);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(b.d) * static_cast<float>(q3k_scale(b.scales, j));
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(src[16 * j + ii] / d))) + 4);
      }
    }
    uint8_t low[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {
      if (L[e] > 3) b.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
      low[e] = static_cast<uint8_t>(L[e] > 3 ? L[e] - 4 : L[e]);
    }
    pack_2bit(low, b.qs);
    store_block(dst, i, b);
  }
}

void quant_q4_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    uint8_t L[kQK_K];
    BlockQ4_K b{};
    quant_q45_k(src, 15, -1.0f, 20, &b.d, &b.dmin, b.scales, L);
    for (int j = 0; j < kQK_K; j += 64) {
      for (int l = 0; l < 32; ++l) b.qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 4);
    }
    store_block(dst, i, b);
  }
}

void quant_q5_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    uint8_t L[kQK_K];
    BlockQ5_K b{};
    quant_q45_k(src, 31, -0.5f, 15, &b.d, &b.dmin, b.scales, L);
    for (int j = 0; j < kQK_K; j += 64) {
      const int c = j / 64;
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[j + l];
        const int l2 = L[j + l + 32];
        b.qh[l] |= static_cast<uint8_t>((l1 >> 4) << (2 * c) | (l2 >> 4) << (2 * c + 1));
        b.qs[j / 2 + l] = static_cast<uint8_t>((l1 & 0xf) | (l2 & 0xf) << 4);
      }
    }
    store_block(dst, i, b);
  }
}

void quant_q6_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0.0f;
    float max_abs_scale = 0.0f;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = make_qx_quants(16, 32, src + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    BlockQ6_K b{};
    if (max_abs_scale < kGroupMaxEps) {
      store_block(dst, i, b);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    b.d = fp32_to_fp16(1.0f / iscale);
    for (int ib = 0; ib < 16; ++ib) b.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(b.d) * static_cast<float>(b.scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, nearest_int(src[16 * j + ii] / d))) + 32);
      }
    }
    // Layout as in dequant_q6_k.
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = e % 128 / 32, l = e % 32;
      const int q = L[e];
      b.ql[64 * h + l + 32 * (k % 2)] |= static_cast<uint8_t>((q & 0xf) << (k < 2 ? 0 : 4));
      b.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
    }
    store_block(dst, i, b);
  }
}

// Activations: symmetric 8-bit with the sign of the largest magnitude mapped
// to -127, rounding ties to even; bsums feed the K-quant dot products' mins.
void quant_q8_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    BlockQ8_K b{};
    const float max = signed_absmax(src, kQK_K);
    if (max != 0.0f) {
      const float iscale = -127.0f / max;
      for (int e = 0; e < kQK_K; ++e) b.qs[e] = static_cast<int8_t>(std::min(127, nearest_int(iscale * src[e])));
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int e = 16 * j; e < 16 * j + 16; ++e) sum += b.qs[e];
        b.bsums[j] = static_cast<int16_t>(sum);
      }
      b.d = 1.0f / iscale;
    }
    store_block(dst, i, b);
  }
}

}  // namespace tokamak::kernels::detail
