// llama2.c tokenizer.bin reader. The file holds no token count: the caller
// passes the checkpoint's vocab_size, and bytes after the last token are
// ignored, as run.c does.
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/llama2c.h"

namespace tokamak::io {

namespace {

// "max_token_length" or "token 17 score": built only when an error needs it.
std::string field_name(int32_t token, const char* field) {
  return token < 0 ? std::string(field) : "token " + std::to_string(token) + " " + field;
}

// A forward-only cursor over the mapped bytes; every read checks what is left.
// `token` is the index named in errors (-1 for the header).
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  size_t left() const { return bytes_.size() - pos_; }

  template <typename T>
  T read(int32_t token, const char* field) {
    if (left() < sizeof(T)) fail(token, field, sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(size_t n, int32_t token, const char* field) {
    if (left() < n) fail(token, field, n);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  [[noreturn]] void fail(int32_t token, const char* field, size_t need) const {
    throw Error(name_ + ": " + field_name(token, field) + " at offset " + std::to_string(pos_) + " needs " +
                std::to_string(need) + " bytes, but only " + std::to_string(left()) + " are left (file size " +
                std::to_string(bytes_.size()) + ")");
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& name_;
  size_t pos_ = 0;
};

}  // namespace

Llama2cVocab load_llama2c_tokenizer(const std::filesystem::path& path, int32_t vocab_size) {
  const std::string name = path.string();
  if (vocab_size <= 0) throw Error(name + ": vocab_size must be positive, got " + std::to_string(vocab_size));
  const MappedFile file = MappedFile::open(path);
  Reader r(file.bytes(), name);

  Llama2cVocab vocab;
  vocab.max_token_length = r.read<int32_t>(-1, "max_token_length");
  if (vocab.max_token_length < 0) {
    throw Error(name + ": max_token_length is negative (" + std::to_string(vocab.max_token_length) + ")");
  }
  // Each token takes at least 8 bytes: reject an impossible vocab_size before reserving for it.
  if (static_cast<size_t>(vocab_size) > r.left() / 8) {
    throw Error(name + ": " + std::to_string(r.left()) + " bytes after the header cannot hold " +
                std::to_string(vocab_size) + " tokens (vocab_size)");
  }
  vocab.pieces.reserve(static_cast<size_t>(vocab_size));
  vocab.scores.reserve(static_cast<size_t>(vocab_size));
  for (int32_t i = 0; i < vocab_size; ++i) {
    const float score = r.read<float>(i, "score");
    if (std::isnan(score)) throw Error(name + ": " + field_name(i, "score") + " is NaN");
    const int32_t len = r.read<int32_t>(i, "length");
    if (len < 0) throw Error(name + ": " + field_name(i, "length") + " is negative (" + std::to_string(len) + ")");
    vocab.scores.push_back(score);
    vocab.pieces.push_back(r.read_string(static_cast<size_t>(len), i, "bytes"));
  }
  return vocab;
}

}  // namespace tokamak::io
