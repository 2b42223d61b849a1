// Hyper-parameters of a Llama-family decoder. Architecture differences are
// fields here (rope layout, tied output...), never subclasses.
#pragma once

#include <cstdint>
#include <string>

namespace tokamak {

namespace io {
class GgufFile;
struct Llama2cConfig;
}  // namespace io

enum class RopeStyle { Norm };  // NORM: rotate adjacent pairs (llama, llama2.c)

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
  int32_t rope_dim = 0;  // rotated dims per head (== head_dim for llama)
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::Norm;
  bool tied_output = false;  // LM head reuses token_embd

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }

  // From `llama.*` metadata. n_vocab comes from the embedding tensor's shape.
  // Throws tokamak::Error naming the file and key that is missing or invalid.
  static ModelConfig from_gguf(const io::GgufFile& file);
  static ModelConfig from_llama2c(const io::Llama2cConfig& c);
  // Consistency checks shared by both sources (divisibility, positive sizes).
  void validate(const std::string& source) const;
};

}  // namespace tokamak
