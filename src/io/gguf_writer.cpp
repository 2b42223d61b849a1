// GGUF v3 writer. Layout it produces (the same as llama.cpp's writer, so a file
// read and written back is byte-identical): header, kvs in insertion order,
// tensor infos with offsets packed in insertion order, each tensor's start
// rounded up to the alignment; zero padding before the data section and after
// every tensor (none at all in a file without tensors).
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include "core/error.h"
#include "io/gguf.h"
#include "io/output_file.h"

namespace tokamak::io {
namespace {

constexpr size_t kDefaultAlignment = 32;

size_t align_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

std::string key_error(std::string_view key, const std::string& msg) {
  return "GGUF writer: key '" + std::string(key) + "': " + msg;
}

class ByteSink {
 public:
  explicit ByteSink(std::vector<std::byte>& out) : out_(out) {}
  template <class T>
  void put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    const size_t at = out_.size();
    out_.resize(at + s.size());
    if (!s.empty()) std::memcpy(out_.data() + at, s.data(), s.size());
  }
  void pad_to(size_t alignment) { out_.resize(align_up(out_.size(), alignment), std::byte{0}); }

 private:
  std::vector<std::byte>& out_;
};

// Writes integer `v` as GGUF type `t`, rejecting values that do not fit.
void put_integer(ByteSink& s, std::string_view key, GgufType t, int64_t v) {
  auto fits = [&](int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
      throw Error(key_error(key, "value " + std::to_string(v) + " does not fit " + std::string(gguf_type_name(t))));
    }
  };
  switch (t) {
    case GgufType::U8: fits(0, UINT8_MAX); s.put(static_cast<uint8_t>(v)); return;
    case GgufType::I8: fits(INT8_MIN, INT8_MAX); s.put(static_cast<int8_t>(v)); return;
    case GgufType::U16: fits(0, UINT16_MAX); s.put(static_cast<uint16_t>(v)); return;
    case GgufType::I16: fits(INT16_MIN, INT16_MAX); s.put(static_cast<int16_t>(v)); return;
    case GgufType::U32: fits(0, UINT32_MAX); s.put(static_cast<uint32_t>(v)); return;
    case GgufType::I32: fits(INT32_MIN, INT32_MAX); s.put(static_cast<int32_t>(v)); return;
    case GgufType::U64: fits(0, INT64_MAX); s.put(static_cast<uint64_t>(v)); return;
    case GgufType::I64: s.put(v); return;
    case GgufType::BOOL: fits(0, 1); s.put(static_cast<uint8_t>(v)); return;
    default: break;
  }
  throw Error(key_error(key, "internal: put_integer of type " + std::string(gguf_type_name(t))));
}

bool is_float(GgufType t) { return t == GgufType::F32 || t == GgufType::F64; }

void put_float(ByteSink& s, GgufType t, double v) {
  if (t == GgufType::F32) {
    s.put(static_cast<float>(v));
  } else {
    s.put(v);
  }
}

bool valid_type(GgufType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(GgufType::F64); }

void put_value(ByteSink& s, std::string_view key, const GgufValue& v) {
  if (v.type == GgufType::STRING) {
    s.put_string(v.str);
  } else if (v.type == GgufType::ARRAY) {
    s.put(static_cast<uint32_t>(v.elem_type));
    s.put<uint64_t>(v.array_size());
    if (v.elem_type == GgufType::STRING) {
      for (const std::string& e : v.strings) s.put_string(e);
    } else if (is_float(v.elem_type)) {
      for (double e : v.floats) put_float(s, v.elem_type, e);
    } else {
      for (int64_t e : v.ints) put_integer(s, key, v.elem_type, e);
    }
  } else if (is_float(v.type)) {
    put_float(s, v.type, v.f);
  } else {
    put_integer(s, key, v.type, v.i);
  }
}

