// GGUF reader: validates the whole header of a mapped file before anything is
// used. Every read goes through ByteReader, which checks the bytes left; every
// count is checked against the bytes left before anything is allocated for it,
// so a hostile count (2^60 strings) fails without allocating.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include "core/error.h"
#include "io/gguf.h"

namespace tokamak::io {

static_assert(std::endian::native == std::endian::little,
              "GGUF is read by reinterpreting little-endian bytes");

namespace {

constexpr uint32_t kMaxGgufType = static_cast<uint32_t>(GgufType::F64);
constexpr size_t kDefaultAlignment = 32;

// Bytes of one scalar of `t` (0 for STRING and ARRAY, which have no fixed size).
size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return 0;
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64:
    case GgufType::BOOL:
      return true;
    default:
      return false;
  }
}

std::string quote_name(std::string_view s) {
  // Names come from the file: cap the length and escape control bytes so an
  // error message stays one readable line.
  constexpr size_t kMax = 80;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMax) out += "...";
  out += "'";
  return out;
}

// Bounds-checked little-endian reads over the file's bytes. `field` names what
// is being read (the key or tensor) so that errors point at it.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  size_t pos() const { return pos_; }
  size_t size() const { return bytes_.size(); }
  size_t remaining() const { return bytes_.size() - pos_; }
  void set_field(std::string field) {
    field_ = std::move(field);
    element_ = kNoElement;
  }
  // The array element being read (named in errors); a store, so cheap per element.
  void set_element(uint64_t i) { element_ = i; }
  void clear_element() { element_ = kNoElement; }

  [[noreturn]] void fail(const std::string& msg) const {
    const std::string element = element_ == kNoElement ? "" : " element " + std::to_string(element_);
    throw Error(file_ + ": " + field_ + element + ": " + msg);
  }

  void need(size_t n, std::string_view what) const {
    if (n > remaining()) {
      fail(std::string(what) + " truncated at offset " + std::to_string(pos_) + " (needs " + std::to_string(n) +
           " bytes, " + std::to_string(remaining()) + " left, file size " + std::to_string(size()) + ")");
    }
  }

  template <class T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A GGUF string: u64 length, then that many bytes (not NUL-terminated).
  std::string_view read_string(std::string_view what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining()) {
      fail(std::string(what) + " length " + std::to_string(len) + " exceeds the " + std::to_string(remaining()) +
           " bytes left in the file (size " + std::to_string(size()) + ")");
    }
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  // Rejects a count of items, each at least `min_item_bytes` long, that cannot
  // fit in the bytes left: the check that comes before any allocation.
  void check_count(uint64_t count, size_t min_item_bytes, std::string_view what) const {
    if (count > remaining() / min_item_bytes) {
      fail(std::string(what) + " " + std::to_string(count) + " is impossible: each needs at least " +
           std::to_string(min_item_bytes) + " bytes and only " + std::to_string(remaining()) +
           " are left in the file (size " + std::to_string(size()) + ")");
    }
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& file_;
  static constexpr uint64_t kNoElement = ~uint64_t{0};
  std::string field_ = "header";
  uint64_t element_ = kNoElement;
  size_t pos_ = 0;
};

GgufType read_type_id(ByteReader& r, std::string_view what) {
  const uint32_t id = r.read<uint32_t>(what);
  if (id > kMaxGgufType) r.fail("unknown " + std::string(what) + " " + std::to_string(id));
  return static_cast<GgufType>(id);
}

// One scalar of type `t` (not STRING/ARRAY), widened into `i` or `f`.
template <class Sink>
void read_scalar(ByteReader& r, GgufType t, Sink&& sink) {
  switch (t) {
    case GgufType::U8: sink.integer(r.read<uint8_t>("u8 value")); return;
    case GgufType::I8: sink.integer(r.read<int8_t>("i8 value")); return;
    case GgufType::U16: sink.integer(r.read<uint16_t>("u16 value")); return;
    case GgufType::I16: sink.integer(r.read<int16_t>("i16 value")); return;
    case GgufType::U32: sink.integer(r.read<uint32_t>("u32 value")); return;
    case GgufType::I32: sink.integer(r.read<int32_t>("i32 value")); return;
    case GgufType::I64: sink.integer(r.read<int64_t>("i64 value")); return;
    case GgufType::U64: {
      const uint64_t v = r.read<uint64_t>("u64 value");
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        r.fail("u64 value " + std::to_string(v) + " does not fit in int64");
      }
      sink.integer(static_cast<int64_t>(v));
      return;
    }
    case GgufType::BOOL: {
      const uint8_t v = r.read<uint8_t>("bool value");
      if (v > 1) r.fail("bool value " + std::to_string(v) + " is neither 0 nor 1");
      sink.integer(v);
      return;
    }
    case GgufType::F32: sink.floating(r.read<float>("f32 value")); return;
    case GgufType::F64: sink.floating(r.read<double>("f64 value")); return;
    case GgufType::STRING: case GgufType::ARRAY: break;
  }
  r.fail("internal: read_scalar of a non-scalar type");
}

