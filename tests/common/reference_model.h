// A second, plain implementation of the decoder for tests: straightforward
// loops, weights dequantized to double, f64 accumulation, RoPE angles from the
// closed-form formulas (not ggml's float recurrence). It shares no code with
// src/model or src/kernels except the dequantizers, so agreement with the
// engine is evidence, not an echo.
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/config.h"

namespace tokamak::testing {

// Logits [n_tokens, n_vocab] of one sequence at positions 0..n-1. The
// hyper-parameters are read from the file's metadata here, independently of
// ModelConfig::from_gguf (only the struct is shared, as a bag of values).
std::vector<double> reference_logits(const io::GgufFile& file, const std::vector<int32_t>& tokens);

// What a random test model looks like; fields map to GGUF metadata.
struct RandomModelSpec {
  std::string architecture = "llama";
  int n_vocab = 64, n_embd = 32, n_layers = 2, n_heads = 4, n_kv_heads = 2, n_ff = 48, n_ctx = 256;
  int rope_dim = 0;  // 0: head_dim
  float rope_base = 10000.0f;
  std::string rope_scaling;  // "", "linear", "yarn"
  float rope_scaling_factor = 1.0f;
  int rope_n_ctx_orig = 0;
  bool rope_freqs = false;  // write a rope_freqs.weight tensor
  bool qkv_bias = false;
  int sliding_window = 0;
  float attn_softcap = 0.0f, final_softcap = 0.0f;
  bool tied_output = false;
  uint32_t seed = 1;
  // The layer matrices and an untied output: F32 N(0, 0.2) values, or random
  // blocks of a format without a quantizer (IQ3_S, TQ1_0; n_embd and n_ff
  // multiples of 256), whose values the reference reads through the
  // dequantizers like any other.
  DType matrix_type = DType::F32;
};

// Writes a GGUF with N(0, 0.1) matrices, 1 + N(0, 0.05) norms, F32 throughout
// (but spec.matrix_type).
void write_random_model(const RandomModelSpec& spec, const std::filesystem::path& path);

// A small model with heads of 64 (4 query heads over 1 KV head, 2 layers,
// vocabulary 256, context 1024): the head width that takes the integer
// attention path for q8/q4 KV on AVX-512 VNNI.
RandomModelSpec head64_spec();

}  // namespace tokamak::testing
