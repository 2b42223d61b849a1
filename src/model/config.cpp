#include "model/config.h"

#include "core/error.h"
#include "io/gguf.h"
#include "io/llama2c.h"

namespace tokamak {
namespace {

int32_t required_int(const io::GgufFile& f, const std::string& key) {
  const std::optional<int64_t> v = f.get_int(key);
  if (!v) throw Error(f.name() + ": missing metadata key '" + key + "'");
  if (*v <= 0 || *v > (int64_t{1} << 30)) {
    throw Error(f.name() + ": metadata '" + key + "' = " + std::to_string(*v) + " is out of range");
  }
  return static_cast<int32_t>(*v);
}

// What each supported architecture fixes beyond its metadata.
struct ArchitectureTraits {
  std::string_view name;
  kernels::RopeStyle rope_style;
  bool qkv_bias;
};
constexpr ArchitectureTraits kArchitectures[] = {
    {"llama", kernels::RopeStyle::Norm, false},
    {"mistral", kernels::RopeStyle::Norm, false},
    {"qwen2", kernels::RopeStyle::Neox, true},
};

}  // namespace

kernels::RopeParams ModelConfig::rope_params() const {
  kernels::RopeParams p;
  p.style = rope_style;
  p.n_dims = rope_dim;
  p.freq_base = rope_freq_base;
  if (rope_scaling != RopeScaling::None) p.freq_scale = 1.0f / rope_scaling_factor;
  if (rope_scaling == RopeScaling::Yarn) {
    p.ext_factor = 1.0f;
    p.attn_factor = yarn_attn_factor;
    p.beta_fast = yarn_beta_fast;
    p.beta_slow = yarn_beta_slow;
    p.n_ctx_orig = rope_n_ctx_orig > 0 ? rope_n_ctx_orig : n_ctx_train;
  }
  return p;
}

ModelConfig ModelConfig::from_gguf(const io::GgufFile& f) {
  ModelConfig c;
  const std::optional<std::string> arch = f.get_string("general.architecture");
  if (!arch) throw Error(f.name() + ": missing metadata key 'general.architecture'");
  const ArchitectureTraits* traits = nullptr;
  for (const ArchitectureTraits& t : kArchitectures) {
    if (t.name == *arch) traits = &t;
  }
  if (traits == nullptr) {
    throw Error(f.name() + ": unsupported architecture '" + *arch + "' (supported: llama, mistral, qwen2)");
  }
  c.architecture = *arch;
  c.rope_style = traits->rope_style;
  c.qkv_bias = traits->qkv_bias;
  const std::string p = *arch + ".";
  c.n_embd = required_int(f, p + "embedding_length");
  c.n_layers = required_int(f, p + "block_count");
  c.n_heads = required_int(f, p + "attention.head_count");
  c.n_kv_heads = f.get_int(p + "attention.head_count_kv") ? required_int(f, p + "attention.head_count_kv") : c.n_heads;
  c.n_ff = required_int(f, p + "feed_forward_length");
  c.n_ctx_train = required_int(f, p + "context_length");
  if (c.n_heads > 0 && c.n_embd % c.n_heads != 0) {
    throw Error(f.name() + ": embedding_length " + std::to_string(c.n_embd) + " is not divisible by head_count " +
                std::to_string(c.n_heads));
  }
  c.head_dim = c.n_embd / c.n_heads;
  c.rope_dim = f.get_int(p + "rope.dimension_count") ? required_int(f, p + "rope.dimension_count") : c.head_dim;
  if (auto base = f.get_float(p + "rope.freq_base")) c.rope_freq_base = static_cast<float>(*base);
  if (auto eps = f.get_float(p + "attention.layer_norm_rms_epsilon")) c.rms_eps = static_cast<float>(*eps);
  if (auto type = f.get_string(p + "rope.scaling.type")) {
    if (*type == "linear") {
      c.rope_scaling = RopeScaling::Linear;
    } else if (*type == "yarn") {
      c.rope_scaling = RopeScaling::Yarn;
    } else if (*type != "none") {
      throw Error(f.name() + ": unsupported " + p + "rope.scaling.type '" + *type + "' (supported: none, linear, yarn)");
    }
  }
  if (c.rope_scaling != RopeScaling::None) {
    // Older files give only the linear scale (rope.scale_linear).
    auto factor = f.get_float(p + "rope.scaling.factor");
    if (!factor) factor = f.get_float(p + "rope.scale_linear");
    if (factor) c.rope_scaling_factor = static_cast<float>(*factor);
    if (!(c.rope_scaling_factor >= 1.0f)) {
      throw Error(f.name() + ": " + p + "rope.scaling.factor " + std::to_string(c.rope_scaling_factor) + " must be >= 1");
    }
  }
  if (f.get_int(p + "rope.scaling.original_context_length")) {
    c.rope_n_ctx_orig = required_int(f, p + "rope.scaling.original_context_length");
  }
  if (auto af = f.get_float(p + "rope.scaling.attn_factor")) c.yarn_attn_factor = static_cast<float>(*af);
  c.rope_freq_factors = f.find_tensor("rope_freqs.weight") != nullptr;
  if (f.get_int(p + "attention.sliding_window")) c.sliding_window = required_int(f, p + "attention.sliding_window");
  if (auto cap = f.get_float(p + "attn_logit_softcapping")) c.attn_logit_softcap = static_cast<float>(*cap);
  if (auto cap = f.get_float(p + "final_logit_softcapping")) c.final_logit_softcap = static_cast<float>(*cap);
  const io::GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) throw Error(f.name() + ": missing tensor 'token_embd.weight'");
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.validate(f.name());
  return c;
}

ModelConfig ModelConfig::from_llama2c(const io::Llama2cConfig& l) {
  ModelConfig c;
  c.n_vocab = l.vocab_size;
  c.n_embd = l.dim;
  c.n_layers = l.n_layers;
  c.n_heads = l.n_heads;
  c.n_kv_heads = l.n_kv_heads;
  c.head_dim = l.dim / l.n_heads;
  c.n_ff = l.hidden_dim;
  c.n_ctx_train = l.seq_len;
  c.rope_dim = c.head_dim;
  c.tied_output = l.shared_classifier;
  c.validate("llama2.c checkpoint");
  return c;
}

void ModelConfig::validate(const std::string& source) const {
  auto fail = [&](const std::string& what) { throw Error(source + ": " + what); };
  if (n_vocab <= 0) fail("vocabulary size " + std::to_string(n_vocab) + " must be positive");
  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    fail("head_count " + std::to_string(n_heads) + " is not a multiple of head_count_kv " + std::to_string(n_kv_heads));
  }
  if (rope_dim <= 0 || rope_dim > head_dim || rope_dim % 2 != 0) {
    fail("rope dimension count " + std::to_string(rope_dim) + " must be even and in (0, head_dim " +
         std::to_string(head_dim) + "]");
  }
  if (!(rms_eps > 0.0f)) fail("rms epsilon " + std::to_string(rms_eps) + " must be positive");
  if (!(rope_freq_base > 0.0f)) fail("rope freq_base " + std::to_string(rope_freq_base) + " must be positive");
}

}  // namespace tokamak
