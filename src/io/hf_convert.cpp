// HF folder -> GGUF: config.json to {arch}.* metadata, safetensors tensors to
// GGML names, types and row orders. The tokenizer is in hf_convert_vocab.cpp.
#include "io/hf_convert.h"

#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <span>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "kernels/quants.h"

namespace tokamak::io {
namespace {

using json = nlohmann::json;

// GGML's quantization version, written by every converter since 2023.
constexpr uint32_t kQuantizationVersion = 2;

json read_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open (a Hugging Face model folder has a config.json)");
  try {
    json j = json::parse(in);
    if (!j.is_object()) throw Error(path.string() + ": not a JSON object");
    return j;
  } catch (const json::exception& e) {
    throw Error(path.string() + ": not valid JSON: " + e.what());
  }
}

// config.json, the fields the converter uses, validated.
struct HfConfig {
  std::string file;      // for errors
  std::string hf_arch;   // architectures[0]
  std::string arch;      // general.architecture
  bool permute_qk = false;
  int64_t n_embd = 0, n_layers = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0;
  int64_t head_dim = 0;                  // head_dim, or n_embd / n_head
  bool explicit_head_dim = false;
  std::optional<int64_t> n_ctx;          // max_position_embeddings
  std::optional<double> rope_theta, rms_eps;
  std::optional<int64_t> sliding_window;
  bool tie_word_embeddings = false;
  json rope_scaling;                     // object or null

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 61) + "..." : s;
}

std::optional<int64_t> get_count(const json& c, const std::string& key, const std::string& file, bool required) {
  if (!c.contains(key) || c[key].is_null()) {
    if (required) throw Error(file + ": missing field '" + key + "'");
    return std::nullopt;
  }
  const json& v = c[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t{1} << 31) - 1) {
    throw Error(file + ": field '" + key + "' = " + shown(v) + " is not a positive 32-bit integer");
  }
  return v.get<int64_t>();
}

std::optional<double> get_positive(const json& c, const std::string& key, const std::string& file) {
  if (!c.contains(key) || c[key].is_null()) return std::nullopt;
  const json& v = c[key];
  if (!v.is_number() || !(v.get<double>() > 0.0) || !std::isfinite(v.get<double>())) {
    throw Error(file + ": field '" + key + "' = " + shown(v) + " is not a positive number");
  }
  return v.get<double>();
}

HfConfig parse_config(const std::filesystem::path& path) {
  const json c = read_config(path);
  HfConfig h;
  h.file = path.string();
  const std::string& f = h.file;
  const json* archs = c.contains("architectures") ? &c["architectures"] : nullptr;
  if (archs == nullptr || !archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    throw Error(f + ": field 'architectures' = " + (archs ? shown(*archs) : "(missing)") +
                " does not name a model class");
  }
  h.hf_arch = (*archs)[0].get<std::string>();
  if (h.hf_arch == "LlamaForCausalLM" || h.hf_arch == "MistralForCausalLM") {
    h.arch = "llama";  // convert_hf_to_gguf.py's LlamaModel takes both
    h.permute_qk = true;
  } else if (h.hf_arch == "Qwen2ForCausalLM") {
    h.arch = "qwen2";  // NEOX RoPE: Q/K rows stay in HF order
  } else {
    throw Error(f + ": unsupported architecture '" + h.hf_arch +
                "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
  }
  h.n_embd = *get_count(c, "hidden_size", f, true);
  h.n_layers = *get_count(c, "num_hidden_layers", f, true);
  h.n_head = *get_count(c, "num_attention_heads", f, true);
  h.n_head_kv = get_count(c, "num_key_value_heads", f, false).value_or(h.n_head);
  h.n_ff = *get_count(c, "intermediate_size", f, true);
  h.n_vocab = *get_count(c, "vocab_size", f, true);
  h.n_ctx = get_count(c, "max_position_embeddings", f, false);
  if (const auto hd = get_count(c, "head_dim", f, false)) {
    h.head_dim = *hd;
    h.explicit_head_dim = true;
  } else {
    if (h.n_embd % h.n_head != 0) {
      throw Error(f + ": hidden_size " + std::to_string(h.n_embd) + " is not divisible by num_attention_heads " +
                  std::to_string(h.n_head));
    }
    h.head_dim = h.n_embd / h.n_head;
  }
  if (h.n_head % h.n_head_kv != 0) {
    throw Error(f + ": num_attention_heads " + std::to_string(h.n_head) + " is not a multiple of num_key_value_heads " +
                std::to_string(h.n_head_kv));
  }
  if (h.permute_qk && h.head_dim % 2 != 0) {
    throw Error(f + ": head_dim " + std::to_string(h.head_dim) + " is odd; RoPE needs pairs");
  }
  h.rope_theta = get_positive(c, "rope_theta", f);
  h.rms_eps = get_positive(c, "rms_norm_eps", f);
  if (c.contains("tie_word_embeddings")) {
    if (!c["tie_word_embeddings"].is_boolean()) {
      throw Error(f + ": field 'tie_word_embeddings' = " + shown(c["tie_word_embeddings"]) + " is not a boolean");
    }
    h.tie_word_embeddings = c["tie_word_embeddings"].get<bool>();
  }
  // Qwen2 configs carry a sliding_window size with use_sliding_window: false.
  const bool swa_enabled = !c.contains("use_sliding_window") || c["use_sliding_window"] == true;
  if (swa_enabled) h.sliding_window = get_count(c, "sliding_window", f, false);
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null()) {
    if (!c["rope_scaling"].is_object()) {
      throw Error(f + ": field 'rope_scaling' = " + shown(c["rope_scaling"]) + " is not an object");
    }
    h.rope_scaling = c["rope_scaling"];
  }
  return h;
}

