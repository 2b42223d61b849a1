#include "tools/make_model.h"

#include <array>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "tools/synthetic_vocab.h"
#include "tools/tensor_convert.h"

namespace tokamak {
namespace {

// Real shapes from the models' config.json (hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
// max_position_embeddings, rope_theta, rms_norm_eps, tie_word_embeddings,
// sliding_window). The micro presets keep a family's options (architecture,
// head_dim, GQA group, tied output, rope base, eps, window) at sizes a test can
// check against a plain reference in well under a second; n_embd and n_ff
// are multiples of 256 exactly where the real model's are, so the K-quant
// fallbacks happen to the same tensors.
constexpr ModelPreset kPresets[] = {
    // name             arch     n_embd n_ff  layers heads kv  vocab   ctx     rope base  eps    tied  llama3 window
    {"tinyllama-1.1b", "llama", 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, 1e-5f, false, 0.0f, 0,
     "TinyLlama-1.1B (Llama 2 layout)"},
    {"llama-3.2-1b", "llama", 2048, 8192, 16, 32, 8, 128256, 131072, 500000.0f, 1e-5f, true, 32.0f, 0,
     "Llama-3.2-1B: tied output, Llama 3 RoPE frequency factors"},
    {"qwen2.5-0.5b", "qwen2", 896, 4864, 24, 14, 2, 151936, 32768, 1000000.0f, 1e-6f, true, 0.0f, 0,
     "Qwen2.5-0.5B: NEOX RoPE, QKV biases, tied output"},
    {"smollm2-360m", "llama", 960, 2560, 32, 15, 5, 49152, 8192, 100000.0f, 1e-5f, true, 0.0f, 0,
     "SmolLM2-360M: tied output"},
    {"mistral-7b", "llama", 4096, 14336, 2, 32, 8, 32000, 32768, 1000000.0f, 1e-5f, false, 0.0f, 0,
     "Mistral-7B v0.2 at 2 of its 32 layers (--layers 32 for all)"},
    {"mistral-7b-v0.1", "llama", 4096, 14336, 2, 32, 8, 32000, 32768, 10000.0f, 1e-5f, false, 0.0f, 4096,
     "Mistral-7B v0.1 (sliding window 4096) at 2 of its 32 layers"},
    {"micro", "llama", 256, 768, 4, 8, 2, 512, 512, 10000.0f, 1e-5f, false, 0.0f, 0,
     "tiny Llama 2 (the shapes of ../shared/fixtures' micro-llama)"},
    {"llama3-micro", "llama", 256, 1024, 2, 4, 1, 512, 131072, 500000.0f, 1e-5f, true, 32.0f, 0,
     "tiny llama-3.2-1b: head_dim 64, GQA 4, tied, RoPE factors"},
    {"qwen2-micro", "qwen2", 448, 1280, 2, 7, 1, 512, 32768, 1000000.0f, 1e-6f, true, 0.0f, 0,
     "tiny qwen2.5-0.5b: head_dim 64, GQA 7, NEOX, biases, tied"},
    {"smollm2-micro", "llama", 192, 512, 2, 3, 1, 512, 8192, 100000.0f, 1e-5f, true, 0.0f, 0,
     "tiny smollm2-360m: head_dim 64, GQA 3, tied"},
    {"mistral-micro", "llama", 512, 1792, 2, 4, 1, 512, 32768, 10000.0f, 1e-5f, false, 0.0f, 16,
     "tiny mistral-7b-v0.1: head_dim 128, GQA 4, sliding window 16"},
};

constexpr float kNormNoise = 0.02f;
constexpr float kBiasSigma = 0.1f;
constexpr uint32_t kQuantizationVersion = 2;

// splitmix64: a full-period 64-bit generator whose outputs are well mixed even
// from consecutive states; good enough for weights and very fast.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// n values of mean + sigma * N(0, 1) (Marsaglia's polar method: two normals
// per accepted pair of uniforms, no trigonometry).
void fill_normal(uint64_t stream, float mean, float sigma, float* out, int64_t n) {
  uint64_t state = stream;
  constexpr float kScale = 1.0f / 2147483648.0f;  // int32 -> [-1, 1)
  for (int64_t i = 0; i < n;) {
    const uint64_t r = splitmix64(state);
    const float u = static_cast<float>(static_cast<int32_t>(r)) * kScale;
    const float v = static_cast<float>(static_cast<int32_t>(r >> 32)) * kScale;
    const float s = u * u + v * v;
    if (s >= 1.0f || s == 0.0f) continue;
    const float f = sigma * std::sqrt(-2.0f * std::log(s) / s);
    out[i++] = mean + u * f;
    if (i < n) out[i++] = mean + v * f;
  }
}

// Llama 3's RoPE frequency factors (what llama.cpp's converter stores in
// rope_freqs.weight): wavelengths shorter than 8192/4 positions keep their
// frequency, those longer than 8192 are slowed by `factor`, and the band
// between is interpolated smoothly.
std::vector<float> llama3_rope_factors(const ModelPreset& p) {
  constexpr double kOriginalContext = 8192.0, kLowFreqFactor = 1.0, kHighFreqFactor = 4.0;
  const int64_t head_dim = p.n_embd / p.n_heads;
  const double low_freq_wavelen = kOriginalContext / kLowFreqFactor;
  const double high_freq_wavelen = kOriginalContext / kHighFreqFactor;
  std::vector<float> factors;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(static_cast<double>(p.rope_freq_base), static_cast<double>(i) / head_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelen > low_freq_wavelen) {
      f = p.llama3_rope_factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth = (kOriginalContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
      f = 1.0 / ((1.0 - smooth) / p.llama3_rope_factor + smooth);
    }
    factors.push_back(static_cast<float>(f));
  }
  return factors;
}

// qwen2 loads attn_{q,k,v}.bias in every layer; the llama layout has none.
bool has_qkv_bias(const ModelPreset& p) { return p.architecture == "qwen2"; }

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // GGML order: ne[0] = input dimension
};

std::vector<TensorSpec> tensor_specs(const ModelPreset& p, int64_t n_vocab) {
  const int64_t head_dim = p.n_embd / p.n_heads;
  const int64_t q_dim = head_dim * p.n_heads;
  const int64_t kv_dim = head_dim * p.n_kv_heads;
  std::vector<TensorSpec> specs = {{"token_embd.weight", {p.n_embd, n_vocab}}, {"output_norm.weight", {p.n_embd}}};
  if (!p.tied_output) specs.push_back({"output.weight", {p.n_embd, n_vocab}});
  if (p.llama3_rope_factor > 0.0f) specs.push_back({"rope_freqs.weight", {head_dim / 2}});
  for (int32_t l = 0; l < p.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    specs.push_back({b + "attn_norm.weight", {p.n_embd}});
    specs.push_back({b + "attn_q.weight", {p.n_embd, q_dim}});
    specs.push_back({b + "attn_k.weight", {p.n_embd, kv_dim}});
    specs.push_back({b + "attn_v.weight", {p.n_embd, kv_dim}});
    if (has_qkv_bias(p)) {
      specs.push_back({b + "attn_q.bias", {q_dim}});
      specs.push_back({b + "attn_k.bias", {kv_dim}});
      specs.push_back({b + "attn_v.bias", {kv_dim}});
    }
    specs.push_back({b + "attn_output.weight", {q_dim, p.n_embd}});
    specs.push_back({b + "ffn_norm.weight", {p.n_embd}});
    specs.push_back({b + "ffn_gate.weight", {p.n_embd, p.n_ff}});
    specs.push_back({b + "ffn_up.weight", {p.n_embd, p.n_ff}});
    specs.push_back({b + "ffn_down.weight", {p.n_ff, p.n_embd}});
  }
  return specs;
}

void check_preset(const ModelPreset& p) {
  const std::string where = "model preset '" + std::string(p.name) + "': ";
  if (p.n_embd <= 0 || p.n_ff <= 0 || p.n_layers <= 0 || p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_vocab <= 0) {
    throw Error(where + "sizes must be positive");
  }
  if (p.n_embd % p.n_heads != 0 || p.n_heads % p.n_kv_heads != 0) {
    throw Error(where + "n_embd must divide by n_heads and n_heads by n_kv_heads");
  }
  if (p.architecture != "llama" && p.architecture != "mistral" && p.architecture != "qwen2") {
    throw Error(where + "architecture '" + std::string(p.architecture) + "' is not llama, mistral or qwen2");
  }
  if (p.sliding_window < 0) throw Error(where + "sliding window " + std::to_string(p.sliding_window) + " < 0");
}

int64_t vocab_size(const MakeModelOptions& o) {
  if (o.vocab_from == nullptr) return o.preset.n_vocab;
  const io::GgufValue* tokens = o.vocab_from->get_array("tokenizer.ggml.tokens", io::GgufType::STRING);
  if (tokens == nullptr || tokens->strings.empty()) {
    throw Error(o.vocab_from->name() + ": no tokenizer.ggml.tokens array to take the vocabulary from");
  }
  return static_cast<int64_t>(tokens->strings.size());
}

// Metadata in the order llama.cpp's converter writes it (which leaves out
// vocab_size and rope.dimension_count for qwen2).
void set_metadata(io::GgufWriter& w, const MakeModelOptions& o, int64_t n_vocab) {
  const ModelPreset& p = o.preset;
  const std::string a(p.architecture);
  w.set_string("general.architecture", a);
  w.set_string("general.name", std::string(p.name) + " (random weights, seed " + std::to_string(o.seed) + ")");
  w.set_u32(a + ".context_length", static_cast<uint32_t>(p.n_ctx_train));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(p.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(p.n_layers));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(p.n_ff));
  if (a != "qwen2") w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(p.n_embd / p.n_heads));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(p.n_heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(p.n_kv_heads));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", p.rms_eps);
  w.set_f32(a + ".rope.freq_base", p.rope_freq_base);
  if (p.sliding_window > 0) w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(p.sliding_window));
  w.set_u32("general.file_type", static_cast<uint32_t>(o.ftype));
  if (a != "qwen2") w.set_u32(a + ".vocab_size", static_cast<uint32_t>(n_vocab));
  if (o.vocab_from != nullptr) {
    for (const io::GgufKeyValue& kv : o.vocab_from->metadata()) {
      if (kv.key.starts_with("tokenizer.")) w.set(kv.key, kv.value);
    }
  } else {
    set_synthetic_vocab(w, static_cast<int32_t>(n_vocab));
  }
  w.set_u32("general.quantization_version", kQuantizationVersion);
}