void check_value(std::string_view key, const GgufValue& v) {
  if (!valid_type(v.type)) throw Error(key_error(key, "unknown value type " + std::to_string(uint32_t(v.type))));
  if (v.type != GgufType::ARRAY) return;
  if (!valid_type(v.elem_type)) {
    throw Error(key_error(key, "unknown array element type " + std::to_string(uint32_t(v.elem_type))));
  }
  if (v.elem_type == GgufType::ARRAY) throw Error(key_error(key, "nested arrays are not supported"));
}

GgufValue scalar(GgufType t, int64_t i) {
  GgufValue v;
  v.type = t;
  v.i = i;
  return v;
}

GgufValue array_of(GgufType elem) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = elem;
  return v;
}

}  // namespace

void GgufWriter::set(std::string key, GgufValue value) {
  check_value(key, value);
  for (GgufKeyValue& kv : kv_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kv_.push_back({std::move(key), std::move(value)});
}

void GgufWriter::set_u32(std::string key, uint32_t v) { set(std::move(key), scalar(GgufType::U32, v)); }
void GgufWriter::set_i32(std::string key, int32_t v) { set(std::move(key), scalar(GgufType::I32, v)); }
void GgufWriter::set_bool(std::string key, bool v) { set(std::move(key), scalar(GgufType::BOOL, v ? 1 : 0)); }

void GgufWriter::set_u64(std::string key, uint64_t v) {
  // The reader keeps integers as int64; a value it would reject is not written.
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(key_error(key, "u64 value " + std::to_string(v) + " does not fit in int64"));
  }
  set(std::move(key), scalar(GgufType::U64, static_cast<int64_t>(v)));
}

void GgufWriter::set_f32(std::string key, float v) {
  GgufValue g;
  g.type = GgufType::F32;
  g.f = v;
  set(std::move(key), std::move(g));
}

void GgufWriter::set_string(std::string key, std::string v) {
  GgufValue g;
  g.type = GgufType::STRING;
  g.str = std::move(v);
  set(std::move(key), std::move(g));
}

void GgufWriter::set_string_array(std::string key, std::vector<std::string> v) {
  GgufValue g = array_of(GgufType::STRING);
  g.strings = std::move(v);
  set(std::move(key), std::move(g));
}

void GgufWriter::set_f32_array(std::string key, std::vector<float> v) {
  GgufValue g = array_of(GgufType::F32);
  g.floats.assign(v.begin(), v.end());
  set(std::move(key), std::move(g));
}

void GgufWriter::set_i32_array(std::string key, std::vector<int32_t> v) {
  GgufValue g = array_of(GgufType::I32);
  g.ints.assign(v.begin(), v.end());
  set(std::move(key), std::move(g));
}

void GgufWriter::remove(std::string_view key) {
  std::erase_if(kv_, [&](const GgufKeyValue& kv) { return kv.key == key; });
}

size_t GgufWriter::check_new_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne) const {
  const std::string where = "GGUF writer: tensor '" + name + "': ";
  for (const Tensor& t : tensors_) {
    if (t.name == name) throw Error(where + "added twice");
  }
  if (ne.empty() || ne.size() > 4) throw Error(where + "n_dims " + std::to_string(ne.size()) + " is not in 1..4");
  const DTypeTraits& tr = dtype_traits(type);
  int64_t rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) throw Error(where + "ne[" + std::to_string(d) + "] = " + std::to_string(ne[d]) + " is not positive");
    if (d > 0 && __builtin_mul_overflow(rows, ne[d], &rows)) throw Error(where + "shape overflows int64");
  }
  if (ne[0] % tr.block_size != 0) {
    throw Error(where + "ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the " + std::string(tr.name) +
                " block size " + std::to_string(tr.block_size));
  }
  size_t n_bytes = 0;
  if (__builtin_mul_overflow(row_bytes(type, ne[0]), static_cast<size_t>(rows), &n_bytes)) {
    throw Error(where + "byte size overflows");
  }
  return n_bytes;
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> ne, std::span<const std::byte> data) {
  const size_t expected = check_new_tensor(name, type, ne);
  if (data.size() != expected) {
    throw Error("GGUF writer: tensor '" + name + "': got " + std::to_string(data.size()) +
                " bytes of data, the shape needs " + std::to_string(expected));
  }
  tensors_.push_back({std::move(name), type, std::move(ne), expected, false, std::vector<std::byte>(data.begin(), data.end())});
}

