// Which type each tensor of a model gets when a file is quantized: llama.cpp's
// file types (general.file_type) and the recipe llama-quantize follows
// (llama_tensor_get_type), so that `tokamak quantize IN OUT q4_k_m` gives the
// tensor types a llama.cpp user expects:
//   - output.weight (token_embd.weight when the output is tied) goes to Q6_K
//     unless the default type is Q8_0; Q8_0 when its rows do not fit 256 blocks;
//   - the mixes Q2_K..Q5_K_M raise some attn_v / ffn_down / attn_output tensors
//     (Q4_K_M: attn_v and ffn_down of the first and last eighth of the layers
//     and every third one between get Q6_K);
//   - a row length that is not a multiple of the chosen block falls back
//     (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0), and to F16
//     when even that does not fit. llama.cpp has no fallback for the legacy
//     types and refuses; we use F16 then, as the stories260K fixtures do;
//   - 1-D tensors and *_norm.weight stay as they are (F32).
// --pure skips the mixes (every quantizable tensor gets the default type) but
// not the fallback, which a row that does not fit the block needs anyway.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace tokamak {

// llama_ftype numbering (general.file_type). Only the types tokamak can produce.
enum class FileType : uint32_t {
  AllF32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 7, Q5_0 = 8, Q5_1 = 9,
  Q2_K = 10, Q3_K_S = 11, Q3_K_M = 12, Q3_K_L = 13, Q4_K_S = 14, Q4_K_M = 15,
  Q5_K_S = 16, Q5_K_M = 17, Q6_K = 18, BF16 = 32,
};

// Case-insensitive, as llama-quantize spells them ("Q4_K_M", "f16"), plus its
// aliases q3_k = Q3_K_M, q4_k = Q4_K_M, q5_k = Q5_K_M.
std::optional<FileType> file_type_from_name(std::string_view name);
std::string_view file_type_name(FileType t);  // "Q4_K_M", "F16", "F32"
// general.file_type's value; nullopt for llama.cpp types tokamak does not make.
std::optional<FileType> file_type_from_id(uint32_t id);
std::string file_type_names();                // every accepted name, for error messages
// The type most tensors get: Q4_K for Q4_K_M, F32 for AllF32.
DType file_type_default(FileType t);

// Shape facts of the whole model that the recipe needs.
struct RecipeModel {
  int32_t n_layers = 0;
  int32_t n_gqa = 1;           // n_heads / n_kv_heads
  int32_t n_attention_wv = 0;  // tensors named *attn_v.weight
  bool has_output = true;      // false: token_embd doubles as the output
};

// Stateful like llama.cpp's: it counts the attn_v / ffn_down tensors it has
// seen, so call type_for() once per tensor with the layers in ascending order
// (llama_tensor_order gives llama-quantize's order).
class QuantRecipe {
 public:
  QuantRecipe(FileType ftype, bool pure, RecipeModel model);

  // Whether llama-quantize would change this tensor at all (2-D+, a weight, not a norm).
  static bool quantizable(std::string_view name, int n_dims);
  // The tensor's new type (`current` when it is not quantizable).
  DType type_for(const std::string& name, const std::array<int64_t, 4>& ne, int n_dims, DType current);
  int n_fallback() const { return n_fallback_; }

 private:
  DType mixed_type(const std::string& name, int64_t ne0, DType type);
  DType fallback(int64_t ne0, DType type);

  FileType ftype_;
  bool pure_;
  RecipeModel model_;
  int i_attention_wv_ = 0;
  int i_ffn_down_ = 0;
  int n_fallback_ = 0;
};

// Indices of `names` in llama.cpp's tensor order: tensors outside blocks first,
// then block by block ("blk.N." numerically), by name within each group.
std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names);

}  // namespace tokamak