// The tensors in file order (llama.cpp's) and the type the recipe gives each.
struct ModelPlan {
  int64_t n_vocab = 0;
  std::vector<TensorSpec> specs;
  std::vector<DType> types;
};

ModelPlan make_plan(const MakeModelOptions& o) {
  const ModelPreset& p = o.preset;
  check_preset(p);
  ModelPlan plan;
  plan.n_vocab = vocab_size(o);
  const std::vector<TensorSpec> specs = tensor_specs(p, plan.n_vocab);
  std::vector<std::string> names;
  for (const TensorSpec& s : specs) names.push_back(s.name);
  RecipeModel rm;
  rm.n_layers = p.n_layers;
  rm.n_gqa = p.n_heads / p.n_kv_heads;
  rm.n_attention_wv = p.n_layers;
  rm.has_output = !p.tied_output;
  QuantRecipe recipe(o.ftype, o.pure, rm);
  for (size_t i : llama_tensor_order(names)) {
    const TensorSpec& s = specs[i];
    std::array<int64_t, 4> ne{1, 1, 1, 1};
    for (size_t d = 0; d < s.ne.size(); ++d) ne[d] = s.ne[d];
    plan.types.push_back(recipe.type_for(s.name, ne, static_cast<int>(s.ne.size()), DType::F32));
    plan.specs.push_back(s);
  }
  return plan;
}

}  // namespace

