// make-model: random weights in real shapes, deterministic by seed, that load,
// run with finite unit-scale logits, and carry a vocabulary the tokenizer reads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "common/test_data.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/output_file.h"
#include "kernels/quants.h"
#include "model/forward.h"
#include "tools/make_model.h"
#include "model/model.h"
#include "tools/synthetic_vocab.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

using testing::read_text_file;
using testing::temp_file;
using testing::test_data;
namespace fs = std::filesystem;

fs::path make_micro(const std::string& name, FileType type, uint64_t seed, int threads,
                    const io::GgufFile* vocab = nullptr) {
  MakeModelOptions o;
  o.preset = *find_model_preset("micro");
  o.ftype = type;
  o.seed = seed;
  o.vocab_from = vocab;
  ThreadPool pool(threads);
  const fs::path out = temp_file("make_model_" + name);
  {
    io::OutputFile file = io::OutputFile::create(out);
    make_model(o, file, pool);
    file.commit();
  }
  return out;
}

std::vector<float> dequantized(const io::GgufFile& f, const std::string& name) {
  const io::GgufTensorInfo& t = *f.find_tensor(name);
  std::vector<float> out(static_cast<size_t>(t.ne[0] * t.ne[1]));
  kernels::dequantize_row(t.type, f.view(t).data, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

TEST(MakeModel, DeterministicBySeedWhateverTheThreadCount) {
  const fs::path a = make_micro("a.gguf", FileType::Q4_K_M, 7, 1);
  const fs::path b = make_micro("b.gguf", FileType::Q4_K_M, 7, 2);
  const fs::path c = make_micro("c.gguf", FileType::Q4_K_M, 8, 2);
  const std::string bytes_a = read_text_file(a);
  EXPECT_GT(bytes_a.size(), 1000000u);
  EXPECT_TRUE(bytes_a == read_text_file(b));
  const io::GgufFile fa = io::GgufFile::open(a);
  const io::GgufFile fc = io::GgufFile::open(c);
  const io::GgufTensorInfo& ta = *fa.find_tensor("blk.0.attn_q.weight");
  const io::GgufTensorInfo& tc = *fc.find_tensor("blk.0.attn_q.weight");
  EXPECT_NE(std::memcmp(fa.view(ta).data, fc.view(tc).data, ta.n_bytes), 0);
  for (const fs::path& p : {a, b, c}) fs::remove(p);
}

// The same seed is the same model in every type: Q8_0 is the F32 weights quantized.
TEST(MakeModel, TypesShareTheUnderlyingWeights) {
  const fs::path f32 = make_micro("f32.gguf", FileType::AllF32, 3, 2);
  const fs::path q8 = make_micro("q8.gguf", FileType::Q8_0, 3, 2);
  const io::GgufFile a = io::GgufFile::open(f32);
  const io::GgufFile b = io::GgufFile::open(q8);
  for (const std::string name : {"blk.2.ffn_down.weight", "token_embd.weight", "output.weight"}) {
    const std::vector<float> x = dequantized(a, name);
    const std::vector<float> y = dequantized(b, name);
    ASSERT_EQ(x.size(), y.size());
    double max_err = 0.0;
    double max_abs = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      max_err = std::max(max_err, static_cast<double>(std::fabs(x[i] - y[i])));
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(x[i])));
    }
    EXPECT_LT(max_err, max_abs / 127.0 * 0.51 + 1e-6) << name;  // Q8_0: half a step of absmax/127
  }
  fs::remove(f32);
  fs::remove(q8);
}

