// `tokamak make-model`: a GGUF file with random weights in the exact shapes of
// a real model, for benchmarks and tests (large models are never stored).
// Deterministic by seed: every row of every tensor is drawn from its own
// stream (seed, tensor name, row), so the bytes do not depend on the thread
// count, and the same seed gives the same underlying model in every type.
// Weights: matrices N(0, 1/n_in), so each projection keeps unit-scale
// activations (token_embd too, which keeps tied logits near unit scale);
// norm gains 1 + N(0, 0.02^2); QKV biases (qwen2) N(0, 0.1^2); rope_freqs
// (Llama 3) the real, computed factors. Tensors are generated and quantized
// one at a time (memory: the largest output tensor plus a row per thread).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "io/output_file.h"
#include "tools/quant_recipe.h"

namespace tokamak {

namespace io {
class GgufFile;
}

// The shape and architecture options of one real model (or a tiny model with
// the same options, for tests). Fields map to GGUF metadata.
struct ModelPreset {
  std::string_view name;
  // general.architecture: "llama" (also Mistral's, as llama.cpp's converter
  // writes it) or "qwen2" (NEOX RoPE, and the attn_{q,k,v}.bias it needs).
  std::string_view architecture;
  int32_t n_embd;
  int32_t n_ff;
  int32_t n_layers;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t n_vocab;
  int32_t n_ctx_train;
  float rope_freq_base;
  float rms_eps;
  bool tied_output;  // no output.weight: the LM head reuses token_embd
  // Llama 3.1+ RoPE scaling factor (rope_freqs.weight, with the original context
  // 8192 and low/high frequency factors 1 and 4 of Meta's configs); 0: none.
  float llama3_rope_factor = 0.0f;
  int32_t sliding_window = 0;  // <arch>.attention.sliding_window; 0: full causal attention
  std::string_view about = {};  // one line for --help: what the preset is
};

// The presets (`tokamak make-model --help` lists them): real shapes
// (tinyllama-1.1b, llama-3.2-1b, qwen2.5-0.5b, smollm2-360m, mistral-7b at
// reduced depth, mistral-7b-v0.1 with its sliding window) and tiny models
// with each family's options for tests (micro, llama3-micro, qwen2-micro,
// smollm2-micro, mistral-micro).
std::span<const ModelPreset> model_presets();
const ModelPreset* find_model_preset(std::string_view name);  // null when unknown
std::string model_preset_names();                              // "a, b, c"

struct MakeModelOptions {
  ModelPreset preset{};
  FileType ftype = FileType::F16;
  bool pure = false;  // no llama-quantize mix: every matrix gets the default type
  uint64_t seed = 0;
  // Copy this file's tokenizer.* keys (and use its vocabulary size) instead of
  // writing a synthetic SentencePiece vocabulary.
  const io::GgufFile* vocab_from = nullptr;
};

struct MadeTensor {
  std::string name;
  DType type;
  size_t n_bytes;
};

// The tensors make_model writes, in file order (llama-quantize's), with their
// types and sizes; nothing is generated. Throws tokamak::Error.
std::vector<MadeTensor> plan_model(const MakeModelOptions& options);

// Called after each tensor is made, with the tensor data bytes done and in total.
using MadeTensorCallback = std::function<void(const MadeTensor&, uint64_t bytes_done, uint64_t bytes_total)>;

// Writes the model to `out`, which the caller commits. Throws tokamak::Error.
void make_model(const MakeModelOptions& options, io::OutputFile& out, ThreadPool& pool,
                const MadeTensorCallback& on_tensor = {});

}  // namespace tokamak