struct ScalarSink {
  GgufValue& v;
  void integer(int64_t x) { v.i = x; }
  void floating(double x) { v.f = x; }
};

struct ArraySink {
  GgufValue& v;
  void integer(int64_t x) { v.ints.push_back(x); }
  void floating(double x) { v.floats.push_back(x); }
};

GgufValue read_value(ByteReader& r, GgufType type) {
  GgufValue v;
  v.type = type;
  if (type == GgufType::STRING) {
    v.str = std::string(r.read_string("string value"));
    return v;
  }
  if (type != GgufType::ARRAY) {
    read_scalar(r, type, ScalarSink{v});
    return v;
  }
  v.elem_type = read_type_id(r, "array element type id");
  if (v.elem_type == GgufType::ARRAY) r.fail("nested arrays are not supported");
  const uint64_t n = r.read<uint64_t>("array length");
  const size_t elem_bytes = v.elem_type == GgufType::STRING ? sizeof(uint64_t) : scalar_size(v.elem_type);
  r.check_count(n, elem_bytes, "array length");
  if (v.elem_type == GgufType::STRING) {
    v.strings.reserve(static_cast<size_t>(n));
    for (uint64_t k = 0; k < n; ++k) {
      r.set_element(k);
      v.strings.emplace_back(r.read_string("string"));
    }
    r.clear_element();
  } else {
    if (is_integer(v.elem_type)) {
      v.ints.reserve(static_cast<size_t>(n));
    } else {
      v.floats.reserve(static_cast<size_t>(n));
    }
    ArraySink sink{v};
    for (uint64_t k = 0; k < n; ++k) {
      r.set_element(k);
      read_scalar(r, v.elem_type, sink);
    }
    r.clear_element();
  }
  return v;
}

// a * b into `out`; false on overflow of T.
template <class T>
bool mul_overflows(T a, T b, T& out) {
  return __builtin_mul_overflow(a, b, &out);
}

std::string shape_string(const GgufTensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(t.ne[d]);
  }
  return s + "]";
}

// Indices 0..n-1 sorted by key(i); fails on the first equal pair.
template <class Key, class Fail>
std::vector<uint32_t> sorted_unique_index(size_t n, Key key, Fail fail) {
  std::vector<uint32_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = static_cast<uint32_t>(i);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  for (size_t i = 1; i < n; ++i) {
    if (key(idx[i - 1]) == key(idx[i])) fail(idx[i - 1], idx[i]);
  }
  return idx;
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "unknown";
}

size_t GgufValue::array_size() const {
  if (type != GgufType::ARRAY) return 0;
  if (elem_type == GgufType::STRING) return strings.size();
  if (elem_type == GgufType::F32 || elem_type == GgufType::F64) return floats.size();
  return ints.size();
}

// Parses the header into a GgufFile; a class so that it may fill the private members.
class GgufParser {
 public:
  static void parse(GgufFile& f) {
    ByteReader r(f.bytes_, f.name_);
    parse_preamble(r, f);
    const uint64_t n_tensors = r.read<uint64_t>("tensor count");
    const uint64_t n_kv = r.read<uint64_t>("metadata key count");
    // Smallest encodings: a kv is key length (8) + type (4) + a 1-byte value;
    // a tensor info is name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
    r.check_count(n_kv, 8 + 4 + 1, "metadata key count");
    r.check_count(n_tensors, 8 + 4 + 8 + 4 + 8, "tensor count");
    parse_metadata(r, f, n_kv);
    parse_alignment(r, f);
    parse_tensor_infos(r, f, n_tensors);
    place_data(r, f);
  }

 private:
  static void parse_preamble(ByteReader& r, GgufFile& f) {
    r.need(4, "magic");
    const std::byte* m = f.bytes_.data();
    if (std::memcmp(m, "GGUF", 4) != 0) {
      std::string got;
      for (int k = 0; k < 4; ++k) got += static_cast<char>(m[k]);
      r.fail("bad magic " + quote_name(got) + " (expected 'GGUF'): not a GGUF file");
    }
    r.read<uint32_t>("magic");
    const uint32_t version = r.read<uint32_t>("version");
    if (version == 1) r.fail("GGUF version 1 is not supported (it used 32-bit counts); convert the file to v3");
    if (version != 2 && version != 3) {
      if (version == 0x02000000u || version == 0x03000000u) {
        r.fail("version " + std::to_string(version) + ": big-endian GGUF files are not supported");
      }
      r.fail("unsupported GGUF version " + std::to_string(version) + " (supported: 2, 3)");
    }
    f.version_ = version;
  }

