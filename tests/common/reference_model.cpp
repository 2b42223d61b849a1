#include "common/reference_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <cstring>
#include <stdexcept>

#include "core/half.h"
#include "kernels/quants.h"

namespace tokamak::testing {
namespace {

using Matrix = std::vector<double>;  // row-major [rows, cols]

struct Tensor {
  Matrix data;
  int64_t cols = 0, rows = 0;
};

Tensor load(const io::GgufFile& f, const std::string& name) {
  const io::GgufTensorInfo* info = f.find_tensor(name);
  if (info == nullptr) throw std::runtime_error("reference model: missing " + name);
  const TensorView v = f.view(*info);
  Tensor t;
  t.cols = v.ne[0];
  t.rows = v.n_rows();
  std::vector<float> row(static_cast<size_t>(t.cols));
  for (int64_t r = 0; r < t.rows; ++r) {
    kernels::dequantize_row(v.type, v.row(r), row.data(), t.cols);
    t.data.insert(t.data.end(), row.begin(), row.end());
  }
  return t;
}

std::vector<double> matvec(const Tensor& w, const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(w.rows), 0.0);
  for (int64_t r = 0; r < w.rows; ++r) {
    double s = 0.0;
    for (int64_t i = 0; i < w.cols; ++i) s += w.data[static_cast<size_t>(r * w.cols + i)] * x[static_cast<size_t>(i)];
    y[static_cast<size_t>(r)] = s;
  }
  return y;
}

std::vector<double> rms_norm(const std::vector<double>& x, const Tensor& w, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w.data[i];
  return y;
}

// The angle and magnitude of rotation pair i at position pos, from the formulas
// of RoPE, linear interpolation and YaRN (Peng et al. 2023), in double.
void rope_angle(const ModelConfig& c, const std::vector<double>& freq_factors, int64_t pos, int i, double* theta,
                double* mscale) {
  const double n_dims = c.rope_dim;
  double freq = std::pow(static_cast<double>(c.rope_freq_base), -2.0 * i / n_dims);
  if (!freq_factors.empty()) freq /= freq_factors[static_cast<size_t>(i)];
  const double extrap = static_cast<double>(pos) * freq;
  *mscale = 1.0;
  if (c.rope_scaling == RopeScaling::None) {
    *theta = extrap;
    return;
  }
  const double s = c.rope_scaling_factor;
  const double interp = extrap / s;
  if (c.rope_scaling == RopeScaling::Linear) {
    *theta = interp;
    return;
  }
  // YaRN: dims that rotate fast (many turns over the original context) keep
  // their frequency, slow ones are interpolated, with a linear ramp between.
  const double n_orig = c.rope_n_ctx_orig > 0 ? c.rope_n_ctx_orig : c.n_ctx_train;
  auto dim_at = [&](double n_rot) {
    return n_dims * std::log(n_orig / (n_rot * 2.0 * std::numbers::pi)) / (2.0 * std::log(static_cast<double>(c.rope_freq_base)));
  };
  const double low = std::max(0.0, std::floor(dim_at(c.yarn_beta_fast)));
  const double high = std::min(n_dims - 1, std::ceil(dim_at(c.yarn_beta_slow)));
  const double ramp = 1.0 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
  *theta = interp * (1.0 - ramp) + extrap * ramp;
  *mscale = c.yarn_attn_factor * (1.0 + 0.1 * std::log(s));
}

void rope(const ModelConfig& c, const std::vector<double>& ff, int64_t pos, double* head) {
  const int half = c.rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    double theta = 0.0, m = 1.0;
    rope_angle(c, ff, pos, i, &theta, &m);
    const int a = c.rope_style == kernels::RopeStyle::Norm ? 2 * i : i;
    const int b = c.rope_style == kernels::RopeStyle::Norm ? 2 * i + 1 : i + half;
    const double x0 = head[a], x1 = head[b];
    head[a] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * m;
    head[b] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * m;
  }
}