// general.file_type (llama.cpp's LlamaFileType) for a uniform output type; a
// K-quant everywhere is the "_S" (small) mix's number.
uint32_t file_type_of(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q2_K: return 10;
    case DType::Q3_K: return 11;
    case DType::Q4_K: return 14;
    case DType::Q5_K: return 16;
    case DType::Q6_K: return 18;
    case DType::BF16: return 32;
    default: break;
  }
  throw Error("convert: --type " + std::string(dtype_name(t)) +
              " is not an output type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K..q6_K)");
}

// Scaling keys as convert_hf_to_gguf.py writes them; llama3 instead gets a
// rope_freqs tensor (rope_freqs_for()).
void write_rope_scaling(const HfConfig& h, GgufWriter& out, std::vector<std::string>& notes) {
  if (h.rope_scaling.is_null()) return;
  const json& rs = h.rope_scaling;
  const json& kind = rs.contains("rope_type") ? rs["rope_type"] : rs.contains("type") ? rs["type"] : json();
  const std::string type = kind.is_string() ? kind.get<std::string>() : "";
  const std::string p = h.arch + ".rope.scaling.";
  const auto factor = get_positive(rs, "factor", h.file + ": rope_scaling");
  if ((type == "linear" || type == "yarn") && factor) {
    out.set_string(p + "type", type);
    out.set_f32(p + "factor", static_cast<float>(*factor));
    if (type == "yarn") {
      if (const auto orig = get_count(rs, "original_max_position_embeddings", h.file + ": rope_scaling", false)) {
        out.set_u32(p + "original_context_length", static_cast<uint32_t>(*orig));
      }
    }
  } else if (type != "llama3" && type != "default") {
    notes.push_back("rope_scaling " + shown(rs) + " is not converted (known: linear, yarn, llama3)");
  }
}

