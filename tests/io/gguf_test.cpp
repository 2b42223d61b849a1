// GGUF reader on the real files of ../shared, checked against the values their
// SOURCES.md / manifest.json document.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "common/test_data.h"
#include "core/error.h"

namespace tokamak::io {
namespace {

using tokamak::testing::test_data;

std::vector<char> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufStories260K, MetadataAndShapes) {
  const GgufFile f = GgufFile::open(test_data("models/stories260K/stories260K.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);  // no general.alignment key: the default
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_int("llama.context_length"), 2048);  // a documented quirk: .bin says 512
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 8);
  EXPECT_EQ(f.get_int("tokenizer.ggml.seperator_token_id"), 0xFFFFFFFFll);
  EXPECT_NEAR(*f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
  EXPECT_FALSE(f.get_int("tokenizer.ggml.add_bos_token").has_value());
  EXPECT_EQ(f.find("tokenizer.ggml.pre"), nullptr);

  const GgufValue* tokens = f.get_array("tokenizer.ggml.tokens", GgufType::STRING);
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->array_size(), 512u);
  EXPECT_EQ(tokens->strings[1], "<s>");
  EXPECT_EQ(tokens->strings[2], "</s>");
  const GgufValue* scores = f.get_array("tokenizer.ggml.scores", GgufType::F32);
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(scores->array_size(), 512u);
  EXPECT_THROW(f.get_array("tokenizer.ggml.scores", GgufType::I32), Error);
  EXPECT_THROW(f.get_string("llama.block_count"), Error);

  ASSERT_EQ(f.tensors().size(), 48u);
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::F32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne, (std::array<int64_t, 4>{64, 512, 1, 1}));
  EXPECT_EQ(emb->n_bytes, 64u * 512u * 4u);
  const GgufTensorInfo* down = f.find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne, (std::array<int64_t, 4>{172, 64, 1, 1}));  // ne0 = 172: not a multiple of 32
  const GgufTensorInfo* norm = f.find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->n_dims, 1);
  EXPECT_EQ(f.find_tensor("blk.5.attn_q.weight"), nullptr);
}

// The view must point at the embedding table: stories260K.bin (llama2.c format,
// 7 x int32 header, then token_embedding_table [vocab, dim]) holds the same floats.
TEST(GgufStories260K, ViewPointsAtTheWeights) {
  const GgufFile f = GgufFile::open(test_data("models/stories260K/stories260K.gguf"));
  const TensorView emb = f.view(*f.find_tensor("token_embd.weight"));
  ASSERT_EQ(emb.n_bytes(), 64u * 512u * 4u);
  const std::vector<char> bin = read_bytes(test_data("models/stories260K/stories260K.bin"));
  ASSERT_GE(bin.size(), 28 + emb.n_bytes());
  EXPECT_EQ(std::memcmp(emb.data, bin.data() + 28, emb.n_bytes()), 0);
  // output.weight is documented to equal token_embd.weight.
  const TensorView out = f.view(*f.find_tensor("output.weight"));
  EXPECT_EQ(std::memcmp(emb.data, out.data, emb.n_bytes()), 0);
}

TEST(GgufOpen, MissingFileAndDirectoryAreErrors) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(GgufFile::open(test_data("models")), Error);
  // A file that is not GGUF: names the file and the magic it found.
  try {
    GgufFile::open(test_data("models/stories260K/stories260K.bin"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stories260K.bin: header: bad magic"), std::string::npos) << e.what();
  }
}

// Every GGUF in ../shared opens, and every tensor view lies inside the file.
TEST(GgufSharedFiles, AllOpen) {
  const std::vector<std::string> dirs = {"models/stories260K", "models/llama-2-tiny-random", "models/llama.cpp-vocab",
                                         "fixtures/models", "fixtures/quant"};
  int n_files = 0;
  for (const std::string& dir : dirs) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(test_data(dir))) {
      if (e.path().extension() != ".gguf") continue;
      SCOPED_TRACE(e.path().string());
      const GgufFile f = GgufFile::open(e.path());
      ++n_files;
      const size_t size = std::filesystem::file_size(e.path());
      for (const GgufTensorInfo& t : f.tensors()) {
        EXPECT_LE(f.data_offset() + t.offset + t.n_bytes, size) << t.name;
        EXPECT_EQ(f.view(t).n_bytes(), t.n_bytes) << t.name;
      }
    }
  }
  EXPECT_EQ(n_files, 1 + 1 + 12 + 9 + 19);
}

nlohmann::json read_json(const std::string& relative) {
  return nlohmann::json::parse(tokamak::testing::read_text_file(test_data(relative)));
}

