// GGUF reader on the real files of ../shared, checked against the values their
// SOURCES.md / manifest.json document.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

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

}  // namespace
}  // namespace tokamak::io
