// tokamak convert: tiny Hugging Face folders are built here (random weights in
// safetensors written by this file's own writer, config.json, tokenizer.json,
// tokenizer_config.json), converted, and the GGUF checked: metadata keys,
// tensor names and shapes, the Q/K row permutation (computed here the way
// numpy's reshape/swapaxes does it), the tokenizer, and for llama that the
// logits equal those of a GGUF built directly from the same weights.
#include "io/hf_convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "common/test_data.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/output_file.h"
#include "kernels/quants.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::io {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const std::string kSp = "\xE2\x96\x81";  // U+2581

// ------------------------------------------------ a small safetensors writer

struct HfTensor {
  std::string dtype;            // "F32", "F16" or "BF16"
  std::vector<int64_t> shape;   // HF order
  std::vector<float> values;    // exactly representable in dtype
};

// Rounds to what the dtype stores (BF16 by truncation, a rule of this writer).
float stored(const std::string& dtype, float v) {
  if (dtype == "F16") return fp16_to_fp32(fp32_to_fp16(v));
  // The mask is chosen on the bits, not by returning early: GCC 12.2 -O2 turns
  // `if (dtype == "BF16") return bit_cast<float>(bits & mask); return v;` into `return v;`.
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  return std::bit_cast<float>(dtype == "BF16" ? bits & 0xFFFF0000u : bits);
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void write_safetensors(const fs::path& path, const std::map<std::string, HfTensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const size_t begin = data.size();
    for (float v : t.values) {
      if (t.dtype == "F32") {
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        uint16_t h;
        if (t.dtype == "F16") {
          h = fp32_to_fp16(v);
        } else {
          uint32_t u;
          std::memcpy(&u, &v, 4);
          h = static_cast<uint16_t>(u >> 16);
        }
        data.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  write_bytes(path, file + text + data);
}

void write_json(const fs::path& path, const json& j) { write_bytes(path, j.dump(2)); }

// ------------------------------------------------------------- the folders

struct Spec {
  std::string hf_arch = "LlamaForCausalLM";
  int64_t n_embd = 32, n_layers = 2, n_head = 4, n_head_kv = 2, n_ff = 64, n_vocab = 0;
  bool qkv_bias = false;
  bool tied = false;
  int64_t head_dim() const { return n_embd / n_head; }
};

// HF weights of a Spec, random, each in one of the three dtypes.
std::map<std::string, HfTensor> random_weights(const Spec& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  const char* dtypes[] = {"F32", "BF16", "F16"};
  int k = 0;
  std::map<std::string, HfTensor> w;
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, float center) {
    HfTensor t{dtypes[k++ % 3], std::move(shape), {}};
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    for (int64_t i = 0; i < n; ++i) t.values.push_back(stored(t.dtype, center + normal(rng)));
    w[name] = std::move(t);
  };
  const int64_t hd = s.head_dim(), q = s.n_head * hd, kv = s.n_head_kv * hd;
  add("model.embed_tokens.weight", {s.n_vocab, s.n_embd}, 0.0f);
  for (int64_t i = 0; i < s.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {s.n_embd}, 1.0f);
    add(p + "self_attn.q_proj.weight", {q, s.n_embd}, 0.0f);
    add(p + "self_attn.k_proj.weight", {kv, s.n_embd}, 0.0f);
    add(p + "self_attn.v_proj.weight", {kv, s.n_embd}, 0.0f);
    if (s.qkv_bias) {
      add(p + "self_attn.q_proj.bias", {q}, 0.0f);
      add(p + "self_attn.k_proj.bias", {kv}, 0.0f);
      add(p + "self_attn.v_proj.bias", {kv}, 0.0f);
    }
    add(p + "self_attn.o_proj.weight", {s.n_embd, q}, 0.0f);
    add(p + "post_attention_layernorm.weight", {s.n_embd}, 1.0f);
    add(p + "mlp.gate_proj.weight", {s.n_ff, s.n_embd}, 0.0f);
    add(p + "mlp.up_proj.weight", {s.n_ff, s.n_embd}, 0.0f);
    add(p + "mlp.down_proj.weight", {s.n_embd, s.n_ff}, 0.0f);
  }
  add("model.norm.weight", {s.n_embd}, 1.0f);
  if (!s.tied) add("lm_head.weight", {s.n_vocab, s.n_embd}, 0.0f);
  return w;
}

json base_config(const Spec& s) {
  return {{"architectures", {s.hf_arch}},   {"hidden_size", s.n_embd},
          {"num_hidden_layers", s.n_layers}, {"num_attention_heads", s.n_head},
          {"num_key_value_heads", s.n_head_kv}, {"intermediate_size", s.n_ff},
          {"vocab_size", s.n_vocab},         {"max_position_embeddings", 128},
          {"rope_theta", 10000.0},           {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", s.tied}};
}

// An SPM-style tokenizer.json (byte-fallback BPE over U+2581 pieces, as HF
// writes Llama 2's): <unk> <s> </s>, 256 byte tokens, letters, then merged
// tokens in merge order. "b c" ranks before "a b", so "abc" must become
// [a, bc]; merging the leftmost pair first would give [ab, c].
struct SpmVocab {
  std::vector<std::string> pieces;
  std::vector<std::pair<std::string, std::string>> merges;
  int32_t id(const std::string& piece) const {
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (pieces[i] == piece) return static_cast<int32_t>(i);
    }
    ADD_FAILURE() << "no piece " << piece;
    return -1;
  }
};

SpmVocab spm_vocab() {
  SpmVocab v;
  v.pieces = {"<unk>", "<s>", "</s>"};
  char hex[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    v.pieces.emplace_back(hex);
  }
  for (const char* c : {"a", "b", "c", "d", "e", "h", "l", "o", "r", "w"}) v.pieces.emplace_back(c);
  v.pieces.push_back(kSp);
  v.merges = {{"b", "c"},     {"a", "b"},        {kSp, "h"},  {"e", "l"},         {"l", "o"}, {kSp + "h", "el"},
              {kSp + "hel", "lo"}, {kSp, "w"}, {"o", "r"}, {kSp + "w", "or"}, {"l", "d"}, {kSp + "wor", "ld"}};
  for (const auto& [a, b] : v.merges) v.pieces.push_back(a + b);
  return v;
}

json spm_tokenizer_json(const SpmVocab& v) {
  json vocab = json::object();
  for (size_t i = 0; i < v.pieces.size(); ++i) vocab[v.pieces[i]] = i;
  json merges = json::array();
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  json added = json::array();
  for (int i = 0; i < 3; ++i) added.push_back({{"id", i}, {"content", v.pieces[static_cast<size_t>(i)]}, {"special", true}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", kSp}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSp}}}}}},
          {"pre_tokenizer", nullptr},
          {"decoder", {{"type", "Sequence"}, {"decoders", json::array()}}},
          {"model",
           {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true}, {"vocab", vocab}, {"merges", merges}}}};
}

const std::string kTemplate = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}";

class HfConvert : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("hf_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }

  // A llama (or mistral) folder with the SPM tokenizer, its weights in two
  // shards named by an index. config vocab_size pads the tokenizer's 282 to 288.
  fs::path make_llama(Spec s, const json& extra_config = json::object()) {
    const fs::path dir = root_ / "llama-tiny";
    fs::create_directories(dir);
    vocab_ = spm_vocab();
    s.n_vocab = 288;
    spec_ = s;
    weights_ = random_weights(s, 17);
    json config = base_config(s);
    config["bos_token_id"] = 1;
    config["eos_token_id"] = 2;
    config.update(extra_config);
    write_json(dir / "config.json", config);
    write_json(dir / "tokenizer.json", spm_tokenizer_json(vocab_));
    write_json(dir / "tokenizer_config.json", {{"add_bos_token", true},
                                               {"add_eos_token", false},
                                               {"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
                                               {"eos_token", "</s>"},
                                               {"unk_token", "<unk>"},
                                               {"chat_template", kTemplate}});
    std::map<std::string, HfTensor> first, second;
    json weight_map = json::object();
    for (const auto& [name, t] : weights_) {
      const bool in_first = name.starts_with("model.embed_tokens") || name.starts_with("model.layers.0.");
      (in_first ? first : second)[name] = t;
      weight_map[name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    write_safetensors(dir / "model-00001-of-00002.safetensors", first);
    write_safetensors(dir / "model-00002-of-00002.safetensors", second);
    write_json(dir / "model.safetensors.index.json", {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}});
    return dir;
  }

  // Qwen2: byte-level BPE tokenizer.json, q/k/v biases, tied output, YaRN, a
  // sliding window that is switched off; one model.safetensors.
  fs::path make_qwen2() {
    const fs::path dir = root_ / "qwen-tiny";
    fs::create_directories(dir);
    Spec s;
    s.hf_arch = "Qwen2ForCausalLM";
    s.n_layers = 1;
    s.n_vocab = 20;
    s.qkv_bias = true;
    s.tied = true;
    spec_ = s;
    weights_ = random_weights(s, 3);
    json config = base_config(s);
    config.update({{"rope_theta", 1000000.0},
                   {"sliding_window", 4096},
                   {"use_sliding_window", false},
                   {"bos_token_id", 14},
                   {"eos_token_id", 16},
                   {"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}}}});
    write_json(dir / "config.json", config);
    const std::vector<std::string> pieces = {"h", "e", "l", "o", "\xC4\xA0", "w", "r", "d", "he", "ll", "hell",
                                             "hello", "\xC4\xA0w", "or"};
    json vocab = json::object();
    for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = i;
    const std::string regex =
        R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
    write_json(dir / "tokenizer.json",
               {{"added_tokens",
                 {{{"id", 14}, {"content", "<|endoftext|>"}, {"special", true}},
                  {{"id", 15}, {"content", "<|im_start|>"}, {"special", true}},
                  {{"id", 16}, {"content", "<|im_end|>"}, {"special", true}},
                  {{"id", 17}, {"content", kSp + "user" + kSp + "tok"}, {"special", false}}}},
                {"pre_tokenizer",
                 {{"type", "Sequence"},
                  {"pretokenizers",
                   {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
                {"decoder", {{"type", "ByteLevel"}}},
                {"model",
                 {{"type", "BPE"},
                  {"byte_fallback", false},
                  {"vocab", vocab},
                  {"merges", json::array({json::array({"h", "e"}), json::array({"l", "l"}), json::array({"he", "ll"}),
                                          json::array({"hell", "o"}), json::array({"\xC4\xA0", "w"}),
                                          json::array({"o", "r"}), json::array({"a b", "c"})})}}}});
    write_json(dir / "tokenizer_config.json",
               {{"bos_token", nullptr},
                {"eos_token", "<|im_end|>"},
                {"pad_token", "<|endoftext|>"},
                {"chat_template", {{{"name", "default"}, {"template", "D"}}, {{"name", "tool use"}, {"template", "T"}}}}});
    write_safetensors(dir / "model.safetensors", weights_);
    return dir;
  }

  fs::path convert(const fs::path& dir, DType type, HfConvertResult* result = nullptr) {
    const fs::path out = root_ / (dir.filename().string() + "-" + std::string(dtype_name(type)) + ".gguf");
    HfConvertOptions options;
    options.type = type;
    OutputFile file = OutputFile::create(out);
    const HfConvertResult r = convert_hf_to_gguf(dir, file, options);
    file.commit();
    if (result != nullptr) *result = r;
    return out;
  }

  // The GGUF built directly from weights_ (the same values, GGUF layout; for
  // llama Q/K permuted here): what the converter must reproduce.
  fs::path make_direct(const std::string& arch) {
    const Spec& s = spec_;
    const bool llama = arch == "llama";
    const std::string p = arch + ".";
    GgufWriter w;
    w.set_string("general.architecture", arch);
    w.set_u32(p + "block_count", static_cast<uint32_t>(s.n_layers));
    w.set_u32(p + "context_length", 128);
    w.set_u32(p + "embedding_length", static_cast<uint32_t>(s.n_embd));
    w.set_u32(p + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
    w.set_u32(p + "attention.head_count", static_cast<uint32_t>(s.n_head));
    w.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
    w.set_f32(p + "rope.freq_base", llama ? 10000.0f : 1000000.0f);
    w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
    if (!llama) {  // make_qwen2()'s YaRN
      w.set_string(p + "rope.scaling.type", "yarn");
      w.set_f32(p + "rope.scaling.factor", 4.0f);
      w.set_u32(p + "rope.scaling.original_context_length", 32768);
    }
    const auto add = [&](const std::string& gguf, const std::string& hf, int64_t permute_heads) {
      const HfTensor& t = weights_.at(hf);
      std::vector<float> v = llama && permute_heads > 0 ? permuted(t, permute_heads) : t.values;
      const std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
      w.add_tensor(gguf, DType::F32, ne, std::as_bytes(std::span<const float>(v)));
    };
    add("token_embd.weight", "model.embed_tokens.weight", 0);
    add("output_norm.weight", "model.norm.weight", 0);
    if (!s.tied) add("output.weight", "lm_head.weight", 0);
    for (int64_t i = 0; i < s.n_layers; ++i) {
      const std::string g = "blk." + std::to_string(i) + ".", h = "model.layers." + std::to_string(i) + ".";
      add(g + "attn_norm.weight", h + "input_layernorm.weight", 0);
      add(g + "attn_q.weight", h + "self_attn.q_proj.weight", s.n_head);
      add(g + "attn_k.weight", h + "self_attn.k_proj.weight", s.n_head_kv);
      add(g + "attn_v.weight", h + "self_attn.v_proj.weight", 0);
      if (s.qkv_bias) {
        add(g + "attn_q.bias", h + "self_attn.q_proj.bias", 0);
        add(g + "attn_k.bias", h + "self_attn.k_proj.bias", 0);
        add(g + "attn_v.bias", h + "self_attn.v_proj.bias", 0);
      }
      add(g + "attn_output.weight", h + "self_attn.o_proj.weight", 0);
      add(g + "ffn_norm.weight", h + "post_attention_layernorm.weight", 0);
      add(g + "ffn_gate.weight", h + "mlp.gate_proj.weight", 0);
      add(g + "ffn_up.weight", h + "mlp.up_proj.weight", 0);
      add(g + "ffn_down.weight", h + "mlp.down_proj.weight", 0);
    }
    const fs::path out = root_ / ("direct-" + arch + ".gguf");
    w.write(out);
    return out;
  }

  // numpy: w.reshape(n_head, 2, rows / n_head / 2, cols).swapaxes(1, 2).reshape(w.shape)
  // Element (h, a, b, c) of the swapped view is element (h, b, a, c) of the reshaped one.
  static std::vector<float> permuted(const HfTensor& t, int64_t n_head) {
    const int64_t rows = t.shape[0], cols = t.shape.size() == 2 ? t.shape[1] : 1, half = rows / n_head / 2;
    std::vector<float> out;
    out.reserve(t.values.size());
    for (int64_t h = 0; h < n_head; ++h) {
      for (int64_t a = 0; a < half; ++a) {
        for (int64_t b = 0; b < 2; ++b) {
          for (int64_t c = 0; c < cols; ++c) {
            out.push_back(t.values[static_cast<size_t>(((h * 2 + b) * half + a) * cols + c)]);
          }
        }
      }
    }
    return out;
  }

  fs::path root_;
  Spec spec_;
  SpmVocab vocab_;
  std::map<std::string, HfTensor> weights_;
};

std::vector<float> logits_of(const Model& model, const std::vector<int32_t>& ids) {
  ThreadPool pool(1);
  kv::KvCache kv(kv_layout_for(model.config(), kv::KvFormat{}), 4);
  Forward forward(model, pool);
  Batch batch;
  for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), 0, true);
  const std::span<const float> rows = forward.run(batch, kv);
  return {rows.begin(), rows.end()};
}

// Bitwise equal logits at every position of `ids`, and logits that vary.
void expect_same_logits(const Model& converted, const Model& direct, const std::vector<int32_t>& ids) {
  const std::vector<float> a = logits_of(converted, ids);
  const std::vector<float> b = logits_of(direct, ids);
  ASSERT_EQ(a.size(), ids.size() * static_cast<size_t>(direct.config().n_vocab));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
  float spread = 0.0f;
  for (float v : a) spread = std::max(spread, std::fabs(v - a[0]));
  EXPECT_GT(spread, 0.1f);  // the logits carry information (the check is not vacuous)
}

std::vector<float> f32_values(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* info = f.find_tensor(name);
  EXPECT_NE(info, nullptr) << name;
  if (info == nullptr) return {};
  const TensorView v = f.view(*info);
  std::vector<float> out(static_cast<size_t>(v.n_elements()));
  for (int64_t r = 0; r < v.n_rows(); ++r) {
    kernels::dequantize_row(v.type, v.row(r), out.data() + r * v.ne[0], v.ne[0]);
  }
  return out;
}

std::vector<int64_t> shape_of(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* info = f.find_tensor(name);
  if (info == nullptr) return {};
  return {info->ne.begin(), info->ne.begin() + info->n_dims};
}

// -------------------------------------------------------------------- llama

TEST_F(HfConvert, LlamaMetadataTensorsAndTokenizer) {
  const fs::path dir = make_llama(Spec{});
  HfConvertResult r;
  const fs::path out = convert(dir, DType::F32, &r);
  EXPECT_EQ(r.architecture, "llama");
  EXPECT_EQ(r.tokenizer_model, "llama");
  const GgufFile f = GgufFile::open(out);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "llama-tiny");
  EXPECT_EQ(f.get_int("general.file_type"), 0);
  EXPECT_EQ(f.get_int("general.quantization_version"), 2);
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_EQ(f.get_int("llama.context_length"), 128);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 32);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 64);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 8);
  EXPECT_EQ(f.get_int("llama.vocab_size"), 288);
  EXPECT_FLOAT_EQ(*f.get_float("llama.rope.freq_base"), 10000.0f);
  EXPECT_FLOAT_EQ(*f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(f.find("llama.attention.sliding_window"), nullptr);

  // Tensor names and GGML shapes (HF's reversed).
  EXPECT_EQ(f.tensors().size(), 3u + 9u * 2);
  EXPECT_EQ(shape_of(f, "token_embd.weight"), (std::vector<int64_t>{32, 288}));
  EXPECT_EQ(shape_of(f, "output.weight"), (std::vector<int64_t>{32, 288}));
  EXPECT_EQ(shape_of(f, "output_norm.weight"), (std::vector<int64_t>{32}));
  EXPECT_EQ(shape_of(f, "blk.1.attn_q.weight"), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(shape_of(f, "blk.1.attn_k.weight"), (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(shape_of(f, "blk.0.attn_output.weight"), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(shape_of(f, "blk.0.ffn_down.weight"), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(shape_of(f, "blk.0.ffn_gate.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(shape_of(f, "blk.1.ffn_norm.weight"), (std::vector<int64_t>{32}));

  // Q/K rows in GGML's order; everything else as stored.
  for (int layer = 0; layer < 2; ++layer) {
    const std::string g = "blk." + std::to_string(layer) + ".", h = "model.layers." + std::to_string(layer) + ".";
    const std::vector<float> q = f32_values(f, g + "attn_q.weight");
    const std::vector<float> k = f32_values(f, g + "attn_k.weight");
    EXPECT_EQ(q, permuted(weights_.at(h + "self_attn.q_proj.weight"), 4));
    EXPECT_EQ(k, permuted(weights_.at(h + "self_attn.k_proj.weight"), 2));
    EXPECT_NE(q, weights_.at(h + "self_attn.q_proj.weight").values);
    EXPECT_EQ(f32_values(f, g + "attn_v.weight"), weights_.at(h + "self_attn.v_proj.weight").values);
    EXPECT_EQ(f32_values(f, g + "ffn_down.weight"), weights_.at(h + "mlp.down_proj.weight").values);
  }
  EXPECT_EQ(f32_values(f, "token_embd.weight"), weights_.at("model.embed_tokens.weight").values);

  // Tokenizer keys.
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "default");
  const GgufValue* tokens = f.get_array("tokenizer.ggml.tokens", GgufType::STRING);
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->strings.size(), 288u);
  for (size_t i = 0; i < vocab_.pieces.size(); ++i) EXPECT_EQ(tokens->strings[i], vocab_.pieces[i]) << i;
  EXPECT_EQ(tokens->strings[282], "[PAD282]");
  const GgufValue* types = f.get_array("tokenizer.ggml.token_type", GgufType::I32);
  ASSERT_NE(types, nullptr);
  EXPECT_EQ(types->ints[0], 2);    // <unk>: unknown
  EXPECT_EQ(types->ints[1], 3);    // <s>: control
  EXPECT_EQ(types->ints[2], 3);
  EXPECT_EQ(types->ints[3], 6);    // <0x00>: byte
  EXPECT_EQ(types->ints[258], 6);  // <0xFF>
  EXPECT_EQ(types->ints[259], 1);  // "a"
  EXPECT_EQ(types->ints[287], 5);  // padding: unused
  const GgufValue* scores = f.get_array("tokenizer.ggml.scores", GgufType::F32);
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(scores->floats[static_cast<size_t>(vocab_.id("bc"))], 0.0);  // merge 0
  EXPECT_EQ(scores->floats[static_cast<size_t>(vocab_.id("ab"))], -1.0);  // merge 1
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f.get_int("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_eos_token"), false);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_space_prefix"), true);
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), kTemplate);
  EXPECT_EQ(f.find("tokenizer.ggml.merges"), nullptr);  // SPM vocabularies merge by score
}

TEST_F(HfConvert, ConvertedLlamaLoadsTokenizesAndMatchesTheDirectGguf) {
  const fs::path dir = make_llama(Spec{});
  const Model converted = Model::load(convert(dir, DType::F32));
  const Model direct = Model::load(make_direct("llama"));
  EXPECT_EQ(converted.config().n_vocab, 288);
  EXPECT_FALSE(converted.config().tied_output);

  const Tokenizer tok = Tokenizer::from_gguf(*converted.gguf());
  EXPECT_EQ(tok.encode("hello world", true), (std::vector<int32_t>{1, vocab_.id(kSp + "hello"), vocab_.id(kSp + "world")}));
  EXPECT_EQ(tok.encode("abc", false), (std::vector<int32_t>{vocab_.id(kSp), vocab_.id("a"), vocab_.id("bc")}));
  EXPECT_EQ(tok.encode("ax", false), (std::vector<int32_t>{vocab_.id(kSp), vocab_.id("a"), 3 + 'x'}));  // byte fallback
  EXPECT_EQ(tok.decode(tok.encode("hello world abc", true)), "hello world abc");

  expect_same_logits(converted, direct, {1, 281, 5, 259, 270, 281, 2, 100, 287, 0, 64, 279});
}

TEST_F(HfConvert, QuantizedOutputKeepsNormsF32) {
  const fs::path dir = make_llama(Spec{});
  const GgufFile f = GgufFile::open(convert(dir, DType::Q8_0));
  EXPECT_EQ(f.get_int("general.file_type"), 7);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, DType::Q8_0);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, DType::Q8_0);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, DType::Q8_0);
  EXPECT_EQ(f.find_tensor("blk.0.attn_norm.weight")->type, DType::F32);
  EXPECT_EQ(f.find_tensor("output_norm.weight")->type, DType::F32);
  // Q8_0 keeps each value within half a step (block max / 127) of the permuted source.
  const std::vector<float> q = f32_values(f, "blk.1.attn_q.weight");
  const std::vector<float> want = permuted(weights_.at("model.layers.1.self_attn.q_proj.weight"), 4);
  ASSERT_EQ(q.size(), want.size());
  for (size_t b = 0; b < q.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(want[i]));
    for (size_t i = b; i < b + 32; ++i) ASSERT_NEAR(q[i], want[i], amax / 127.0f * 0.51f + 1e-6f) << i;
  }
  EXPECT_NO_THROW(Model::load(convert(dir, DType::Q8_0)));
}

TEST_F(HfConvert, F16FallbackForRowsThatAreNotWholeBlocks) {
  Spec s;
  s.n_ff = 48;  // ffn_down rows of 48: not whole Q4_0 blocks
  const fs::path dir = make_llama(s);
  HfConvertResult r;
  const GgufFile f = GgufFile::open(convert(dir, DType::Q4_0, &r));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, DType::F16);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->type, DType::Q4_0);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("blk.0.ffn_down.weight"), std::string::npos) << r.notes[0];
}

TEST_F(HfConvert, MistralIsLlamaWithItsSlidingWindow) {
  Spec s;
  s.hf_arch = "MistralForCausalLM";
  s.n_layers = 1;
  const fs::path dir = make_llama(s, {{"sliding_window", 4096}});
  HfConvertResult r;
  const GgufFile f = GgufFile::open(convert(dir, DType::F32, &r));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.attention.sliding_window"), 4096);
  EXPECT_EQ(f32_values(f, "blk.0.attn_k.weight"), permuted(weights_.at("model.layers.0.self_attn.k_proj.weight"), 2));
  EXPECT_EQ(r.hf_architecture, "MistralForCausalLM");
  EXPECT_EQ(Model::load(root_ / "llama-tiny-f32.gguf").config().sliding_window, 4096);
}

TEST_F(HfConvert, Llama3RopeScalingWritesRopeFreqs) {
  Spec s;
  s.n_layers = 1;
  const fs::path dir = make_llama(s, {{"rope_scaling",
                                       {{"rope_type", "llama3"},
                                        {"factor", 8.0},
                                        {"low_freq_factor", 1.0},
                                        {"high_freq_factor", 4.0},
                                        {"original_max_position_embeddings", 256}}},
                                      {"rope_theta", 500000.0}});
  const fs::path out = convert(dir, DType::F32);
  EXPECT_TRUE(Model::load(out).config().rope_freq_factors);
  const GgufFile f = GgufFile::open(out);
  const std::vector<float> freqs = f32_values(f, "rope_freqs.weight");
  ASSERT_EQ(freqs.size(), 4u);  // head_dim / 2
  // Wavelength 2*pi*theta^(i/8) of dims i = 0, 2, 4, 6 against 256/4 and 256/1:
  // 6.3 (short: factor 1), 167 (between: smoothed), 4443 and 1.2e5 (long: factor 8).
  const double wavelen = 2.0 * M_PI * std::pow(500000.0, 2.0 / 8.0);
  const double smooth = (256.0 / wavelen - 1.0) / (4.0 - 1.0);
  EXPECT_EQ(freqs[0], 1.0f);
  EXPECT_NEAR(freqs[1], 1.0 / ((1.0 - smooth) / 8.0 + smooth), 1e-5);
  EXPECT_GT(freqs[1], 1.5f);
  EXPECT_LT(freqs[1], 7.5f);
  EXPECT_EQ(freqs[2], 8.0f);
  EXPECT_EQ(freqs[3], 8.0f);
}

// -------------------------------------------------------------------- qwen2

TEST_F(HfConvert, Qwen2WithByteLevelBpe) {
  const fs::path dir = make_qwen2();
  HfConvertResult r;
  const fs::path out = convert(dir, DType::F16, &r);
  EXPECT_EQ(r.architecture, "qwen2");
  const GgufFile f = GgufFile::open(out);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(f.get_int("general.file_type"), 1);
  EXPECT_EQ(f.get_int("qwen2.block_count"), 1);
  EXPECT_EQ(f.get_int("qwen2.attention.head_count_kv"), 2);
  EXPECT_FLOAT_EQ(*f.get_float("qwen2.rope.freq_base"), 1e6f);
  EXPECT_EQ(f.get_string("qwen2.rope.scaling.type"), "yarn");
  EXPECT_FLOAT_EQ(*f.get_float("qwen2.rope.scaling.factor"), 4.0f);
  EXPECT_EQ(f.get_int("qwen2.rope.scaling.original_context_length"), 32768);
  EXPECT_EQ(f.find("qwen2.attention.sliding_window"), nullptr);
  EXPECT_EQ(f.find("qwen2.rope.dimension_count"), nullptr);
  EXPECT_EQ(f.find("llama.block_count"), nullptr);

  // Biases (f32), no Q/K permutation (NEOX RoPE), tied output.
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(shape_of(f, "blk.0.attn_q.bias"), (std::vector<int64_t>{32}));
  EXPECT_EQ(shape_of(f, "blk.0.attn_k.bias"), (std::vector<int64_t>{16}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_v.bias")->type, DType::F32);
  EXPECT_EQ(f32_values(f, "blk.0.attn_q.bias"), weights_.at("model.layers.0.self_attn.q_proj.bias").values);
  EXPECT_EQ(f32_values(f, "blk.0.attn_k.bias"), weights_.at("model.layers.0.self_attn.k_proj.bias").values);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, DType::F16);
  std::vector<float> q16 = weights_.at("model.layers.0.self_attn.q_proj.weight").values;
  for (float& v : q16) v = stored("F16", v);
  EXPECT_EQ(f32_values(f, "blk.0.attn_q.weight"), q16);

  // Tokenizer.
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  const GgufValue* tokens = f.get_array("tokenizer.ggml.tokens", GgufType::STRING);
  const GgufValue* types = f.get_array("tokenizer.ggml.token_type", GgufType::I32);
  ASSERT_NE(tokens, nullptr);
  ASSERT_NE(types, nullptr);
  ASSERT_EQ(tokens->strings.size(), 20u);
  EXPECT_EQ(tokens->strings[11], "hello");
  EXPECT_EQ(tokens->strings[15], "<|im_start|>");
  EXPECT_EQ(tokens->strings[17], " user tok");  // user-defined: U+2581 written as spaces
  EXPECT_EQ(tokens->strings[19], "[PAD19]");
  EXPECT_EQ(types->ints, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 4, 5, 5}));
  const GgufValue* merges = f.get_array("tokenizer.ggml.merges", GgufType::STRING);
  ASSERT_NE(merges, nullptr);
  EXPECT_EQ(merges->strings, (std::vector<std::string>{"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r",
                                                       "a\xC4\xA0" "b c"}));
  EXPECT_EQ(f.find("tokenizer.ggml.scores"), nullptr);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 14);  // config.json: tokenizer_config has none
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 16);
  EXPECT_EQ(f.get_int("tokenizer.ggml.padding_token_id"), 14);
  EXPECT_EQ(f.find("tokenizer.ggml.add_space_prefix"), nullptr);
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), "D");
  EXPECT_EQ(f.get_string("tokenizer.chat_template.tool_use"), "T");
  const GgufValue* names = f.get_array("tokenizer.chat_templates", GgufType::STRING);
  ASSERT_NE(names, nullptr);
  EXPECT_EQ(names->strings, std::vector<std::string>{"tool_use"});
}

