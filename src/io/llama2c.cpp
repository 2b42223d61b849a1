#include "io/llama2c.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace tokamak::io {
namespace {

// A [rows x cols] f32 matrix view at `*cursor`, advancing the cursor.
TensorView take_f32(const std::byte*& cursor, int64_t cols, int64_t rows = 1) {
  TensorView v;
  v.type = DType::F32;
  v.n_dims = rows == 1 ? 1 : 2;
  v.ne = {cols, rows, 1, 1};
  v.data = cursor;
  cursor += static_cast<size_t>(cols * rows) * sizeof(float);
  return v;
}

}  // namespace

Llama2cCheckpoint Llama2cCheckpoint::open(const std::filesystem::path& path) {
  Llama2cCheckpoint ck;
  ck.file_ = std::make_shared<MappedFile>(MappedFile::open(path));
  const std::span<const std::byte> bytes = ck.file_->bytes();
  const std::string name = path.string();
  constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);
  if (bytes.size() < kHeaderBytes) {
    throw Error(name + ": llama2.c checkpoint too small for its 28-byte header (size " +
                std::to_string(bytes.size()) + ")");
  }
  int32_t h[7];
  std::memcpy(h, bytes.data(), kHeaderBytes);
  Llama2cConfig& c = ck.config_;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.seq_len = h[6];
  const char* fields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    // 1 << 20 bounds every field so that the size arithmetic below cannot overflow.
    if (h[i] == 0 || h[i] == INT32_MIN || (h[i] < 0 && i != 5) || std::abs(h[i]) > (1 << 20)) {
      throw Error(name + ": llama2.c header field " + fields[i] + " = " + std::to_string(h[i]) +
                  " is out of range");
    }
  }
  c.vocab_size = std::abs(h[5]);  // negative: a separate classifier follows
  c.shared_classifier = h[5] > 0;
  if (c.dim % c.n_heads != 0) {
    throw Error(name + ": dim " + std::to_string(c.dim) + " is not divisible by n_heads " +
                std::to_string(c.n_heads));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    throw Error(name + ": n_heads " + std::to_string(c.n_heads) + " is not divisible by n_kv_heads " +
                std::to_string(c.n_kv_heads));
  }
  const int64_t dim = c.dim, hidden = c.hidden_dim, layers = c.n_layers, vocab = c.vocab_size;
  const int64_t head_size = dim / c.n_heads;
  const int64_t kv_dim = head_size * c.n_kv_heads;
  const int64_t freq_cis = static_cast<int64_t>(c.seq_len) * head_size;  // real + imag halves
  // Fields are bounded by 2^20, so 128-bit arithmetic cannot overflow here.
  using Wide = unsigned __int128;
  const Wide per_layer = Wide(2 * dim) + Wide(dim) * dim * 2 + Wide(2 * dim) * kv_dim + Wide(3 * dim) * hidden;
  const Wide n_floats = Wide(vocab) * dim + Wide(layers) * per_layer + dim + freq_cis +
                        (c.shared_classifier ? Wide(0) : Wide(vocab) * dim);
  const Wide expected = kHeaderBytes + n_floats * sizeof(float);
  if (Wide(bytes.size()) != expected) {
    const std::string implied = expected > Wide(UINT64_MAX) ? std::string("more than 2^64")
                                                            : std::to_string(static_cast<uint64_t>(expected));
    throw Error(name + ": llama2.c checkpoint size " + std::to_string(bytes.size()) +
                " does not match the header, which implies " + implied + " bytes");
  }

  const std::byte* cur = bytes.data() + kHeaderBytes;
  ck.token_embedding = take_f32(cur, dim, vocab);
  ck.layers.resize(static_cast<size_t>(layers));
  // Each weight kind is stored for all layers before the next kind begins.
  for (Llama2cLayer& l : ck.layers) l.rms_att = take_f32(cur, dim);
  for (Llama2cLayer& l : ck.layers) l.wq = take_f32(cur, dim, dim);
  for (Llama2cLayer& l : ck.layers) l.wk = take_f32(cur, dim, kv_dim);
  for (Llama2cLayer& l : ck.layers) l.wv = take_f32(cur, dim, kv_dim);
  for (Llama2cLayer& l : ck.layers) l.wo = take_f32(cur, dim, dim);
  for (Llama2cLayer& l : ck.layers) l.rms_ffn = take_f32(cur, dim);
  for (Llama2cLayer& l : ck.layers) l.w1 = take_f32(cur, dim, hidden);
  for (Llama2cLayer& l : ck.layers) l.w2 = take_f32(cur, hidden, dim);
  for (Llama2cLayer& l : ck.layers) l.w3 = take_f32(cur, dim, hidden);
  ck.rms_final = take_f32(cur, dim);
  cur += static_cast<size_t>(freq_cis) * sizeof(float);  // RoPE tables: recomputed, not read
  ck.wcls = c.shared_classifier ? ck.token_embedding : take_f32(cur, dim, vocab);
  return ck;
}

}  // namespace tokamak::io