// fixtures/models/manifest.json: tensor counts and tensor type counts per file.
TEST(GgufFixtureModels, TensorTypeCountsMatchManifest) {
  const nlohmann::json m = read_json("fixtures/models/manifest.json");
  ASSERT_EQ(m["files"].size(), 10u);
  for (const auto& entry : m["files"]) {
    const std::string file = entry["file"];
    SCOPED_TRACE(file);
    const GgufFile f = GgufFile::open(test_data(file));
    EXPECT_EQ(std::filesystem::file_size(test_data(file)), entry["size"].get<size_t>());
    EXPECT_EQ(f.tensors().size(), entry["n_tensors"].get<size_t>());
    std::map<std::string, int> counts;
    for (const GgufTensorInfo& t : f.tensors()) {
      std::string name(dtype_name(t.type));
      for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      ++counts[name];
    }
    EXPECT_EQ(counts, (entry["tensor_type_counts"].get<std::map<std::string, int>>()));
  }
}

// The micro-llama hyper-parameters of the manifest are in every quantization's metadata.
TEST(GgufFixtureModels, MicroLlamaHyperParameters) {
  const nlohmann::json hp = read_json("fixtures/models/manifest.json")["micro-llama"];
  for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}) {
    SCOPED_TRACE(type);
    const GgufFile f = GgufFile::open(test_data(std::string("fixtures/models/micro-llama-") + type + ".gguf"));
    EXPECT_EQ(f.get_string("general.architecture"), hp["arch"].get<std::string>());
    EXPECT_EQ(f.get_int("llama.embedding_length"), hp["n_embd"].get<int64_t>());
    EXPECT_EQ(f.get_int("llama.feed_forward_length"), hp["n_ff"].get<int64_t>());
    EXPECT_EQ(f.get_int("llama.block_count"), hp["n_layer"].get<int64_t>());
    EXPECT_EQ(f.get_int("llama.attention.head_count"), hp["n_head"].get<int64_t>());
    EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), hp["n_head_kv"].get<int64_t>());
    EXPECT_EQ(f.get_int("llama.context_length"), hp["n_ctx_train"].get<int64_t>());
    EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.rope.freq_base")), hp["rope_freq_base"].get<float>());
    EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")),
                    hp["rms_norm_eps"].get<float>());
    const GgufValue* tokens = f.get_array("tokenizer.ggml.tokens", GgufType::STRING);
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->array_size(), hp["n_vocab"].get<size_t>());
    const GgufTensorInfo* out = f.find_tensor("output.weight");  // "separate output.weight"
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out->ne, (std::array<int64_t, 4>{256, 512, 1, 1}));
  }
}

// fixtures/quant/manifest.json: type, shape, absolute data offset and byte count
// of every tensor, and the file size.
TEST(GgufFixtureQuant, TensorsMatchManifest) {
  const nlohmann::json m = read_json("fixtures/quant/manifest.json");
  ASSERT_EQ(m["types"].size(), 19u);
  for (const auto& type : m["types"]) {
    const std::string file = type["file"];
    SCOPED_TRACE(file);
    const GgufFile f = GgufFile::open(test_data(file));
    EXPECT_EQ(std::filesystem::file_size(test_data(file)), type["file_size"].get<size_t>());
    ASSERT_EQ(f.tensors().size(), type["tensors"].size());
    for (const auto& t : type["tensors"]) {
      const GgufTensorInfo* info = f.find_tensor(t["name"].get<std::string>());
      ASSERT_NE(info, nullptr) << t["name"];
      EXPECT_EQ(info->type, dtype_from_name(t["type"].get<std::string>()));
      const auto ne = t["ne"].get<std::vector<int64_t>>();
      ASSERT_EQ(info->n_dims, static_cast<int>(ne.size()));
      for (size_t d = 0; d < ne.size(); ++d) EXPECT_EQ(info->ne[d], ne[d]);
      EXPECT_EQ(f.data_offset() + info->offset, t["data_offset"].get<size_t>());
      EXPECT_EQ(info->n_bytes, t["n_bytes"].get<size_t>());
    }
  }
  // An F32 tensor's view holds exactly the source floats.
  const GgufFile f = GgufFile::open(test_data("fixtures/quant/F32/quant-f32.gguf"));
  const TensorView v = f.view(*f.find_tensor("blk.0.ffn_up.weight"));
  const std::vector<float> src = tokamak::testing::read_f32_file(test_data("fixtures/quant/source/blk.0.ffn_up.weight.f32"));
  ASSERT_EQ(static_cast<int64_t>(src.size()), v.n_elements());
  EXPECT_EQ(std::memcmp(v.data, src.data(), v.n_bytes()), 0);
}

