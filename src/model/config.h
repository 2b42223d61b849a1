// Hyper-parameters of a Llama-family decoder. Architecture differences are
// fields here (rope layout, tied output...), never subclasses.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/rope.h"

namespace tokamak {

namespace io {
class GgufFile;
struct Llama2cConfig;
}  // namespace io

enum class RopeScaling { None, Linear, Yarn };

struct ModelConfig {
  std::string architecture = "llama";
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;  // n_embd / n_heads
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;
  int32_t rope_dim = 0;  // rotated dims per head (== head_dim unless partial rotary)
  float rope_freq_base = 10000.0f;
  kernels::RopeStyle rope_style = kernels::RopeStyle::Norm;  // NEOX for qwen2
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_scaling_factor = 1.0f;   // context multiplier (linear, YaRN)
  int32_t rope_n_ctx_orig = 0;        // context the model was trained at before scaling
  float yarn_attn_factor = 1.0f;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  bool rope_freq_factors = false;     // a `rope_freqs.weight` tensor divides each pair's frequency (Llama 3.1+)
  float rms_eps = 1e-5f;
  bool tied_output = false;           // LM head reuses token_embd
  bool qkv_bias = false;              // attn_{q,k,v}.bias present (qwen2)
  int32_t sliding_window = 0;         // attend to the last N positions only; 0 = full causal (mistral)
  float embedding_scale = 1.0f;       // multiplies the token embeddings (gemma-style: sqrt(n_embd))
  float attn_logit_softcap = 0.0f;    // scores -> cap * tanh(scores / cap); 0 = off
  float final_logit_softcap = 0.0f;   // logits -> cap * tanh(logits / cap); 0 = off

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }

  // RoPE parameters for the kernels (freq_factors left null: they live in the weights).
  kernels::RopeParams rope_params() const;

  // From `<arch>.*` metadata for the architectures llama, mistral and qwen2;
  // n_vocab comes from the embedding tensor's shape.
  // Throws tokamak::Error naming the file and key that is missing or invalid.
  static ModelConfig from_gguf(const io::GgufFile& file);
  static ModelConfig from_llama2c(const io::Llama2cConfig& c);
  // Consistency checks shared by both sources (divisibility, positive sizes).
  void validate(const std::string& source) const;
};

}  // namespace tokamak
