#include "kernels/attention.h"

#include <cmath>

#include "kernels/ops.h"

namespace tokamak::kernels {

void attention_ref(const float* q, int n_heads, int n_kv_heads, int head_dim, const KvPages& kv, int64_t key_begin,
                   int64_t key_end, float softcap, int head_begin, int head_end, float* out, float* scores) {
  const int64_t n_keys = key_end - key_begin;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int group = n_heads / n_kv_heads;
  for (int h = head_begin; h < head_end; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * head_dim;
    const int64_t kv_off = static_cast<int64_t>(h / group) * head_dim;
    for (int64_t p = 0; p < n_keys; ++p) {
      const float* k = kv.k_row(key_begin + p) + kv_off;
      float dot = 0.0f;
      for (int i = 0; i < head_dim; ++i) dot += qh[i] * k[i];
      scores[p] = softcap > 0.0f ? softcap * std::tanh(dot * scale / softcap) : dot * scale;
    }
    softmax(scores, n_keys);
    float* oh = out + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < head_dim; ++i) oh[i] = 0.0f;
    for (int64_t p = 0; p < n_keys; ++p) {
      const float* v = kv.v_row(key_begin + p) + kv_off;
      const float a = scores[p];
      for (int i = 0; i < head_dim; ++i) oh[i] += a * v[i];
    }
  }
}

}  // namespace tokamak::kernels
