#include "model/make_model.h"

#include <array>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "model/synthetic_vocab.h"
#include "model/tensor_convert.h"

namespace tokamak {
namespace {

constexpr ModelPreset kPresets[] = {
    // name            n_embd n_ff  layers heads kv  vocab   ctx     rope base  eps   tied  llama3 rope
    {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, 1e-5f, false},
    {"llama-3.2-1b", 2048, 8192, 16, 32, 8, 128256, 131072, 500000.0f, 1e-5f, true, 32.0f},
    {"micro", 256, 768, 4, 8, 2, 512, 512, 10000.0f, 1e-5f, false},
};

constexpr float kNormNoise = 0.02f;
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
}

int64_t vocab_size(const MakeModelOptions& o) {
  if (o.vocab_from == nullptr) return o.preset.n_vocab;
  const io::GgufValue* tokens = o.vocab_from->get_array("tokenizer.ggml.tokens", io::GgufType::STRING);
  if (tokens == nullptr || tokens->strings.empty()) {
    throw Error(o.vocab_from->name() + ": no tokenizer.ggml.tokens array to take the vocabulary from");
  }
  return static_cast<int64_t>(tokens->strings.size());
}

// Metadata in the order llama.cpp's converter writes it.
void set_metadata(io::GgufWriter& w, const MakeModelOptions& o, int64_t n_vocab) {
  const ModelPreset& p = o.preset;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", std::string(p.name) + " (random weights, seed " + std::to_string(o.seed) + ")");
  w.set_u32("llama.context_length", static_cast<uint32_t>(p.n_ctx_train));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(p.n_embd));
  w.set_u32("llama.block_count", static_cast<uint32_t>(p.n_layers));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(p.n_ff));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(p.n_embd / p.n_heads));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(p.n_heads));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(p.n_kv_heads));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", p.rms_eps);
  w.set_f32("llama.rope.freq_base", p.rope_freq_base);
  w.set_u32("general.file_type", static_cast<uint32_t>(o.ftype));
  w.set_u32("llama.vocab_size", static_cast<uint32_t>(n_vocab));
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

void make_model(const MakeModelOptions& options, const std::filesystem::path& out, ThreadPool& pool,
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
      const bool is_norm = s.ne.size() == 1;
      const float mean = is_norm ? 1.0f : 0.0f;
      const float sigma = is_norm ? kNormNoise : 1.0f / std::sqrt(static_cast<float>(ne0));
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