  static void parse_metadata(ByteReader& r, GgufFile& f, uint64_t n_kv) {
    f.kv_.reserve(static_cast<size_t>(n_kv));
    for (uint64_t k = 0; k < n_kv; ++k) {
      r.set_field("metadata key #" + std::to_string(k));
      GgufKeyValue kv;
      kv.key = std::string(r.read_string("key"));
      r.set_field("key " + quote_name(kv.key));
      const GgufType type = read_type_id(r, "value type id");
      kv.value = read_value(r, type);
      f.kv_.push_back(std::move(kv));
    }
    r.set_field("metadata");
    f.kv_by_key_ = sorted_unique_index(
        f.kv_.size(), [&](uint32_t i) -> std::string_view { return f.kv_[i].key; },
        [&](uint32_t a, uint32_t b) {
          r.fail("duplicate key " + quote_name(f.kv_[a].key) + " (entries #" + std::to_string(std::min(a, b)) + " and #" +
                 std::to_string(std::max(a, b)) + ")");
        });
  }

  static void parse_alignment(ByteReader& r, GgufFile& f) {
    f.alignment_ = kDefaultAlignment;
    const GgufValue* a = f.find("general.alignment");
    if (a == nullptr) return;
    r.set_field("key 'general.alignment'");
    if (a->type != GgufType::U32) r.fail("has type " + std::string(gguf_type_name(a->type)) + ", expected u32");
    if (a->i == 0 || !std::has_single_bit(static_cast<uint64_t>(a->i))) {
      r.fail("alignment " + std::to_string(a->i) + " is not a nonzero power of two");
    }
    f.alignment_ = static_cast<size_t>(a->i);
  }

  static void parse_tensor_infos(ByteReader& r, GgufFile& f, uint64_t n_tensors) {
    f.tensors_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t k = 0; k < n_tensors; ++k) {
      r.set_field("tensor #" + std::to_string(k));
      GgufTensorInfo t;
      t.name = std::string(r.read_string("tensor name"));
      r.set_field("tensor " + quote_name(t.name));
      const uint32_t n_dims = r.read<uint32_t>("n_dims");
      if (n_dims < 1 || n_dims > 4) r.fail("n_dims " + std::to_string(n_dims) + " is not in 1..4");
      t.n_dims = static_cast<int>(n_dims);
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t ne = r.read<uint64_t>("dimension");
        const std::string which = "ne[" + std::to_string(d) + "] = " + std::to_string(ne);
        if (ne == 0) r.fail(which + ": dimensions must be positive");
        if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) r.fail(which + " does not fit in int64");
        t.ne[d] = static_cast<int64_t>(ne);
      }
      const uint32_t type_id = r.read<uint32_t>("tensor type id");
      const std::optional<DType> type = dtype_from_id(type_id);
      if (!type) r.fail("unknown tensor type id " + std::to_string(type_id));
      t.type = *type;
      t.offset = r.read<uint64_t>("tensor data offset");
      t.n_bytes = checked_n_bytes(r, t);
      f.tensors_.push_back(std::move(t));
    }
    r.set_field("tensor infos");
    f.tensors_by_name_ = sorted_unique_index(
        f.tensors_.size(), [&](uint32_t i) -> std::string_view { return f.tensors_[i].name; },
        [&](uint32_t a, uint32_t b) {
          r.fail("duplicate tensor name " + quote_name(f.tensors_[a].name) + " (tensors #" + std::to_string(std::min(a, b)) +
                 " and #" + std::to_string(std::max(a, b)) + ")");
        });
  }

  // Bytes of the tensor's data, with every product checked so that later
  // n_elements()/n_bytes() arithmetic on its view cannot overflow.
  static size_t checked_n_bytes(ByteReader& r, const GgufTensorInfo& t) {
    const DTypeTraits& tr = dtype_traits(t.type);
    if (t.ne[0] % tr.block_size != 0) {
      r.fail("ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " + std::string(tr.name) +
             " block size " + std::to_string(tr.block_size));
    }
    int64_t n_elements = 1;
    for (int d = 0; d < 4; ++d) {
      if (mul_overflows<int64_t>(n_elements, t.ne[d], n_elements)) {
        r.fail("shape " + shape_string(t) + ": element count overflows int64");
      }
    }
    size_t row = 0;
    size_t n_bytes = 0;
    const auto n_blocks = static_cast<size_t>(t.ne[0] / tr.block_size);
    const auto n_rows = static_cast<size_t>(n_elements / t.ne[0]);
    if (mul_overflows<size_t>(n_blocks, tr.block_bytes, row) || mul_overflows<size_t>(row, n_rows, n_bytes)) {
      r.fail("shape " + shape_string(t) + " of " + std::string(tr.name) + ": byte size overflows size_t");
    }
    return n_bytes;
  }

  // The data section starts at the first aligned offset after the tensor infos;
  // every tensor must lie inside the file, at an aligned offset.
  static void place_data(ByteReader& r, GgufFile& f) {
    const size_t size = r.size();
    const size_t aligned = (r.pos() + f.alignment_ - 1) / f.alignment_ * f.alignment_;
    // A file without tensors (a vocabulary) may end right after its metadata.
    f.data_offset_ = f.tensors_.empty() ? std::min(aligned, size) : aligned;
    for (const GgufTensorInfo& t : f.tensors_) {
      r.set_field("tensor " + quote_name(t.name));
      if (t.offset % f.alignment_ != 0) {
        r.fail("data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
               std::to_string(f.alignment_));
      }
      const bool start_inside = f.data_offset_ <= size && t.offset <= size - f.data_offset_;
      if (!start_inside || t.n_bytes > size - f.data_offset_ - t.offset) {
        uint64_t abs_offset = 0;
        const std::string where = __builtin_add_overflow(uint64_t{f.data_offset_}, t.offset, &abs_offset)
                                      ? std::to_string(f.data_offset_) + " + " + std::to_string(t.offset)
                                      : std::to_string(abs_offset);
        r.fail("data [offset " + where + ", " + std::to_string(t.n_bytes) + " bytes] extends past end of file (size " +
               std::to_string(size) + ")");
      }
    }
  }
};

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto mapped = std::make_shared<MappedFile>(MappedFile::open(path));
  GgufFile f;
  f.name_ = path.string();
  f.bytes_ = mapped->bytes();
  f.file_ = std::move(mapped);
  GgufParser::parse(f);
  return f;
}