// Llama 3's per-frequency RoPE factors [head_dim / 2] (the rope_freqs.weight
// tensor llama.cpp's converter generates), or empty when not llama3 scaling.
std::vector<float> rope_freqs_for(const HfConfig& h) {
  if (h.rope_scaling.is_null()) return {};
  const json& rs = h.rope_scaling;
  const json& kind = rs.contains("rope_type") ? rs["rope_type"] : rs.contains("type") ? rs["type"] : json();
  if (kind != "llama3") return {};
  const std::string where = h.file + ": rope_scaling";
  const double base = h.rope_theta.value_or(10000.0);
  const double factor = get_positive(rs, "factor", where).value_or(8.0);
  const double low = get_positive(rs, "low_freq_factor", where).value_or(1.0);
  const double high = get_positive(rs, "high_freq_factor", where).value_or(4.0);
  const double old_ctx = static_cast<double>(
      get_count(rs, "original_max_position_embeddings", where, false).value_or(8192));
  if (high == low) throw Error(where + ": high_freq_factor equals low_freq_factor");
  const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  std::vector<float> factors;
  for (int64_t i = 0; i < h.head_dim; i += 2) {
    const double exponent = static_cast<double>(i) / static_cast<double>(h.head_dim);
    const float freq = static_cast<float>(1.0 / std::pow(base, exponent));
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

void write_model_metadata(const HfConfig& h, const std::string& name, DType type, GgufWriter& out,
                          std::vector<std::string>& notes) {
  const std::string p = h.arch + ".";
  out.set_string("general.architecture", h.arch);
  out.set_string("general.type", "model");
  out.set_string("general.name", name);
  out.set_u32(p + "block_count", static_cast<uint32_t>(h.n_layers));
  if (h.n_ctx) out.set_u32(p + "context_length", static_cast<uint32_t>(*h.n_ctx));
  out.set_u32(p + "embedding_length", static_cast<uint32_t>(h.n_embd));
  out.set_u32(p + "feed_forward_length", static_cast<uint32_t>(h.n_ff));
  out.set_u32(p + "attention.head_count", static_cast<uint32_t>(h.n_head));
  out.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(h.n_head_kv));
  if (h.rope_theta) out.set_f32(p + "rope.freq_base", static_cast<float>(*h.rope_theta));
  if (h.rms_eps) out.set_f32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(*h.rms_eps));
  if (h.explicit_head_dim) {
    out.set_u32(p + "attention.key_length", static_cast<uint32_t>(h.head_dim));
    out.set_u32(p + "attention.value_length", static_cast<uint32_t>(h.head_dim));
  }
  out.set_u32("general.file_type", file_type_of(type));
  if (h.arch == "llama") {
    out.set_u32(p + "vocab_size", static_cast<uint32_t>(h.n_vocab));
    out.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(h.head_dim));
  }
  write_rope_scaling(h, out, notes);
  if (h.sliding_window) {
    out.set_u32(p + "attention.sliding_window", static_cast<uint32_t>(*h.sliding_window));
    if (h.arch == "llama") notes.push_back("sliding_window " + std::to_string(*h.sliding_window) +
                                           " is recorded; llama.cpp ignores it for the llama architecture");
  }
}

// One GGUF tensor to produce from one HF tensor.
struct Planned {
  std::string gguf_name;
  const SafetensorsTensor* src = nullptr;
  std::vector<int64_t> expected;  // HF shape, outermost first
  int64_t permute_heads = 0;      // > 0: rope_norm_row_order over this many heads
  bool matrix = false;            // 2-D weight: gets the output type
};

// The HF -> GGUF names of one layer's tensors; [n_out, n_in] shapes in HF order.
struct LayerTensor {
  const char* hf;
  const char* gguf;
  bool required;
};
constexpr LayerTensor kLayerTensors[] = {
    {"input_layernorm.weight", "attn_norm.weight", true},
    {"self_attn.q_proj.weight", "attn_q.weight", true},
    {"self_attn.q_proj.bias", "attn_q.bias", false},
    {"self_attn.k_proj.weight", "attn_k.weight", true},
    {"self_attn.k_proj.bias", "attn_k.bias", false},
    {"self_attn.v_proj.weight", "attn_v.weight", true},
    {"self_attn.v_proj.bias", "attn_v.bias", false},
    {"self_attn.o_proj.weight", "attn_output.weight", true},
    {"post_attention_layernorm.weight", "ffn_norm.weight", true},
    {"mlp.gate_proj.weight", "ffn_gate.weight", true},
    {"mlp.up_proj.weight", "ffn_up.weight", true},
    {"mlp.down_proj.weight", "ffn_down.weight", true},
};