// The issue's check with a byte-level BPE tokenizer.json: the converted
// folder's logits equal those of the GGUF built directly (biases, NEOX RoPE,
// YaRN, tied output all exercised by the forward pass).
TEST_F(HfConvert, ConvertedQwen2MatchesTheDirectGguf) {
  const fs::path dir = make_qwen2();
  const Model converted = Model::load(convert(dir, DType::F32));
  const Model direct = Model::load(make_direct("qwen2"));
  EXPECT_TRUE(converted.config().qkv_bias);
  EXPECT_TRUE(converted.config().tied_output);
  EXPECT_EQ(converted.config().sliding_window, 0);
  expect_same_logits(converted, direct, {14, 11, 12, 13, 0, 19, 16, 4});
}

// ------------------------------------------------------------------- errors

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(HfConvert, BadFoldersGiveErrorsNamingTheProblem) {
  const fs::path dir = make_llama(Spec{});
  const json config = json::parse(std::ifstream(dir / "config.json"));
  const auto with_config = [&](const json& patch) {
    json c = config;
    c.update(patch);
    write_json(dir / "config.json", c);
    return error_of([&] { convert(dir, DType::F32); });
  };
  std::string e = with_config({{"architectures", {"GPT2LMHeadModel"}}});
  EXPECT_NE(e.find("unsupported architecture 'GPT2LMHeadModel'"), std::string::npos) << e;
  e = with_config({{"hidden_size", "32"}});
  EXPECT_NE(e.find("'hidden_size' = \"32\""), std::string::npos) << e;
  e = with_config({{"num_key_value_heads", 4}});
  EXPECT_NE(e.find("'model.layers.0.self_attn.k_proj.weight' has shape [16, 32], config.json implies [32, 32]"),
            std::string::npos) << e;
  e = with_config({{"vocab_size", 200}});
  EXPECT_NE(e.find("model.embed_tokens.weight"), std::string::npos) << e;
  write_json(dir / "config.json", config);

  e = error_of([&] {
    HfConvertOptions o;
    o.type = DType::Q8_K;
    OutputFile file = OutputFile::create(root_ / "x.gguf");
    convert_hf_to_gguf(dir, file, o);
  });
  EXPECT_NE(e.find("q8_K is not an output type"), std::string::npos) << e;

  // A tensor the converter has no name for, and a missing one.
  std::map<std::string, HfTensor> second;
  for (const auto& [name, t] : weights_) {
    if (!name.starts_with("model.embed_tokens") && !name.starts_with("model.layers.0.")) second[name] = t;
  }
  second["model.layers.1.mlp.extra.weight"] = {"F32", {2}, {1.0f, 2.0f}};
  json index = json::parse(std::ifstream(dir / "model.safetensors.index.json"));
  index["weight_map"]["model.layers.1.mlp.extra.weight"] = "model-00002-of-00002.safetensors";
  write_json(dir / "model.safetensors.index.json", index);
  write_safetensors(dir / "model-00002-of-00002.safetensors", second);
  e = error_of([&] { convert(dir, DType::F32); });
  EXPECT_NE(e.find("cannot map tensor 'model.layers.1.mlp.extra.weight'"), std::string::npos) << e;
  second.erase("model.layers.1.mlp.extra.weight");
  second.erase("model.norm.weight");
  index["weight_map"].erase("model.layers.1.mlp.extra.weight");
  index["weight_map"].erase("model.norm.weight");
  write_json(dir / "model.safetensors.index.json", index);
  write_safetensors(dir / "model-00002-of-00002.safetensors", second);
  e = error_of([&] { convert(dir, DType::F32); });
  EXPECT_NE(e.find("no tensor 'model.norm.weight'"), std::string::npos) << e;
}