// models/SOURCES.md: llama-2-tiny-random.
TEST(GgufLlama2TinyRandom, DocumentedValues) {
  const GgufFile f = GgufFile::open(test_data("models/llama-2-tiny-random/llama-2-tiny-random.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_int("general.file_type"), 1);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 8);
  EXPECT_EQ(f.get_int("llama.block_count"), 1);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 2);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 32);
  EXPECT_EQ(f.get_int("llama.context_length"), 4096);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f.get_int("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens", GgufType::STRING)->array_size(), 32000u);
  ASSERT_NE(f.find_tensor("output.weight"), nullptr);  // untied
  // "F16 matrices, F32 norms".
  for (const GgufTensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.type, t.n_dims == 2 ? DType::F16 : DType::F32) << t.name;
  }
}

// The vocabulary of llama-2-tiny-random (and of ggml-vocab-llama-spm) is the one
// of llama2-tokenizer/tokenizer.bin: int32 max_len, then (f32 score, int32 len, bytes) x 32000.
TEST(GgufLlama2TinyRandom, VocabularyEqualsTokenizerBin) {
  const std::vector<char> bin = read_bytes(test_data("models/llama2-tokenizer/tokenizer.bin"));
  std::vector<std::string> tokens;
  std::vector<float> scores;
  size_t p = 4;
  while (p + 8 <= bin.size()) {
    float score;
    int32_t len;
    std::memcpy(&score, bin.data() + p, 4);
    std::memcpy(&len, bin.data() + p + 4, 4);
    p += 8;
    ASSERT_LE(p + static_cast<size_t>(len), bin.size());
    tokens.emplace_back(bin.data() + p, static_cast<size_t>(len));
    scores.push_back(score);
    p += static_cast<size_t>(len);
  }
  ASSERT_EQ(tokens.size(), 32000u);
  for (const char* file : {"models/llama-2-tiny-random/llama-2-tiny-random.gguf",
                           "models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"}) {
    SCOPED_TRACE(file);
    const GgufFile f = GgufFile::open(test_data(file));
    const GgufValue* t = f.get_array("tokenizer.ggml.tokens", GgufType::STRING);
    const GgufValue* s = f.get_array("tokenizer.ggml.scores", GgufType::F32);
    ASSERT_TRUE(t != nullptr && s != nullptr);
    ASSERT_EQ(t->strings.size(), 32000u);
    ASSERT_EQ(s->floats.size(), 32000u);
    int token_mismatches = 0;
    int score_mismatches = 0;
    for (size_t i = 0; i < 32000; ++i) {
      // llama2.c writes SentencePiece's U+2581 as a space; the GGUF keeps it.
      std::string g;
      for (size_t k = 0; k < t->strings[i].size(); ++k) {
        if (t->strings[i].compare(k, 3, "\xe2\x96\x81") == 0) {
          g += ' ';
          k += 2;
        } else {
          g += t->strings[i][k];
        }
      }
      token_mismatches += g != tokens[i];
      score_mismatches += static_cast<float>(s->floats[i]) != scores[i];
    }
    EXPECT_EQ(score_mismatches, 0);
    // Only BOS and EOS differ: llama2.c spells them "\n<s>\n" and "\n</s>\n".
    EXPECT_EQ(token_mismatches, 2);
  }
}

// models/SOURCES.md: the vocabulary sizes of the vocab-only files (zero tensors).
TEST(GgufVocabFiles, VocabularySizes) {
  const std::map<std::string, size_t> sizes = {
      {"llama-spm", 32000},   {"phi-3", 32064},     {"baichuan", 64000},      {"bert-bge", 30522},
      {"gpt-2", 50257},       {"falcon", 65024},    {"mpt", 50432},           {"gpt-neox", 50432},
      {"refact", 49216},      {"starcoder", 49152}, {"deepseek-llm", 102400}, {"deepseek-coder", 32256},
  };
  for (const auto& [name, n] : sizes) {
    SCOPED_TRACE(name);
    const GgufFile f = GgufFile::open(test_data("models/llama.cpp-vocab/ggml-vocab-" + name + ".gguf"));
    EXPECT_TRUE(f.tensors().empty());
    const GgufValue* tokens = f.get_array("tokenizer.ggml.tokens", GgufType::STRING);
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->array_size(), n);
    EXPECT_LE(f.data_offset(), std::filesystem::file_size(test_data("models/llama.cpp-vocab/ggml-vocab-" + name + ".gguf")));
  }
}

}  // namespace
}  // namespace tokamak::io