// The hyper-parameters, read plainly from the metadata keys llama.cpp defines.
ModelConfig read_config(const io::GgufFile& f) {
  ModelConfig c;
  const std::string a = f.get_string("general.architecture").value();
  const std::string p = a + ".";
  auto i = [&](const std::string& key, int64_t def) { return static_cast<int32_t>(f.get_int(p + key).value_or(def)); };
  auto x = [&](const std::string& key, double def) { return static_cast<float>(f.get_float(p + key).value_or(def)); };
  c.n_embd = i("embedding_length", 0);
  c.n_layers = i("block_count", 0);
  c.n_heads = i("attention.head_count", 0);
  c.n_kv_heads = i("attention.head_count_kv", c.n_heads);
  c.n_ff = i("feed_forward_length", 0);
  c.n_ctx_train = i("context_length", 0);
  c.head_dim = c.n_embd / c.n_heads;
  c.rope_dim = i("rope.dimension_count", c.head_dim);
  c.rope_freq_base = x("rope.freq_base", 10000.0);
  c.rms_eps = x("attention.layer_norm_rms_epsilon", 1e-5);
  // qwen2 rotates the two halves of each head (GPT-NeoX style) and has QKV biases.
  c.rope_style = a == "qwen2" ? kernels::RopeStyle::Neox : kernels::RopeStyle::Norm;
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  const std::string scaling = f.get_string(p + "rope.scaling.type").value_or("none");
  c.rope_scaling = scaling == "linear" ? RopeScaling::Linear : scaling == "yarn" ? RopeScaling::Yarn : RopeScaling::None;
  c.rope_scaling_factor = x("rope.scaling.factor", 1.0);
  c.rope_n_ctx_orig = i("rope.scaling.original_context_length", 0);
  c.rope_freq_factors = f.find_tensor("rope_freqs.weight") != nullptr;
  c.sliding_window = i("attention.sliding_window", 0);
  c.attn_logit_softcap = x("attn_logit_softcapping", 0.0);
  c.final_logit_softcap = x("final_logit_softcapping", 0.0);
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  return c;
}

}  // namespace