TEST_F(HfConvert, BadTokenizersGiveErrors) {
  const fs::path dir = make_llama(Spec{});
  json tj = spm_tokenizer_json(vocab_);
  tj["model"]["vocab"]["zz"] = 300;
  write_json(dir / "tokenizer.json", tj);
  std::string e = error_of([&] { convert(dir, DType::F32); });
  EXPECT_NE(e.find("model.vocab 'zz' has id 300, outside the model's vocab_size 288"), std::string::npos) << e;
  tj = spm_tokenizer_json(vocab_);
  tj["model"]["type"] = "Unigram";
  write_json(dir / "tokenizer.json", tj);
  e = error_of([&] { convert(dir, DType::F32); });
  EXPECT_NE(e.find("model.type 'Unigram' is not supported"), std::string::npos) << e;
  tj = spm_tokenizer_json(vocab_);
  tj["model"]["merges"][3] = "elo";
  write_json(dir / "tokenizer.json", tj);
  e = error_of([&] { convert(dir, DType::F32); });
  EXPECT_NE(e.find("model.merges[3] = \"elo\""), std::string::npos) << e;
  fs::remove(dir / "tokenizer.json");
  e = error_of([&] { convert(dir, DType::F32); });
  EXPECT_NE(e.find("tokenizer.json: cannot open"), std::string::npos) << e;
}

