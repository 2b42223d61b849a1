// llama2.c checkpoints (`run.c` legacy format) and its tokenizer.bin.
// Checkpoint: 7 x int32 header {dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size, seq_len}; a negative vocab_size means a separate classifier
// (wcls) follows. Then f32 weights in this order:
//   token_embedding [vocab, dim], rms_att [layers, dim], wq [layers, dim(out), dim(in)],
//   wk [layers, kv_dim, dim], wv [layers, kv_dim, dim], wo [layers, dim, dim],
//   rms_ffn [layers, dim], w1 [layers, hidden, dim], w2 [layers, dim, hidden],
//   w3 [layers, hidden, dim], rms_final [dim], freq_cis_real/imag [seq_len, head_size/2] (skipped),
//   wcls [vocab, dim] when not shared.
// Matrices are row-major [out, in], which is GGUF's [ne0 = in, ne1 = out].
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace tokamak::io {

struct Llama2cConfig {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;
};

struct Llama2cLayer {
  TensorView rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3;
};

// A mapped checkpoint; views point into the mapping. Validates the header
// (positive sizes, dim divisible by n_heads, n_heads divisible by n_kv_heads)
// and that the file holds exactly the bytes the header implies (a classifier
// may be absent only when shared). Throws tokamak::Error naming the file.
class Llama2cCheckpoint {
 public:
  static Llama2cCheckpoint open(const std::filesystem::path& path);

  const Llama2cConfig& config() const { return config_; }
  TensorView token_embedding, rms_final, wcls;  // wcls == token_embedding when shared
  std::vector<Llama2cLayer> layers;

 private:
  std::shared_ptr<MappedFile> file_;
  Llama2cConfig config_;
};

// tokenizer.bin: int32 max_token_length, then vocab_size x (f32 score, int32 len, len bytes).
struct Llama2cVocab {
  int32_t max_token_length = 0;
  std::vector<std::string> pieces;
  std::vector<float> scores;
};
Llama2cVocab load_llama2c_tokenizer(const std::filesystem::path& path, int32_t vocab_size);

}  // namespace tokamak::io