std::vector<int64_t> layer_shape(const HfConfig& h, std::string_view hf) {
  if (hf == "input_layernorm.weight" || hf == "post_attention_layernorm.weight") return {h.n_embd};
  if (hf == "self_attn.q_proj.weight") return {h.q_dim(), h.n_embd};
  if (hf == "self_attn.q_proj.bias") return {h.q_dim()};
  if (hf == "self_attn.k_proj.weight" || hf == "self_attn.v_proj.weight") return {h.kv_dim(), h.n_embd};
  if (hf == "self_attn.k_proj.bias" || hf == "self_attn.v_proj.bias") return {h.kv_dim()};
  if (hf == "self_attn.o_proj.weight") return {h.n_embd, h.q_dim()};
  if (hf == "mlp.down_proj.weight") return {h.n_embd, h.n_ff};
  return {h.n_ff, h.n_embd};  // gate_proj, up_proj
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Every HF tensor is mapped or deliberately skipped; an unknown one is an
// error (as in convert_hf_to_gguf.py), so nothing is dropped silently.
std::vector<Planned> plan_tensors(const HfConfig& h, const SafetensorsModel& st, std::vector<std::string>& notes) {
  std::map<std::string, Planned> by_hf;  // HF name -> plan
  const auto want = [&](const std::string& hf, const std::string& gguf, std::vector<int64_t> shape, bool required,
                        int64_t permute_heads) {
    const SafetensorsTensor* t = st.find(hf);
    if (t == nullptr) {
      if (required) throw Error("convert: the safetensors have no tensor '" + hf + "'");
      return;
    }
    if (t->shape != shape) {
      throw Error("convert: tensor '" + hf + "' has shape " + t->shape_string() + ", config.json implies " +
                  shape_str(shape));
    }
    by_hf[hf] = {gguf, t, std::move(shape), permute_heads, false};
    by_hf[hf].matrix = by_hf[hf].expected.size() == 2;
  };
  want("model.embed_tokens.weight", "token_embd.weight", {h.n_vocab, h.n_embd}, true, 0);
  for (int64_t i = 0; i < h.n_layers; ++i) {
    const std::string hp = "model.layers." + std::to_string(i) + ".";
    const std::string gp = "blk." + std::to_string(i) + ".";
    for (const LayerTensor& lt : kLayerTensors) {
      const std::string_view hf = lt.hf;
      int64_t heads = 0;
      if (h.permute_qk && hf.starts_with("self_attn.q_proj")) heads = h.n_head;
      if (h.permute_qk && hf.starts_with("self_attn.k_proj")) heads = h.n_head_kv;
      want(hp + lt.hf, gp + lt.gguf, layer_shape(h, hf), lt.required, heads);
    }
  }
  want("model.norm.weight", "output_norm.weight", {h.n_embd}, true, 0);
  want("lm_head.weight", "output.weight", {h.n_vocab, h.n_embd}, false, 0);
  if (st.find("lm_head.weight") == nullptr && !h.tie_word_embeddings) {
    notes.push_back("no lm_head.weight although tie_word_embeddings is false: the output reuses the embedding");
  }

  for (const std::string& name : st.names()) {
    if (by_hf.count(name) != 0 || name.ends_with(".rotary_emb.inv_freq")) continue;
    throw Error("convert: cannot map tensor '" + name + "' of " + h.hf_arch + " to a GGUF tensor name");
  }
  // GGUF order: embedding, layers in order, output (by_hf is sorted by HF name).
  std::vector<Planned> plan;
  const auto take = [&](const std::string& hf) {
    if (const auto it = by_hf.find(hf); it != by_hf.end()) plan.push_back(it->second);
  };
  take("model.embed_tokens.weight");
  for (int64_t i = 0; i < h.n_layers; ++i) {
    for (const LayerTensor& lt : kLayerTensors) take("model.layers." + std::to_string(i) + "." + lt.hf);
  }
  take("model.norm.weight");
  take("lm_head.weight");
  return plan;
}

// The bytes of one GGUF tensor into `out`: rows of the HF tensor (permuted if
// asked) converted to `type` one at a time. Cost: one f32 row of scratch.
void convert_tensor(const Planned& p, DType type, std::span<std::byte> out) {
  const SafetensorsTensor& t = *p.src;
  const bool is_2d = t.shape.size() == 2;
  // A permuted bias is a column: its "rows" are single elements.
  const int64_t rows = is_2d ? t.shape[0] : p.permute_heads > 0 ? t.shape[0] : 1;
  const int64_t cols = is_2d ? t.shape[1] : p.permute_heads > 0 ? 1 : t.shape[0];
  const std::vector<int64_t> order = p.permute_heads > 0 ? rope_norm_row_order(rows, p.permute_heads)
                                                         : std::vector<int64_t>{};
  const size_t row_size = row_bytes(type, cols);
  if (out.size() != row_size * static_cast<size_t>(rows)) {
    throw Error("convert: tensor '" + t.name + "': " + std::to_string(out.size()) + " output bytes for " +
                std::to_string(rows) + " rows of " + std::to_string(row_size));
  }
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src_row = order.empty() ? r : order[static_cast<size_t>(r)];
    read_f32(t, src_row * cols, cols, row.data());
    for (int64_t c = 0; c < cols; ++c) {
      if (!std::isfinite(row[static_cast<size_t>(c)])) {
        throw Error("convert: tensor '" + t.name + "' has a non-finite value at row " + std::to_string(src_row) +
                    ", column " + std::to_string(c));
      }
    }
    kernels::quantize_row(type, row.data(), out.data() + static_cast<size_t>(r) * row_size, cols);
  }
}