std::vector<double> reference_logits(const io::GgufFile& f, const std::vector<int32_t>& tokens) {
  const ModelConfig c = read_config(f);
  const Tensor emb = load(f, "token_embd.weight");
  const Tensor out_norm = load(f, "output_norm.weight");
  const Tensor out = c.tied_output ? emb : load(f, "output.weight");
  std::vector<double> ff;
  if (c.rope_freq_factors) ff = load(f, "rope_freqs.weight").data;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  // The residual stream of every position, processed layer by layer.
  std::vector<std::vector<double>> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const auto* row = &emb.data[static_cast<size_t>(tokens[static_cast<size_t>(t)] * emb.cols)];
    x[static_cast<size_t>(t)].assign(row, row + emb.cols);
    for (double& v : x[static_cast<size_t>(t)]) v *= c.embedding_scale;
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const Tensor wq = load(f, p + "attn_q.weight"), wk = load(f, p + "attn_k.weight"), wv = load(f, p + "attn_v.weight");
    const Tensor wo = load(f, p + "attn_output.weight"), an = load(f, p + "attn_norm.weight");
    const Tensor fn = load(f, p + "ffn_norm.weight"), wg = load(f, p + "ffn_gate.weight");
    const Tensor wu = load(f, p + "ffn_up.weight"), wd = load(f, p + "ffn_down.weight");
    std::vector<std::vector<double>> q(static_cast<size_t>(n)), k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<double> xn = rms_norm(x[static_cast<size_t>(t)], an, c.rms_eps);
      q[static_cast<size_t>(t)] = matvec(wq, xn);
      k[static_cast<size_t>(t)] = matvec(wk, xn);
      v[static_cast<size_t>(t)] = matvec(wv, xn);
      if (c.qkv_bias) {
        const Tensor bq = load(f, p + "attn_q.bias"), bk = load(f, p + "attn_k.bias"), bv = load(f, p + "attn_v.bias");
        for (size_t i = 0; i < bq.data.size(); ++i) q[static_cast<size_t>(t)][i] += bq.data[i];
        for (size_t i = 0; i < bk.data.size(); ++i) k[static_cast<size_t>(t)][i] += bk.data[i];
        for (size_t i = 0; i < bv.data.size(); ++i) v[static_cast<size_t>(t)][i] += bv.data[i];
      }
      for (int h = 0; h < c.n_heads; ++h) rope(c, ff, t, &q[static_cast<size_t>(t)][static_cast<size_t>(h * hd)]);
      for (int h = 0; h < c.n_kv_heads; ++h) rope(c, ff, t, &k[static_cast<size_t>(t)][static_cast<size_t>(h * hd)]);
    }
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> att(static_cast<size_t>(c.n_heads * hd), 0.0);
      const int64_t first = c.sliding_window > 0 ? std::max<int64_t>(0, t + 1 - c.sliding_window) : 0;
      for (int h = 0; h < c.n_heads; ++h) {
        const int kvh = h / group;
        std::vector<double> s;
        for (int64_t j = first; j <= t; ++j) {
          double dot = 0.0;
          for (int i = 0; i < hd; ++i) {
            dot += q[static_cast<size_t>(t)][static_cast<size_t>(h * hd + i)] *
                   k[static_cast<size_t>(j)][static_cast<size_t>(kvh * hd + i)];
          }
          dot /= std::sqrt(static_cast<double>(hd));
          if (c.attn_logit_softcap > 0) dot = c.attn_logit_softcap * std::tanh(dot / c.attn_logit_softcap);
          s.push_back(dot);
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0.0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = first; j <= t; ++j) {
          for (int i = 0; i < hd; ++i) {
            att[static_cast<size_t>(h * hd + i)] +=
                s[static_cast<size_t>(j - first)] / sum * v[static_cast<size_t>(j)][static_cast<size_t>(kvh * hd + i)];
          }
        }
      }
      const std::vector<double> o = matvec(wo, att);
      for (size_t i = 0; i < o.size(); ++i) x[static_cast<size_t>(t)][i] += o[i];
      const std::vector<double> xn = rms_norm(x[static_cast<size_t>(t)], fn, c.rms_eps);
      std::vector<double> g = matvec(wg, xn);
      const std::vector<double> u = matvec(wu, xn);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const std::vector<double> d = matvec(wd, g);
      for (size_t i = 0; i < d.size(); ++i) x[static_cast<size_t>(t)][i] += d[i];
    }
  }
  std::vector<double> logits;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> row = matvec(out, rms_norm(x[static_cast<size_t>(t)], out_norm, c.rms_eps));
    if (c.final_logit_softcap > 0) {
      for (double& v : row) v = c.final_logit_softcap * std::tanh(v / c.final_logit_softcap);
    }
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

RandomModelSpec head64_spec() {
  RandomModelSpec spec;
  spec.n_vocab = 256;
  spec.n_embd = 256;
  spec.n_heads = 4;
  spec.n_kv_heads = 1;
  spec.n_ff = 512;
  spec.n_ctx = 1024;
  return spec;
}

