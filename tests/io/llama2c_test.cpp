#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "common/test_data.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/llama2c.h"

namespace tokamak::io {
namespace {

using testing::read_text_file;
using testing::test_data;

TEST(Llama2cCheckpoint, Stories260KHeaderAndWeightsMatchTheGguf) {
  const Llama2cCheckpoint ck = Llama2cCheckpoint::open(test_data("models/stories260K/stories260K.bin"));
  const Llama2cConfig& c = ck.config();
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  const GgufFile gguf = GgufFile::open(test_data("models/stories260K/stories260K.gguf"));
  auto same = [&](const TensorView& v, const std::string& name) {
    const GgufTensorInfo* info = gguf.find_tensor(name);
    ASSERT_NE(info, nullptr) << name;
    const TensorView g = gguf.view(*info);
    ASSERT_EQ(v.ne, g.ne) << name;
    EXPECT_EQ(std::memcmp(v.data, g.data, g.n_bytes()), 0) << name;
  };
  same(ck.token_embedding, "token_embd.weight");
  same(ck.rms_final, "output_norm.weight");
  for (int l = 0; l < 5; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const Llama2cLayer& layer = ck.layers[static_cast<size_t>(l)];
    same(layer.wq, p + "attn_q.weight");
    same(layer.wk, p + "attn_k.weight");
    same(layer.wo, p + "attn_output.weight");
    same(layer.w1, p + "ffn_gate.weight");
    same(layer.w2, p + "ffn_down.weight");
    same(layer.w3, p + "ffn_up.weight");
    same(layer.rms_ffn, p + "ffn_norm.weight");
  }
}

// Writes `bytes` to a temporary file and returns the error opening it gives.
std::string open_error(const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/bad_llama2c.bin";
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  try {
    Llama2cCheckpoint::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string header(std::initializer_list<int32_t> fields) {
  std::string out;
  for (int32_t f : fields) out.append(reinterpret_cast<const char*>(&f), sizeof f);
  return out;
}

TEST(Llama2cCheckpoint, MalformedFilesGiveCleanErrors) {
  const std::string good = read_text_file(test_data("models/stories260K/stories260K.bin"));
  EXPECT_NE(open_error("").find("too small"), std::string::npos);
  EXPECT_NE(open_error(good.substr(0, 27)).find("too small"), std::string::npos);
  for (size_t cut : {size_t{28}, size_t{1000}, good.size() - 1}) {
    EXPECT_NE(open_error(good.substr(0, cut)).find("does not match the header"), std::string::npos) << cut;
  }
  EXPECT_NE(open_error(good + "x").find("does not match"), std::string::npos);
  EXPECT_NE(open_error(header({64, 172, 5, 8, 3, 512, 512})).find("not divisible by n_kv_heads"), std::string::npos);
  EXPECT_NE(open_error(header({64, 172, 5, 7, 7, 512, 512})).find("not divisible by n_heads"), std::string::npos);
  EXPECT_NE(open_error(header({64, 0, 5, 8, 4, 512, 512})).find("hidden_dim = 0"), std::string::npos);
  EXPECT_NE(open_error(header({64, 172, -5, 8, 4, 512, 512})).find("n_layers = -5"), std::string::npos);
  EXPECT_NE(open_error(header({INT32_MAX, 172, 5, 8, 4, 512, 512})).find("dim"), std::string::npos);
  EXPECT_NE(open_error(header({64, 172, 5, 8, 4, INT32_MIN, 512})).find("vocab_size"), std::string::npos);
  // Largest allowed fields: the implied size is checked without overflow.
  EXPECT_NE(open_error(header({1 << 20, 1 << 20, 1 << 20, 1, 1, 1 << 20, 1 << 20})).find("does not match"),
            std::string::npos);
}

}  // namespace
}  // namespace tokamak::io
