// attention_chunk for any CPU: the tile loop with one lane.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention.h"
#include "kernels/attention_impl.h"
#include "kernels/kv_format.h"

namespace tokamak::kernels {
namespace {

struct ScalarOps {
  static constexpr int kWidth = 1;
  static constexpr bool kTransposedScores = false;

  static void dequant_row(KvType t, const uint8_t* row, int d, float* dst) { dequantize_kv_row(t, row, d, dst); }
  static float dot(const float* a, const float* b, int d) {
    float acc = 0.0f;
    for (int i = 0; i < d; ++i) acc += a[i] * b[i];
    return acc;
  }
  static float exp1(float x) { return std::exp(x); }
  static void exp_shift(float* s, int n, float m) {
    for (int j = 0; j < n; ++j) s[j] = std::exp(s[j] - m);
  }
  static float sum(const float* s, int n) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc += s[j];
    return acc;
  }
  static float max(const float* s, int n) {
    float m = s[0];
    for (int j = 1; j < n; ++j) m = std::max(m, s[j]);
    return m;
  }
  static void scale(float* s, int n, float c) {
    for (int j = 0; j < n; ++j) s[j] *= c;
  }
  static void axpy_tile(float* acc, float c, const float* p, const float* vt, int n, int d) {
    for (int i = 0; i < d; ++i) {
      float a = acc[i] * c;
      for (int j = 0; j < n; ++j) a += p[j] * vt[static_cast<int64_t>(j) * d + i];
      acc[i] = a;
    }
  }
};

}  // namespace

void attention_chunk_scalar(const AttentionParams& dims, const KvView& kv, const QueryTile& tile, int64_t chunk,
                            float* partial) {
  detail::chunk_kernel<ScalarOps>(dims, kv, tile, chunk, partial);
}

}  // namespace tokamak::kernels