// Matrices N(0, 1/n_in), norms 1 + N(0, 0.02^2): checked on the F32 file.
TEST(MakeModel, WeightStatistics) {
  const fs::path path = make_micro("stats.gguf", FileType::AllF32, 11, 2);
  const io::GgufFile f = io::GgufFile::open(path);
  auto moments = [](const std::vector<float>& v) {
    double sum = 0.0;
    double sq = 0.0;
    for (float x : v) {
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double mean = sum / static_cast<double>(v.size());
    return std::pair{mean, std::sqrt(sq / static_cast<double>(v.size()) - mean * mean)};
  };
  const auto [m_down, s_down] = moments(dequantized(f, "blk.1.ffn_down.weight"));  // [768, 256]: 196k values
  EXPECT_NEAR(m_down, 0.0, 0.001);
  EXPECT_NEAR(s_down, 1.0 / std::sqrt(768.0), 0.01 / std::sqrt(768.0) * 2);
  const auto [m_q, s_q] = moments(dequantized(f, "blk.3.attn_q.weight"));
  EXPECT_NEAR(s_q, 1.0 / 16.0, 0.002);
  const io::GgufTensorInfo& norm = *f.find_tensor("blk.0.ffn_norm.weight");
  const std::vector<float> gains(f.view(norm).f32(), f.view(norm).f32() + norm.ne[0]);
  const auto [m_n, s_n] = moments(gains);
  EXPECT_NEAR(m_n, 1.0, 0.005);
  EXPECT_NEAR(s_n, 0.02, 0.004);
  fs::remove(path);
}

TEST(MakeModel, LoadsAndRunsWithUnitScaleLogits) {
  const fs::path path = make_micro("run.gguf", FileType::Q8_0, 5, 2);
  const Model model = Model::load(path);
  const ModelConfig& c = model.config();
  EXPECT_EQ(c.n_embd, 256);
  EXPECT_EQ(c.n_ff, 768);
  EXPECT_EQ(c.n_layers, 4);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_ctx_train, 512);
  EXPECT_FALSE(c.tied_output);
  ThreadPool pool(2);
  kv::KvCache kv(kv_layout_for(c), 8);
  Forward forward(model, pool);
  Batch batch;
  for (int32_t i = 0; i < 32; ++i) batch.add((i * 37 + 1) % c.n_vocab, i, 0, true);
  const std::span<const float> logits = forward.run(batch, kv);
  ASSERT_EQ(logits.size(), static_cast<size_t>(32 * c.n_vocab));
  double sq = 0.0;
  for (float x : logits) {
    ASSERT_TRUE(std::isfinite(x));
    sq += static_cast<double>(x) * x;
  }
  const double rms = std::sqrt(sq / static_cast<double>(logits.size()));
  EXPECT_GT(rms, 0.3);
  EXPECT_LT(rms, 3.0);
  fs::remove(path);
}

// The synthetic vocabulary: specials, 256 byte tokens, filler pieces; text
// round-trips through it (bytes cover what pieces do not).
TEST(MakeModel, SyntheticVocabularyTokenizes) {
  const fs::path path = make_micro("vocab.gguf", FileType::Q4_0, 1, 1);
  const io::GgufFile f = io::GgufFile::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  EXPECT_EQ(tok.n_vocab(), 512);
  const std::vector<std::string>& pieces = f.get_array("tokenizer.ggml.tokens", io::GgufType::STRING)->strings;
  EXPECT_EQ(pieces[0], "<unk>");
  EXPECT_EQ(pieces[1], "<s>");
  EXPECT_EQ(pieces[2], "</s>");
  EXPECT_EQ(pieces[3], "<0x00>");
  EXPECT_EQ(pieces[258], "<0xFF>");
  EXPECT_EQ(pieces[259], "\xe2\x96\x81");
  EXPECT_EQ(pieces[260], "\xe2\x96\x81" "a");
  EXPECT_EQ(pieces[261], "a");
  const std::string text = "hello world, 42 \xc3\xa9t\xc3\xa9!";
  const std::vector<int32_t> ids = tok.encode(text, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(tok.decode(std::span<const int32_t>(ids).subspan(1)), text);
  fs::remove(path);

  // A TinyLlama-sized one holds every string of up to 3 letters: words become few pieces.
  io::GgufWriter w;
  set_synthetic_vocab(w, 32000);
  const std::vector<std::byte> bytes = w.to_bytes();
  const Tokenizer big = Tokenizer::from_gguf(io::GgufFile::parse(bytes, "synthetic"));
  EXPECT_EQ(big.n_vocab(), 32000);
  const std::vector<int32_t> words = big.encode("hello world", false);
  EXPECT_LE(words.size(), 6u);  // 12 characters with the boundary
  EXPECT_EQ(big.decode(words), "hello world");
  EXPECT_THROW(set_synthetic_vocab(w, kMinSyntheticVocab - 1), Error);
}

TEST(MakeModel, VocabularyFromAnotherFile) {
  const io::GgufFile stories = io::GgufFile::open(test_data("models/stories260K/stories260K.gguf"));
  const fs::path path = make_micro("stories-vocab.gguf", FileType::F16, 2, 2, &stories);
  const io::GgufFile f = io::GgufFile::open(path);
  for (const io::GgufKeyValue& kv : stories.metadata()) {
    if (!kv.key.starts_with("tokenizer.")) continue;
    SCOPED_TRACE(kv.key);
    const io::GgufValue* v = f.find(kv.key);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->type, kv.value.type);
    EXPECT_EQ(v->strings, kv.value.strings);
    EXPECT_EQ(v->ints, kv.value.ints);
  }
  const Tokenizer a = Tokenizer::from_gguf(f);
  const Tokenizer b = Tokenizer::from_gguf(stories);
  EXPECT_EQ(a.encode("Once upon a time", true), b.encode("Once upon a time", true));
  EXPECT_EQ(Model::load(path).config().n_vocab, 512);
  fs::remove(path);
}