std::span<const ModelPreset> model_presets() { return kPresets; }

const ModelPreset* find_model_preset(std::string_view name) {
  for (const ModelPreset& p : kPresets) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string model_preset_names() {
  std::string out;
  for (const ModelPreset& p : kPresets) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

std::vector<MadeTensor> plan_model(const MakeModelOptions& options) {
  const ModelPlan plan = make_plan(options);
  std::vector<MadeTensor> out;
  for (size_t i = 0; i < plan.specs.size(); ++i) {
    const TensorSpec& s = plan.specs[i];
    const int64_t rows = s.ne.size() > 1 ? s.ne[1] : 1;
    out.push_back({s.name, plan.types[i], row_bytes(plan.types[i], s.ne[0]) * static_cast<size_t>(rows)});
  }
  return out;
}

void make_model(const MakeModelOptions& options, io::OutputFile& out, ThreadPool& pool,
                const MadeTensorCallback& on_tensor) {
  const ModelPlan plan = make_plan(options);
  io::GgufWriter w;
  set_metadata(w, options, plan.n_vocab);
  for (size_t i = 0; i < plan.specs.size(); ++i) w.declare_tensor(plan.specs[i].name, plan.types[i], plan.specs[i].ne);

  const uint64_t total = w.data_bytes();
  uint64_t done = 0;
  w.write(out, [&](size_t index, std::span<std::byte> bytes) {
    const TensorSpec& s = plan.specs[index];
    const DType type = plan.types[index];
    const int64_t ne0 = s.ne[0];
    const int64_t n_rows = s.ne.size() > 1 ? s.ne[1] : 1;
    std::vector<float> factors;
    RowSource source;
    if (s.name == "rope_freqs.weight") {  // computed, not random
      factors = llama3_rope_factors(options.preset);
      source = [&](int64_t, float*) -> const float* { return factors.data(); };
    } else {
      const bool is_norm = s.name.ends_with("_norm.weight");
      const bool is_bias = s.name.ends_with(".bias");
      const float mean = is_norm ? 1.0f : 0.0f;
      const float sigma = is_norm ? kNormNoise : is_bias ? kBiasSigma : 1.0f / std::sqrt(static_cast<float>(ne0));
      const uint64_t tensor_stream = options.seed ^ fnv1a(s.name);
      source = [=](int64_t row, float* scratch) -> const float* {
        uint64_t stream = tensor_stream + static_cast<uint64_t>(row) * 0xd1b54a32d192ed03ull;
        fill_normal(splitmix64(stream), mean, sigma, scratch, ne0);
        return scratch;
      };
    }
    convert_rows(pool, type, ne0, n_rows, bytes, source);
    done += bytes.size();
    if (on_tensor) on_tensor({s.name, type, bytes.size()}, done, total);
  });
}

}  // namespace tokamak