void GgufWriter::declare_tensor(std::string name, DType type, std::vector<int64_t> ne) {
  const size_t n_bytes = check_new_tensor(name, type, ne);
  tensors_.push_back({std::move(name), type, std::move(ne), n_bytes, true, {}});
}

namespace {

size_t writer_alignment(const std::vector<GgufKeyValue>& kv) {
  for (const GgufKeyValue& e : kv) {
    if (e.key != "general.alignment") continue;
    if (e.value.type != GgufType::U32 || e.value.i <= 0 || !std::has_single_bit(static_cast<uint64_t>(e.value.i))) {
      throw Error(key_error(e.key, "must be a u32 nonzero power of two"));
    }
    return static_cast<size_t>(e.value.i);
  }
  return kDefaultAlignment;
}

}  // namespace

// Header, kvs, tensor infos and the padding up to the data section.
std::vector<std::byte> GgufWriter::header_bytes() const {
  const size_t alignment = writer_alignment(kv_);
  std::vector<std::byte> out;
  ByteSink s(out);
  s.put<uint32_t>(0x46554747);  // "GGUF" read as a little-endian u32
  s.put<uint32_t>(3);
  s.put<uint64_t>(tensors_.size());
  s.put<uint64_t>(kv_.size());
  for (const GgufKeyValue& kv : kv_) {
    s.put_string(kv.key);
    s.put(static_cast<uint32_t>(kv.value.type));
    put_value(s, kv.key, kv.value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    s.put_string(t.name);
    s.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) s.put<uint64_t>(static_cast<uint64_t>(n));
    s.put(static_cast<uint32_t>(t.type));
    s.put<uint64_t>(offset);
    offset += align_up(t.n_bytes, alignment);
  }
  // A file without tensors (a vocabulary) ends here, as llama.cpp writes it.
  if (!tensors_.empty()) s.pad_to(alignment);
  return out;
}

size_t GgufWriter::data_bytes() const {
  const size_t alignment = writer_alignment(kv_);
  size_t total = 0;
  for (const Tensor& t : tensors_) total += align_up(t.n_bytes, alignment);
  return total;
}

namespace {

std::string declared_error(const std::string& name) {
  return "GGUF writer: tensor '" + name + "' was declared without data; write it with a TensorFill";
}

}  // namespace

std::vector<std::byte> GgufWriter::to_bytes() const {
  const size_t alignment = writer_alignment(kv_);
  std::vector<std::byte> out = header_bytes();
  for (const Tensor& t : tensors_) {
    if (t.declared) throw Error(declared_error(t.name));
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align_up(out.size(), alignment), std::byte{0});
  }
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  for (const Tensor& t : tensors_) {
    if (t.declared) throw Error(declared_error(t.name));
  }
  write(path, [](size_t, std::span<std::byte>) {});
}

void GgufWriter::write(const std::filesystem::path& path, const TensorFill& fill) const {
  OutputFile out = OutputFile::create(path);
  write(out, fill);
  out.commit();
}

void GgufWriter::write(OutputFile& out, const TensorFill& fill) const {
  const size_t alignment = writer_alignment(kv_);
  out.write(header_bytes());
  // Data goes straight from each tensor's buffer (or the one fill buffer):
  // no second copy of the weights.
  std::vector<std::byte> buffer;
  const std::byte zeros[64]{};
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.declared) {
      buffer.resize(t.n_bytes);
      fill(i, buffer);
      out.write(buffer);
    } else {
      out.write(t.data);
    }
    for (size_t pad = align_up(t.n_bytes, alignment) - t.n_bytes; pad > 0;) {
      const size_t n = std::min(pad, sizeof(zeros));
      out.write(std::span(zeros, n));
      pad -= n;
    }
  }
}

}  // namespace tokamak::io