TEST(MakeModel, PresetsHaveTheRealShapes) {
  const ModelPreset& tl = *find_model_preset("tinyllama-1.1b");
  EXPECT_EQ(tl.n_embd, 2048);
  EXPECT_EQ(tl.n_ff, 5632);
  EXPECT_EQ(tl.n_layers, 22);
  EXPECT_EQ(tl.n_heads, 32);
  EXPECT_EQ(tl.n_kv_heads, 4);
  EXPECT_EQ(tl.n_vocab, 32000);
  EXPECT_FALSE(tl.tied_output);
  const ModelPreset& l3 = *find_model_preset("llama-3.2-1b");
  EXPECT_EQ(l3.n_ff, 8192);
  EXPECT_EQ(l3.n_layers, 16);
  EXPECT_EQ(l3.n_kv_heads, 8);
  EXPECT_EQ(l3.n_vocab, 128256);
  EXPECT_EQ(l3.rope_freq_base, 500000.0f);
  EXPECT_TRUE(l3.tied_output);
  EXPECT_EQ(find_model_preset("gpt-5"), nullptr);

  MakeModelOptions o;
  o.preset = tl;
  o.ftype = FileType::F16;
  size_t params = 0;
  for (const MadeTensor& t : plan_model(o)) params += t.type == DType::F16 ? t.n_bytes / 2 : t.n_bytes / 4;
  EXPECT_EQ(params, 1100048384u);  // TinyLlama-1.1B's parameter count
}

// Parameter counts of the real models (Hugging Face's, from the safetensors):
// every tensor of each family is there with its shape, the qwen2 biases too.
size_t parameter_count(const ModelPreset& preset) {
  MakeModelOptions o;
  o.preset = preset;
  o.ftype = FileType::AllF32;
  size_t params = 0;
  for (const MadeTensor& t : plan_model(o)) params += t.n_bytes / 4;
  return params;
}

TEST(MakeModel, FamilyPresetsHaveTheRealParameterCounts) {
  const ModelPreset& qwen = *find_model_preset("qwen2.5-0.5b");
  EXPECT_EQ(qwen.architecture, "qwen2");
  EXPECT_EQ(qwen.rms_eps, 1e-6f);
  EXPECT_EQ(parameter_count(qwen), 494032768u);  // Qwen2.5-0.5B
  EXPECT_EQ(parameter_count(*find_model_preset("smollm2-360m")), 361821120u);  // SmolLM2-360M
  ModelPreset mistral = *find_model_preset("mistral-7b");
  EXPECT_EQ(mistral.n_layers, 2);  // reduced depth by default
  EXPECT_EQ(mistral.rope_freq_base, 1e6f);
  EXPECT_EQ(mistral.sliding_window, 0);  // v0.2 dropped it
  mistral.n_layers = 32;
  EXPECT_EQ(parameter_count(mistral), 7241732096u);  // Mistral-7B
  EXPECT_EQ(find_model_preset("mistral-7b-v0.1")->sliding_window, 4096);
  EXPECT_EQ(find_model_preset("mistral-7b-v0.1")->rope_freq_base, 10000.0f);
}

