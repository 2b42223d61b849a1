// tokamak quantize against llama-quantize: --pure output is byte-identical with
// the fixtures llama-quantize made, and the mixed recipes give the tensor-type
// counts llama.cpp prints for the real models (TinyLlama, Llama-3.2-1B).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>

#include "common/test_data.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/output_file.h"
#include "kernels/quants.h"
#include "tools/make_model.h"
#include "tools/quant_recipe.h"
#include "tools/quantize_model.h"

namespace tokamak {
namespace {

using testing::read_text_file;
using testing::temp_file;
using testing::test_data;
namespace fs = std::filesystem;

// Every tensor of `expected` is in `actual` with the same type, shape and bytes.
void expect_same_tensors(const io::GgufFile& actual, const io::GgufFile& expected) {
  ASSERT_EQ(actual.tensors().size(), expected.tensors().size());
  for (const io::GgufTensorInfo& e : expected.tensors()) {
    SCOPED_TRACE(e.name);
    const io::GgufTensorInfo* a = actual.find_tensor(e.name);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->type, e.type);
    EXPECT_EQ(a->ne, e.ne);
    ASSERT_EQ(a->n_bytes, e.n_bytes);
    EXPECT_EQ(std::memcmp(actual.view(*a).data, expected.view(e).data, e.n_bytes), 0);
  }
}

// micro-llama-<type>.gguf came from llama-quantize --pure; the whole file
// (metadata order, tensor order, padding, data) must come out the same.
TEST(Quantize, PureMicroLlamaIsByteIdenticalWithLlamaQuantize) {
  const io::GgufFile source = io::GgufFile::open(test_data("fixtures/models/micro-llama-f32.gguf"));
  ThreadPool pool(2);
  for (const std::string type : {"q8_0", "q4_0", "q4_k", "q6_k", "f16", "bf16"}) {
    SCOPED_TRACE(type);
    const fs::path out = temp_file("quantize_" + type + ".gguf");
    QuantizeOptions options;
    options.ftype = *file_type_from_name(type);
    options.pure = true;
    {
      io::OutputFile file = io::OutputFile::create(out);
      quantize_gguf(source, file, options, pool);
      file.commit();
    }
    const fs::path fixture = test_data("fixtures/models/micro-llama-" + type + ".gguf");
    expect_same_tensors(io::GgufFile::open(out), io::GgufFile::open(fixture));
    EXPECT_TRUE(read_text_file(out) == read_text_file(fixture));
    fs::remove(out);
  }
}

// stories260K's ffn_down rows (172) fit no 32-block: they fall back to F16,
// as in the fixtures (made with ggml's quantizer, in the source's tensor order).
TEST(Quantize, PureStoriesFallsBackToF16LikeTheFixtures) {
  const io::GgufFile source = io::GgufFile::open(test_data("models/stories260K/stories260K.gguf"));
  ThreadPool pool(1);
  for (const std::string type : {"q8_0", "q4_0"}) {
    SCOPED_TRACE(type);
    const fs::path out = temp_file("quantize_stories-" + type + ".gguf");
    QuantizeOptions options;
    options.ftype = *file_type_from_name(type);
    options.pure = true;
    {
      io::OutputFile file = io::OutputFile::create(out);
      quantize_gguf(source, file, options, pool);
      file.commit();
    }
    const io::GgufFile made = io::GgufFile::open(out);
    expect_same_tensors(made, io::GgufFile::open(test_data("fixtures/models/stories260K-" + type + ".gguf")));
    EXPECT_EQ(made.find_tensor("blk.0.ffn_down.weight")->type, DType::F16);
    EXPECT_EQ(made.get_int("general.file_type"), static_cast<int64_t>(*file_type_from_name(type)));
    EXPECT_EQ(made.get_int("general.quantization_version"), 2);
    EXPECT_EQ(made.metadata().size(), source.metadata().size() + 2);
    fs::remove(out);
  }
}

// Without --pure, Q4_0 gives the output matrix Q6_K (llama.cpp's rule; the
// stories110M Q4_0 file llama.cpp users know has output.weight q6_K). Here
// the rows (64) do not fit Q6_K's 256-blocks, so it falls back to Q8_0.
TEST(Quantize, MixedQ4_0RaisesTheOutputMatrix) {
  const io::GgufFile micro = io::GgufFile::open(test_data("fixtures/models/micro-llama-f32.gguf"));
  QuantizeOptions options;
  options.ftype = FileType::Q4_0;
  std::map<std::string, DType> types;
  for (const TensorPlan& p : plan_quantization(micro, options)) types[p.name] = p.to;
  EXPECT_EQ(types["output.weight"], DType::Q6_K);
  EXPECT_EQ(types["token_embd.weight"], DType::Q4_0);
  EXPECT_EQ(types["blk.0.attn_v.weight"], DType::Q4_0);
  EXPECT_EQ(types["blk.0.attn_norm.weight"], DType::F32);

  const io::GgufFile stories = io::GgufFile::open(test_data("models/stories260K/stories260K.gguf"));
  types.clear();
  for (const TensorPlan& p : plan_quantization(stories, options)) types[p.name] = p.to;
  EXPECT_EQ(types["output.weight"], DType::Q8_0);
  EXPECT_EQ(types["blk.4.ffn_down.weight"], DType::F16);
}

// Requantizing goes through f32: F16 -> F32 is exact, so quantizing the f16
// fixture to F32 gives its dequantized values.
TEST(Quantize, RequantizesFromQuantizedInput) {
  const io::GgufFile f16 = io::GgufFile::open(test_data("fixtures/models/micro-llama-f16.gguf"));
  const fs::path out = temp_file("quantize_f16-to-f32.gguf");
  ThreadPool pool(2);
  QuantizeOptions options;
  options.ftype = FileType::AllF32;
  {
    io::OutputFile file = io::OutputFile::create(out);
    quantize_gguf(f16, file, options, pool);
    file.commit();
  }
  const io::GgufFile made = io::GgufFile::open(out);
  const io::GgufTensorInfo& src = *f16.find_tensor("blk.1.ffn_down.weight");
  const io::GgufTensorInfo& dst = *made.find_tensor("blk.1.ffn_down.weight");
  ASSERT_EQ(dst.type, DType::F32);
  std::vector<float> expected(static_cast<size_t>(src.ne[0] * src.ne[1]));
  kernels::dequantize_row(DType::F16, f16.view(src).data, expected.data(), src.ne[0] * src.ne[1]);
  EXPECT_EQ(std::memcmp(made.view(dst).data, expected.data(), expected.size() * sizeof(float)), 0);
  fs::remove(out);
}

std::map<DType, int> type_counts(const std::vector<MadeTensor>& tensors) {
  std::map<DType, int> counts;
  for (const MadeTensor& t : tensors) ++counts[t.type];
  return counts;
}

double mib_of(const std::vector<MadeTensor>& tensors) {
  size_t bytes = 0;
  for (const MadeTensor& t : tensors) bytes += t.n_bytes;
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// The counts and sizes llama.cpp prints when loading the published files:
// TinyLlama-1.1B Q4_K_M "f32: 45, q4_K: 135, q6_K: 21 tensors, 636.18 MiB";
// Llama-3.2-1B Q4_K_M "q4_K: 96, q6_K: 17, 762.81 MiB" and Q5_K_M "q5_K: 96,
// q6_K: 17, 861.81 MiB" (f32: 34 with rope_freqs).
TEST(Quantize, RecipesMatchLlamaCppTypeCountsOnRealShapes) {
  MakeModelOptions o;
  o.preset = *find_model_preset("tinyllama-1.1b");
  o.ftype = FileType::Q4_K_M;
  std::vector<MadeTensor> plan = plan_model(o);
  EXPECT_EQ(plan.size(), 201u);
  EXPECT_EQ(type_counts(plan), (std::map<DType, int>{{DType::F32, 45}, {DType::Q4_K, 135}, {DType::Q6_K, 21}}));
  EXPECT_NEAR(mib_of(plan), 636.18, 0.005);

  o.preset = *find_model_preset("llama-3.2-1b");
  plan = plan_model(o);
  EXPECT_EQ(type_counts(plan), (std::map<DType, int>{{DType::F32, 34}, {DType::Q4_K, 96}, {DType::Q6_K, 17}}));
  EXPECT_NEAR(mib_of(plan), 762.81, 0.005);
  for (const MadeTensor& t : plan) {
    if (t.name == "token_embd.weight") {
      EXPECT_EQ(t.type, DType::Q6_K);  // tied: it is the output
    }
  }
  o.ftype = FileType::Q5_K_M;
  plan = plan_model(o);
  EXPECT_EQ(type_counts(plan), (std::map<DType, int>{{DType::F32, 34}, {DType::Q5_K, 96}, {DType::Q6_K, 17}}));
  EXPECT_NEAR(mib_of(plan), 861.81, 0.005);
}

// Which layers get more bits in Q4_K_M (22 layers): the first and last
// eighth and every third between, for attn_v and ffn_down alike.
TEST(Quantize, Q4_K_MLayersWithMoreBits) {
  MakeModelOptions o;
  o.preset = *find_model_preset("tinyllama-1.1b");
  o.ftype = FileType::Q4_K_M;
  std::vector<int> attn_v;
  std::vector<int> ffn_down;
  for (const MadeTensor& t : plan_model(o)) {
    if (t.type != DType::Q6_K || !t.name.starts_with("blk.")) continue;
    const int layer = std::stoi(t.name.substr(4));
    (t.name.find("attn_v") != std::string::npos ? attn_v : ffn_down).push_back(layer);
  }
  const std::vector<int> expected = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  EXPECT_EQ(attn_v, expected);
  EXPECT_EQ(ffn_down, expected);
}

TEST(QuantRecipe, FallbacksForRowsThatDoNotFitTheBlock) {
  RecipeModel m;
  m.n_layers = 1;
  m.n_attention_wv = 1;
  auto type_of = [&](FileType ft, int64_t ne0, const std::string& name = "blk.0.ffn_up.weight") {
    QuantRecipe r(ft, true, m);
    return r.type_for(name, {ne0, 4, 1, 1}, 2, DType::F32);
  };
  EXPECT_EQ(type_of(FileType::Q4_K_M, 96), DType::Q5_0);
  EXPECT_EQ(type_of(FileType::Q5_K_M, 96), DType::Q5_1);
  EXPECT_EQ(type_of(FileType::Q6_K, 96), DType::Q8_0);
  EXPECT_EQ(type_of(FileType::Q2_K, 96), DType::Q4_0);
  EXPECT_EQ(type_of(FileType::Q3_K_M, 96), DType::Q4_0);
  EXPECT_EQ(type_of(FileType::Q4_K_M, 172), DType::F16);  // Q5_0 does not fit either
  EXPECT_EQ(type_of(FileType::Q8_0, 172), DType::F16);
  EXPECT_EQ(type_of(FileType::Q4_K_M, 512), DType::Q4_K);
  EXPECT_EQ(type_of(FileType::BF16, 172), DType::BF16);  // plain types fit any row
  QuantRecipe r(FileType::Q4_K_M, true, m);
  EXPECT_EQ(r.type_for("blk.0.attn_norm.weight", {96, 1, 1, 1}, 1, DType::F32), DType::F32);
  EXPECT_EQ(r.type_for("blk.0.ffn_norm.weight", {256, 2, 1, 1}, 2, DType::F32), DType::F32);
  EXPECT_EQ(r.type_for("blk.0.ffn_up.weight", {96, 2, 1, 1}, 2, DType::F32), DType::Q5_0);
  EXPECT_EQ(r.n_fallback(), 1);
}

TEST(QuantRecipe, FileTypeNamesAndIds) {
  EXPECT_EQ(file_type_from_name("Q4_K_M"), FileType::Q4_K_M);
  EXPECT_EQ(file_type_from_name("q4_k"), FileType::Q4_K_M);
  EXPECT_EQ(file_type_from_name("q5_k"), FileType::Q5_K_M);
  EXPECT_EQ(file_type_from_name("q3_k"), FileType::Q3_K_M);
  EXPECT_EQ(file_type_from_name("f32"), FileType::AllF32);
  EXPECT_EQ(file_type_from_name("bf16"), FileType::BF16);
  EXPECT_EQ(file_type_from_name("q4_k_x"), std::nullopt);
  EXPECT_EQ(file_type_from_name("iq4_nl"), std::nullopt);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q4_K_M), 15u);  // llama_ftype numbering
  EXPECT_EQ(static_cast<uint32_t>(FileType::BF16), 32u);
  EXPECT_EQ(file_type_from_id(15), FileType::Q4_K_M);
  EXPECT_EQ(file_type_from_id(4), std::nullopt);
  EXPECT_EQ(file_type_name(FileType::Q4_K_M), "Q4_K_M");
  EXPECT_EQ(file_type_default(FileType::Q4_K_S), DType::Q4_K);
  EXPECT_NE(file_type_names().find("q4_k_m"), std::string::npos);
}

TEST(QuantRecipe, LlamaTensorOrder) {
  const std::vector<std::string> names = {"token_embd.weight", "blk.10.attn_q.weight", "blk.2.ffn_up.weight",
                                          "output_norm.weight", "blk.2.attn_k.weight", "output.weight"};
  std::vector<std::string> ordered;
  for (size_t i : llama_tensor_order(names)) ordered.push_back(names[i]);
  EXPECT_EQ(ordered, (std::vector<std::string>{"output.weight", "output_norm.weight", "token_embd.weight",
                                               "blk.2.attn_k.weight", "blk.2.ffn_up.weight", "blk.10.attn_q.weight"}));
}

TEST(Quantize, ErrorsNameTheProblem) {
  io::GgufWriter w;
  w.set_string("general.architecture", "llama");
  const std::vector<std::byte> bytes = w.to_bytes();
  const io::GgufFile empty = io::GgufFile::parse(bytes, "empty.gguf");
  try {
    (void)plan_quantization(empty, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty.gguf: the file has no tensors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tokamak