void write_random_model(const RandomModelSpec& s, const std::filesystem::path& path) {
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  io::GgufWriter w;
  const std::string a = s.architecture;
  const int hd = s.n_embd / s.n_heads;
  w.set_string("general.architecture", a);
  w.set_u32(a + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(s.n_layers));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + ".rope.freq_base", s.rope_base);
  const int rope_dim = s.rope_dim > 0 ? s.rope_dim : hd;
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(rope_dim));
  if (!s.rope_scaling.empty()) {
    w.set_string(a + ".rope.scaling.type", s.rope_scaling);
    w.set_f32(a + ".rope.scaling.factor", s.rope_scaling_factor);
    if (s.rope_n_ctx_orig > 0) w.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(s.rope_n_ctx_orig));
  }
  if (s.sliding_window > 0) w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
  if (s.attn_softcap > 0) w.set_f32(a + ".attn_logit_softcapping", s.attn_softcap);
  if (s.final_softcap > 0) w.set_f32(a + ".final_logit_softcapping", s.final_softcap);
  auto add = [&](const std::string& name, std::vector<int64_t> ne, float sigma, float mean) {
    int64_t count = 1;
    for (int64_t d : ne) count *= d;
    std::vector<float> data(static_cast<size_t>(count));
    for (float& x : data) x = mean + sigma * normal(rng);
    w.add_tensor(name, DType::F32, ne, std::as_bytes(std::span(data)));
  };
  // Random blocks of matrix_type: every byte random but each block's fp16 d,
  // small enough that the activations stay in a sane range.
  auto add_matrix = [&](const std::string& name, std::vector<int64_t> ne, float sigma) {
    if (s.matrix_type == DType::F32) return add(name, ne, sigma, 0.0f);
    size_t d_at = 0;
    if (s.matrix_type == DType::TQ1_0) d_at = 52;
    else if (s.matrix_type != DType::IQ3_S && s.matrix_type != DType::IQ3_XXS) throw std::runtime_error("write_random_model: no maker for " + std::string(dtype_name(s.matrix_type)));
    std::vector<std::byte> data(row_bytes(s.matrix_type, ne[0]) * static_cast<size_t>(ne[1]));
    std::uniform_int_distribution<int> byte(0, 255);
    for (std::byte& b : data) b = static_cast<std::byte>(byte(rng));
    const size_t bb = dtype_traits(s.matrix_type).block_bytes;
    const float per_value = s.matrix_type == DType::TQ1_0 ? 1.0f : 128.0f;  // a typical |value| before d (IQ3: scale x magnitude)
    const uint16_t d = fp32_to_fp16(sigma / per_value);
    for (size_t off = 0; off < data.size(); off += bb) std::memcpy(data.data() + off + d_at, &d, sizeof(d));
    w.add_tensor(name, s.matrix_type, ne, data);
  };
  add("token_embd.weight", {s.n_embd, s.n_vocab}, 0.5f, 0.0f);
  add("output_norm.weight", {s.n_embd}, 0.05f, 1.0f);
  if (!s.tied_output) add_matrix("output.weight", {s.n_embd, s.n_vocab}, 0.2f);
  if (s.rope_freqs) add("rope_freqs.weight", {rope_dim / 2}, 0.5f, 2.0f);
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {s.n_embd}, 0.05f, 1.0f);
    add_matrix(p + "attn_q.weight", {s.n_embd, s.n_heads * hd}, 0.2f);
    add_matrix(p + "attn_k.weight", {s.n_embd, s.n_kv_heads * hd}, 0.2f);
    add_matrix(p + "attn_v.weight", {s.n_embd, s.n_kv_heads * hd}, 0.2f);
    if (s.qkv_bias) {
      add(p + "attn_q.bias", {s.n_heads * hd}, 0.1f, 0.0f);
      add(p + "attn_k.bias", {s.n_kv_heads * hd}, 0.1f, 0.0f);
      add(p + "attn_v.bias", {s.n_kv_heads * hd}, 0.1f, 0.0f);
    }
    add_matrix(p + "attn_output.weight", {s.n_heads * hd, s.n_embd}, 0.2f);
    add(p + "ffn_norm.weight", {s.n_embd}, 0.05f, 1.0f);
    add_matrix(p + "ffn_gate.weight", {s.n_embd, s.n_ff}, 0.2f);
    add_matrix(p + "ffn_up.weight", {s.n_embd, s.n_ff}, 0.2f);
    add_matrix(p + "ffn_down.weight", {s.n_ff, s.n_embd}, 0.2f);
  }
  w.write(path);
}

}  // namespace tokamak::testing