std::string folder_name(const std::filesystem::path& dir) {
  std::filesystem::path p = dir;
  if (p.filename().empty()) p = p.parent_path();  // "dir/"
  return p.filename().string();
}

}  // namespace

std::vector<int64_t> rope_norm_row_order(int64_t n_rows, int64_t n_head) {
  if (n_head <= 0 || n_rows % (2 * n_head) != 0) {
    throw Error("convert: " + std::to_string(n_rows) + " rows do not split into " + std::to_string(n_head) +
                " heads of rotary pairs");
  }
  const int64_t head_dim = n_rows / n_head, half = head_dim / 2;
  std::vector<int64_t> order(static_cast<size_t>(n_rows));
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        order[static_cast<size_t>(h * head_dim + 2 * i + j)] = h * head_dim + j * half + i;
      }
    }
  }
  return order;
}

HfConvertResult convert_hf_to_gguf(const std::filesystem::path& hf_dir, OutputFile& out_file,
                                   const HfConvertOptions& options) {
  (void)file_type_of(options.type);  // an unsupported --type fails before any work
  HfConvertResult result;
  const HfConfig h = parse_config(hf_dir / "config.json");
  result.hf_architecture = h.hf_arch;
  result.architecture = h.arch;
  const SafetensorsModel st = SafetensorsModel::open(hf_dir);
  const std::vector<Planned> plan = plan_tensors(h, st, result.notes);

  GgufWriter out;
  write_model_metadata(h, options.name.empty() ? folder_name(hf_dir) : options.name, options.type, out, result.notes);
  result.tokenizer_model = convert_hf_tokenizer(hf_dir, h.n_vocab, out, result.notes);
  out.set_u32("general.quantization_version", kQuantizationVersion);

  if (const std::vector<float> freqs = rope_freqs_for(h); !freqs.empty()) {
    out.add_tensor("rope_freqs.weight", DType::F32, {static_cast<int64_t>(freqs.size())},
                   std::as_bytes(std::span<const float>(freqs)));
  }
  const size_t first_planned = out.n_tensors();
  std::vector<DType> types;  // [plan.size()]
  int64_t n_fallback = 0;
  for (const Planned& p : plan) {
    DType type = p.matrix ? options.type : DType::F32;
    const int64_t cols = p.expected.back();
    if (cols % dtype_traits(type).block_size != 0) {
      type = DType::F16;
      ++n_fallback;
      if (n_fallback <= 3) {
        result.notes.push_back(p.gguf_name + ": rows of " + std::to_string(cols) + " are not whole " +
                               std::string(dtype_name(options.type)) + " blocks; stored as f16");
      }
    }
    // GGML order: ne[0] is the innermost (HF's last) dimension.
    out.declare_tensor(p.gguf_name, type, std::vector<int64_t>(p.expected.rbegin(), p.expected.rend()));
    types.push_back(type);
  }
  if (n_fallback > 3) result.notes.push_back(std::to_string(n_fallback - 3) + " more tensors stored as f16");
  out.write(out_file, [&](size_t index, std::span<std::byte> bytes) {
    const size_t k = index - first_planned;
    convert_tensor(plan.at(k), types.at(k), bytes);
  });
  result.n_tensors = static_cast<int64_t>(out.n_tensors());
  return result;
}

}  // namespace tokamak::io