GgufFile GgufFile::parse(std::span<const std::byte> bytes, std::string name) {
  GgufFile f;
  f.name_ = std::move(name);
  f.bytes_ = bytes;
  GgufParser::parse(f);
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = std::lower_bound(kv_by_key_.begin(), kv_by_key_.end(), key,
                             [&](uint32_t i, std::string_view k) { return std::string_view(kv_[i].key) < k; });
  if (it == kv_by_key_.end() || kv_[*it].key != key) return nullptr;
  return &kv_[*it].value;
}

namespace {

[[noreturn]] void wrong_type(const std::string& file, std::string_view key, const GgufValue& v,
                             std::string_view expected) {
  std::string got(gguf_type_name(v.type));
  if (v.type == GgufType::ARRAY) got += " of " + std::string(gguf_type_name(v.elem_type));
  throw Error(file + ": key " + quote_name(key) + " has type " + got + ", expected " + std::string(expected));
}

}  // namespace

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_integer(v->type)) wrong_type(name_, key, *v, "an integer");
  return v->i;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == GgufType::F32 || v->type == GgufType::F64) return v->f;
  if (is_integer(v->type) && v->type != GgufType::BOOL) return static_cast<double>(v->i);
  wrong_type(name_, key, *v, "a number");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::BOOL) wrong_type(name_, key, *v, "bool");
  return v->i != 0;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::STRING) wrong_type(name_, key, *v, "string");
  return v->str;
}

const GgufValue* GgufFile::get_array(std::string_view key, GgufType elem_type) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return nullptr;
  if (v->type != GgufType::ARRAY || v->elem_type != elem_type) {
    wrong_type(name_, key, *v, "array of " + std::string(gguf_type_name(elem_type)));
  }
  return v;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = std::lower_bound(tensors_by_name_.begin(), tensors_by_name_.end(), name,
                             [&](uint32_t i, std::string_view n) { return std::string_view(tensors_[i].name) < n; });
  if (it == tensors_by_name_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

TensorView GgufFile::view(const GgufTensorInfo& info) const {
  TensorView v;
  v.type = info.type;
  v.n_dims = info.n_dims;
  v.ne = info.ne;
  // Checked at parse time: data_offset_ + offset + n_bytes <= file size.
  v.data = bytes_.data() + data_offset_ + info.offset;
  return v;
}

}  // namespace tokamak::io
