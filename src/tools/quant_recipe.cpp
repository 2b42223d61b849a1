#include "tools/quant_recipe.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace tokamak {
namespace {

struct FileTypeName {
  std::string_view name;
  FileType type;
  DType default_type;
};

// Canonical names first: file_type_name() returns the first match.
constexpr FileTypeName kFileTypes[] = {
    {"F32", FileType::AllF32, DType::F32},   {"F16", FileType::F16, DType::F16},
    {"BF16", FileType::BF16, DType::BF16},   {"Q8_0", FileType::Q8_0, DType::Q8_0},
    {"Q4_0", FileType::Q4_0, DType::Q4_0},   {"Q4_1", FileType::Q4_1, DType::Q4_1},
    {"Q5_0", FileType::Q5_0, DType::Q5_0},   {"Q5_1", FileType::Q5_1, DType::Q5_1},
    {"Q2_K", FileType::Q2_K, DType::Q2_K},   {"Q3_K_S", FileType::Q3_K_S, DType::Q3_K},
    {"Q3_K_M", FileType::Q3_K_M, DType::Q3_K}, {"Q3_K_L", FileType::Q3_K_L, DType::Q3_K},
    {"Q4_K_S", FileType::Q4_K_S, DType::Q4_K}, {"Q4_K_M", FileType::Q4_K_M, DType::Q4_K},
    {"Q5_K_S", FileType::Q5_K_S, DType::Q5_K}, {"Q5_K_M", FileType::Q5_K_M, DType::Q5_K},
    {"Q6_K", FileType::Q6_K, DType::Q6_K},
    // llama-quantize's aliases.
    {"Q3_K", FileType::Q3_K_M, DType::Q3_K}, {"Q4_K", FileType::Q4_K_M, DType::Q4_K},
    {"Q5_K", FileType::Q5_K_M, DType::Q5_K},
};

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

const FileTypeName& entry(FileType t) {
  for (const FileTypeName& e : kFileTypes) {
    if (e.type == t) return e;
  }
  return kFileTypes[0];  // unreachable for enumerators
}

bool is_block_quantized(DType t) { return dtype_traits(t).block_size > 1; }

// llama.cpp's "more bits" layers: the first and last eighth, and every third between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// "blk.N.<...>" -> N; -1 for tensors outside the blocks.
int64_t layer_of(const std::string& name) {
  if (!name.starts_with("blk.")) return -1;
  int64_t layer = 0;
  size_t i = 4;
  for (; i < name.size() && i < 4 + 9 && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    layer = layer * 10 + (name[i] - '0');
  }
  return i > 4 ? layer : -1;
}

}  // namespace

std::optional<FileType> file_type_from_name(std::string_view name) {
  for (const FileTypeName& e : kFileTypes) {
    if (iequal(e.name, name)) return e.type;
  }
  return std::nullopt;
}

std::string_view file_type_name(FileType t) { return entry(t).name; }

std::optional<FileType> file_type_from_id(uint32_t id) {
  for (const FileTypeName& e : kFileTypes) {
    if (static_cast<uint32_t>(e.type) == id) return e.type;
  }
  return std::nullopt;
}

std::string file_type_names() {
  std::string out;
  for (const FileTypeName& e : kFileTypes) {
    if (!out.empty()) out += ", ";
    for (char c : e.name) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

DType file_type_default(FileType t) { return entry(t).default_type; }

QuantRecipe::QuantRecipe(FileType ftype, bool pure, RecipeModel model) : ftype_(ftype), pure_(pure), model_(model) {}

bool QuantRecipe::quantizable(std::string_view name, int n_dims) {
  return n_dims >= 2 && name.ends_with("weight") && name.find("_norm.weight") == std::string_view::npos &&
         name.find("ffn_gate_inp.weight") == std::string_view::npos;
}

DType QuantRecipe::type_for(const std::string& name, const std::array<int64_t, 4>& ne, int n_dims, DType current) {
  if (!quantizable(name, n_dims)) return current;
  DType type = file_type_default(ftype_);
  if (!is_block_quantized(type)) return type;
  if (!pure_) type = mixed_type(name, ne[0], type);
  return fallback(ne[0], type);
}

DType QuantRecipe::mixed_type(const std::string& name, int64_t ne0, DType type) {
  using F = FileType;
  const F ft = ftype_;
  const bool is_output = name == "output.weight" || (!model_.has_output && name == "token_embd.weight");
  if (is_output) {
    if (ne0 % dtype_traits(type).block_size != 0) return DType::Q8_0;
    return type == DType::Q8_0 ? type : DType::Q6_K;
  }
  if (name == "token_embd.weight") return type;  // no rule for the types tokamak makes
  if (contains(name, "attn_v.weight")) {
    const int i = i_attention_wv_++;
    if (ft == F::Q2_K) {
      type = model_.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    } else if (ft == F::Q3_K_M) {
      type = i < 2 ? DType::Q5_K : DType::Q4_K;
    } else if (ft == F::Q3_K_L) {
      type = DType::Q5_K;
    } else if ((ft == F::Q4_K_M || ft == F::Q5_K_M) && use_more_bits(i, model_.n_attention_wv)) {
      type = DType::Q6_K;
    } else if (ft == F::Q4_K_S && i < 4) {
      type = DType::Q5_K;
    }
    // llama.cpp's 70B rule (80 layers with GQA): attn_v is 8x smaller than attn_q there.
    if (model_.n_layers == 80 && model_.n_gqa > 1 && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
    return type;
  }
  if (contains(name, "ffn_down")) {
    const int i = i_ffn_down_++;
    const int n = model_.n_layers;
    if (ft == F::Q2_K) return DType::Q3_K;
    if (ft == F::Q3_K_M) return i < n / 16 ? DType::Q5_K : DType::Q4_K;
    if (ft == F::Q3_K_L) return DType::Q5_K;
    if ((ft == F::Q4_K_M || ft == F::Q5_K_M) && use_more_bits(i, n)) return DType::Q6_K;
    if (ft == F::Q4_K_S && i < n / 8) return DType::Q5_K;
    return type;
  }
  if (contains(name, "attn_output.weight")) {
    if (ft == F::Q2_K) return DType::Q3_K;
    if (ft == F::Q3_K_M) return DType::Q4_K;
    if (ft == F::Q3_K_L) return DType::Q5_K;
  }
  return type;
}

DType QuantRecipe::fallback(int64_t ne0, DType type) {
  if (ne0 % dtype_traits(type).block_size == 0) return type;
  ++n_fallback_;
  DType next = DType::F16;
  switch (type) {
    case DType::Q2_K:
    case DType::Q3_K: next = DType::Q4_0; break;
    case DType::Q4_K: next = DType::Q5_0; break;
    case DType::Q5_K: next = DType::Q5_1; break;
    case DType::Q6_K: next = DType::Q8_0; break;
    default: break;  // legacy types: llama.cpp refuses; F16 as in the stories260K fixtures
  }
  return ne0 % dtype_traits(next).block_size == 0 ? next : DType::F16;
}

std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names) {
  std::vector<size_t> order(names.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int64_t la = layer_of(names[a]);
    const int64_t lb = layer_of(names[b]);
    return la != lb ? la < lb : names[a] < names[b];
  });
  return order;
}

}  // namespace tokamak
