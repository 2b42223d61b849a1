// Hugging Face model folder -> GGUF, as llama.cpp's convert_hf_to_gguf.py
// writes it: the same general.architecture, metadata keys, tensor names and
// tokenizer keys, so the file loads in llama.cpp and here alike.
//
//   config.json                    LlamaForCausalLM / MistralForCausalLM -> "llama"
//                                  (Q and K rows permuted from HF's half-split
//                                  RoPE layout to GGML's adjacent pairs),
//                                  Qwen2ForCausalLM -> "qwen2" (q/k/v biases)
//   *.safetensors (+ index)        F32 / F16 / BF16 / F64 weights
//   tokenizer.json                 byte-fallback BPE over U+2581 pieces -> "llama"
//                                  (SentencePiece); byte-level BPE -> "gpt2"
//   tokenizer_config.json          special tokens, add_bos/eos, chat template
//
// The file is streamed: tensors are converted one at a time while it is
// written, so memory holds one tensor in the output type and one f32 row.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/gguf.h"

namespace tokamak::io {

struct HfConvertOptions {
  // Type of the 2-D weight matrices; norms, biases and other 1-D tensors are
  // always F32. Any type kernels::quantize_row supports except Q8_K. A matrix
  // whose rows are not a whole number of blocks falls back to F16 (as
  // convert_hf_to_gguf.py does), noted in the result.
  DType type = DType::F16;
  std::string name;  // general.name; default: the folder's name
};

struct HfConvertResult {
  std::string hf_architecture;  // "LlamaForCausalLM"
  std::string architecture;     // general.architecture: "llama" or "qwen2"
  std::string tokenizer_model;  // tokenizer.ggml.model: "llama" or "gpt2"
  int64_t n_tensors = 0;
  std::vector<std::string> notes;  // what the user should know (fallbacks, guesses)
};

// Converts the folder into `out`, which the caller commits. Everything is validated before the file is started: throws
// tokamak::Error naming the file and field (config.json key, tensor name and
// shape, tokenizer entry) that is missing, malformed or unsupported.
HfConvertResult convert_hf_to_gguf(const std::filesystem::path& hf_dir, OutputFile& out_file,
                                   const HfConvertOptions& options);

// The GGUF tokenizer keys (tokenizer.ggml.*, tokenizer.chat_template) from
// tokenizer.json, tokenizer_config.json and config.json's *_token_id fields.
// `n_vocab` is the model's vocabulary (embedding rows): ids beyond the
// tokenizer's are padded with "[PAD<id>]" tokens of type UNUSED. Returns
// tokenizer.ggml.model; adds notes to `notes`.
std::string convert_hf_tokenizer(const std::filesystem::path& hf_dir, int64_t n_vocab, GgufWriter& out,
                                 std::vector<std::string>& notes);

// Q/K row order: HF stores each head's rotary pairs as (i, i + head_dim/2);
// GGML's NORM RoPE wants them adjacent (2i, 2i+1). Returns, for each output
// row r of a [n_head * head_dim, ...] matrix (or bias), the HF row it comes
// from: r = h*head_dim + 2i + j  <-  h*head_dim + j*head_dim/2 + i.
std::vector<int64_t> rope_norm_row_order(int64_t n_rows, int64_t n_head);

}  // namespace tokamak::io