TEST(HfConvertRowOrder, MatchesTheReshapeSwapaxesRule) {
  // 2 heads of head_dim 4: rows (0 1 2 3 | 4 5 6 7) -> (0 2 1 3 | 4 6 5 7).
  EXPECT_EQ(rope_norm_row_order(8, 2), (std::vector<int64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(rope_norm_row_order(6, 1), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(rope_norm_row_order(6, 2), Error);
}

// ---------------------------------------------------------------------- CLI

TEST_F(HfConvert, CommandLineConvertsAndTheResultRuns) {
  const fs::path dir = make_llama(Spec{});
  const std::string out = (root_ / "cli.gguf").string();
  auto r = testing::run_command({testing::tokamak_bin(), "convert", dir.string(), out, "--type", "q8_0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("LlamaForCausalLM"), std::string::npos) << r.err;
  EXPECT_EQ(GgufFile::open(out).find_tensor("blk.0.attn_k.weight")->type, DType::Q8_0);
  r = testing::run_command({testing::tokamak_bin(), "run", "-m", out, "-p", "hello world", "-n", "5", "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("generated:"), std::string::npos) << r.err;

  r = testing::run_command({testing::tokamak_bin(), "convert", dir.string(), out, "--type", "q9"});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_NE(r.err.find("--type: 'q9'"), std::string::npos) << r.err;
  r = testing::run_command({testing::tokamak_bin(), "convert", (root_ / "nothing").string(), out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tokamak::io
