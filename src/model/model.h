// A loaded model: its config and views of its weights, which stay in the
// file's memory mapping (nothing is copied). Immutable once loaded, so one
// Model can serve several Forward contexts.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/huge_pages.h"
#include "core/mapped_file.h"
#include "core/tensor.h"
#include "kernels/isa.h"
#include "model/config.h"

namespace tokamak {

namespace io {
class GgufFile;
class Llama2cCheckpoint;
}  // namespace io
namespace dist {
struct Parallel;
}  // namespace dist

// Weight shapes in GGML order [ne0 = input, ne1 = output]; norms are [n_embd].
struct LayerWeights {
  TensorView attn_norm;  // [n_embd] f32
  TensorView wq;         // [n_embd, q_dim]
  TensorView wk;         // [n_embd, kv_dim]
  TensorView wv;         // [n_embd, kv_dim]
  TensorView wo;         // [q_dim, n_embd]
  TensorView bq, bk, bv; // [q_dim], [kv_dim], [kv_dim] f32 when config.qkv_bias
  TensorView ffn_norm;   // [n_embd] f32
  TensorView ffn_gate;   // [n_embd, n_ff]  (w1)
  TensorView ffn_up;     // [n_embd, n_ff]  (w3)
  TensorView ffn_down;   // [n_ff, n_embd]  (w2)
};

struct ModelWeights {
  TensorView token_embd;   // [n_embd, n_vocab]
  TensorView output_norm;  // [n_embd] f32
  TensorView output;       // [n_embd, n_vocab]; token_embd when tied
  TensorView rope_freqs;   // [rope_dim / 2] f32 when config.rope_freq_factors
  std::vector<LayerWeights> layers;
};

enum class ModelFormat { Gguf, Llama2c };

// The kernel variant whose preferred layout loading repacks weights into
// (kernels/interleave.h): by default the best one of this CPU. kKeepLayout
// keeps the file's layout: the bytes a decode step reads are the file's, and
// the AVX2 Q8_0 kernel reproduces llama.cpp's logits bitwise.
using RepackFor = std::optional<kernels::Isa>;
inline constexpr RepackFor kKeepLayout = std::nullopt;

// Tensor parallel splits the vocabulary (embedding and LM head rows) into
// near-equal runs: part p of `parts` begins at this row (p = parts: the end).
inline int32_t vocab_split(int32_t n_vocab, int part, int parts) {
  return static_cast<int32_t>(static_cast<int64_t>(n_vocab) * part / parts);
}

// Where this process's part of a model split across processes
// (dist::Parallel) sits in the whole: the first index of each split
// dimension it holds (the counts are in Model::local_config()). Tensor
// parallel (Megatron): query heads and their KV heads, FFN columns and
// vocabulary rows of the embedding and LM head; pipeline: a run of layers.
struct ShardRanges {
  int32_t head_begin = 0;
  int32_t kv_head_begin = 0;
  int32_t ff_begin = 0;
  int32_t vocab_begin = 0;
  int32_t vocab_end = 0;  // the whole model: config().n_vocab
  int32_t layer_begin = 0;
  bool first_stage = true;  // holds the embedding rows
  bool last_stage = true;   // holds output_norm and the LM head rows
};

class Model {
 public:
  // Detects the format from the first bytes ("GGUF" magic, else llama2.c).
  // `weights` says where a GGUF file's bytes live (core/mapped_file.h): by
  // default large files are copied onto huge pages, which decode streams
  // about twice as fast as a 4 KiB-page mapping.
  static Model load(const std::filesystem::path& path, MapMode weights = MapMode::kAuto,
                    RepackFor repack = kernels::best_isa());
  // `writable`: the file's bytes when they are this model's own copy, in
  // which weights are repacked in place (else into a buffer of the model's).
  static Model from_gguf(std::shared_ptr<const io::GgufFile> file, std::span<std::byte> writable = {},
                         RepackFor repack = kernels::best_isa());
  static Model from_llama2c(std::shared_ptr<const io::Llama2cCheckpoint> checkpoint);
  // This rank's shard of a GGUF model (model_shard.cpp): its slices of the
  // weights, read from the file into memory of their own (huge pages), so a
  // rank holds about 1/(tp x pp) of the weights. Throws tokamak::Error naming
  // the numbers when a head count, FFN width or layer count does not split.
  // `parallel` must outlive the model: forward passes talk through it.
  static Model load_shard(const std::filesystem::path& path, const dist::Parallel& parallel,
                          RepackFor repack = kernels::best_isa());

  // The whole model's hyper-parameters (what tokenizer, sampler and
  // scheduler see). local_config(): those of this process's shard (heads,
  // KV heads, FFN width and layers it holds; n_vocab stays the whole), equal
  // to config() unless loaded by load_shard().
  const ModelConfig& config() const { return config_; }
  const ModelConfig& local_config() const { return local_; }
  const ShardRanges& shard() const { return shard_; }
  // The processes the model is split across; null for a whole model.
  const dist::Parallel* parallel() const { return parallel_; }
  const ModelWeights& weights() const { return weights_; }
  ModelFormat format() const { return format_; }
  // The GGUF file the model came from (its tokenizer lives there); null for llama2.c.
  const std::shared_ptr<const io::GgufFile>& gguf() const { return gguf_; }
  // The tensors a forward pass reads whole, once per pass: every layer tensor
  // (biases included), output_norm, output and rope_freqs. Not token_embd, of
  // which a pass reads one row per token (unless it is also the output).
  std::vector<const TensorView*> pass_tensors() const;
  // Their total bytes: what a decode step reads (for bandwidth figures).
  size_t weight_bytes() const;

 private:
  // The layer matrices and an untied LM head: what the matmul kernels read.
  std::vector<TensorView*> matmul_weights();
  // The matmul weights in the formats the kernels of `isa` read fastest:
  // widened (kernels/widen.h), then interleaved. `writable`: the bytes
  // that are this model's own copy (the file's, or a shard's slices).
  void prepare_weights(kernels::Isa isa, std::span<std::byte> writable) {
    widen_weights(isa, writable);
    interleave_weights(isa, writable);
    if (widened_) widened_->make_read_only();
  }
  // Widens the matmul weights whose type widened_type names into a buffer
  // of the model's, when they fit (model.cpp), releasing their compact bytes
  // where they lie in `writable`.
  void widen_weights(kernels::Isa isa, std::span<std::byte> writable);
  // Repacks the matmul weights whose type `isa` reads interleaved
  // (kernels/interleave.h): in place when they lie in `writable` or in the
  // widened weights.
  void interleave_weights(kernels::Isa isa, std::span<std::byte> writable);

  ModelConfig config_;
  ModelConfig local_;
  ShardRanges shard_;
  const dist::Parallel* parallel_ = nullptr;
  ModelWeights weights_;  // a shard's: its slices, layers [0, local_.n_layers)
  ModelFormat format_ = ModelFormat::Gguf;
  std::shared_ptr<const io::GgufFile> gguf_;               // keeps the mapping alive
  std::shared_ptr<const io::Llama2cCheckpoint> llama2c_;   // keeps the mapping alive
  std::shared_ptr<const HugePageBuffer> interleaved_;      // repacked weights not repacked in place
  std::shared_ptr<HugePageBuffer> widened_;                // widened weights (kernels/widen.h)
  std::shared_ptr<const HugePageBuffer> slices_;           // a shard's weights
};

}  // namespace tokamak