// Each micro preset keeps its family's options; the head size and GQA group
// too, so kernels see the same head layouts as with the real model.
TEST(MakeModel, MicroPresetsKeepTheFamilyOptions) {
  const std::pair<const char*, const char*> pairs[] = {{"llama3-micro", "llama-3.2-1b"},
                                                       {"qwen2-micro", "qwen2.5-0.5b"},
                                                       {"smollm2-micro", "smollm2-360m"},
                                                       {"mistral-micro", "mistral-7b-v0.1"}};
  for (const auto& [micro_name, real_name] : pairs) {
    const ModelPreset& m = *find_model_preset(micro_name);
    const ModelPreset& r = *find_model_preset(real_name);
    SCOPED_TRACE(micro_name);
    EXPECT_EQ(m.architecture, r.architecture);
    EXPECT_EQ(m.n_embd / m.n_heads, r.n_embd / r.n_heads);
    EXPECT_EQ(m.n_heads / m.n_kv_heads, r.n_heads / r.n_kv_heads);
    EXPECT_EQ(m.tied_output, r.tied_output);
    EXPECT_EQ(m.rope_freq_base, r.rope_freq_base);
    EXPECT_EQ(m.rms_eps, r.rms_eps);
    EXPECT_EQ(m.llama3_rope_factor, r.llama3_rope_factor);
    EXPECT_EQ(m.sliding_window > 0, r.sliding_window > 0);
    EXPECT_EQ(m.n_embd % 256 == 0, r.n_embd % 256 == 0);  // the same K-quant fallbacks
    EXPECT_EQ(m.n_ff % 256 == 0, r.n_ff % 256 == 0);
    EXPECT_LE(parameter_count(m), 8u << 20);  // tiny: a test reads them in f64 in well under a second
  }
}

// qwen2 files are laid out as llama.cpp's converter writes them: no
// vocab_size or rope.dimension_count keys, F32 biases beside quantized weights.
TEST(MakeModel, Qwen2FileHasBiasesAndLoads) {
  MakeModelOptions o;
  o.preset = *find_model_preset("qwen2-micro");
  o.ftype = FileType::Q8_0;
  ThreadPool pool(2);
  const fs::path path = temp_file("make_model_qwen2.gguf");
  {
    io::OutputFile file = io::OutputFile::create(path);
    make_model(o, file, pool);
    file.commit();
  }
  const io::GgufFile f = io::GgufFile::open(path);
  EXPECT_FALSE(f.get_int("qwen2.vocab_size").has_value());
  EXPECT_FALSE(f.get_int("qwen2.rope.dimension_count").has_value());
  EXPECT_EQ(f.get_int("qwen2.embedding_length"), 448);
  const io::GgufTensorInfo* bias = f.find_tensor("blk.1.attn_k.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->type, DType::F32);
  EXPECT_EQ(bias->ne[0], 64);
  const Model model = Model::load(path);
  EXPECT_TRUE(model.config().qkv_bias);
  EXPECT_EQ(model.config().rope_style, kernels::RopeStyle::Neox);
  EXPECT_EQ(model.config().rms_eps, 1e-6f);
  fs::remove(path);
}

// A Llama-3-style preset (tied output, rope_freqs): small here, the shapes of
// llama-3.2-1b otherwise. The factors are Meta's: 1 for short wavelengths,
// the scaling factor for long ones, smoothly between.
TEST(MakeModel, Llama3RopeFactorsAndTiedOutput) {
  MakeModelOptions o;
  o.preset = {"tiny-llama3", "llama", 128, 256, 2, 2, 1, 300, 256, 500000.0f, 1e-5f, true, 32.0f};
  o.ftype = FileType::Q8_0;
  ThreadPool pool(2);
  const fs::path path = temp_file("make_model_llama3.gguf");
  {
    io::OutputFile file = io::OutputFile::create(path);
    make_model(o, file, pool);
    file.commit();
  }
  const Model model = Model::load(path);
  EXPECT_TRUE(model.config().tied_output);
  ASSERT_TRUE(model.config().rope_freq_factors);
  const TensorView& f = model.weights().rope_freqs;
  ASSERT_EQ(f.ne[0], 32);
  const float* v = f.f32();
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[31], 32.0f);
  int between = 0;
  for (int i = 1; i < 32; ++i) {
    EXPECT_GE(v[i], v[i - 1]);
    between += v[i] > 1.0f && v[i] < 32.0f;
  }
  EXPECT_GT(between, 0);
  // Tied: token_embd is the output matrix, so the Q8_0 mix keeps it Q8_0 (Q6_K only for other types).
  EXPECT_EQ(model.weights().token_embd.type, DType::Q8_0);
  fs::remove(path);
}

TEST(MakeModel, VocabularyFileWithoutTokensIsAnError) {
  const io::GgufFile no_vocab = io::GgufFile::open(test_data("fixtures/quant/Q8_0/quant-q8_0.gguf"));
  MakeModelOptions o;
  o.preset = *find_model_preset("micro");
  o.vocab_from = &no_vocab;
  try {
    (void)plan_model(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quant-q8_0.gguf: no tokenizer.ggml.tokens"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tokamak
