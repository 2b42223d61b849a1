// GGUF v2/v3: reader over a memory mapping, and a writer.
// Layout (little-endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
// then n_kv (key, type, value), then n_tensors (name, n_dims, ne[n_dims],
// u32 type, u64 offset), padding to general.alignment (default 32), data.
// Every count, length and offset is checked against the file size before it is
// used; errors name the file, the field and the value.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/tensor.h"
#include "io/output_file.h"

namespace tokamak::io {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value. Scalars are stored widened; arrays keep their element type.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elem_type = GgufType::U8;  // for ARRAY
  int64_t i = 0;       // integer and bool scalars (U64 above INT64_MAX is rejected by the reader)
  double f = 0.0;      // F32 / F64 scalars
  std::string str;     // STRING
  // ARRAY: exactly one of these is filled, by element type. Nested arrays are rejected.
  std::vector<int64_t> ints;         // integer/bool elements
  std::vector<double> floats;        // F32/F64 elements
  std::vector<std::string> strings;  // STRING elements
  size_t array_size() const;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  uint64_t offset = 0;  // relative to the start of the data section
  size_t n_bytes = 0;
};

class GgufFile {
 public:
  // Maps (or copies, see MapMode) the file and validates the whole header.
  // Throws tokamak::Error.
  static GgufFile open(const std::filesystem::path& path, MapMode mode = MapMode::kMapped);
  // Parses bytes the caller keeps alive (fuzzing, tests); `name` appears in errors.
  static GgufFile parse(std::span<const std::byte> bytes, std::string name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  // Start of the data section (aligned). A file without tensors may end before
  // it; then this is the file size.
  size_t data_offset() const { return data_offset_; }

  const std::vector<GgufKeyValue>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  // Typed getters: nullopt when the key is absent; tokamak::Error naming the
  // key and the actual type when present with an incompatible type.
  std::optional<int64_t> get_int(std::string_view key) const;     // any integer type or bool
  std::optional<double> get_float(std::string_view key) const;    // F32/F64 (or an integer)
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  const GgufValue* get_array(std::string_view key, GgufType elem_type) const;  // error if elem type differs

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // A view into the mapped data (valid as long as this GgufFile lives).
  TensorView view(const GgufTensorInfo& info) const;
  // Calls edit with the file's bytes, writable, when they are a private copy
  // (MapMode::kHugePageCopy); with an empty span when mapped or parsed from
  // caller-owned bytes (MappedFile::rewrite).
  void rewrite(const std::function<void(std::span<std::byte>)>& edit) {
    if (file_) {
      file_->rewrite(edit);
    } else {
      edit({});
    }
  }

 private:
  friend class GgufParser;
  std::string name_;
  std::shared_ptr<MappedFile> file_;  // empty when parsed from caller-owned bytes
  std::span<const std::byte> bytes_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<GgufKeyValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  // Indices into kv_ / tensors_ sorted by key / name: duplicate checks at parse
  // time and O(log n) lookups without a second copy of the strings.
  std::vector<uint32_t> kv_by_key_;
  std::vector<uint32_t> tensors_by_name_;
};

// Builds a GGUF file in memory and writes it (v3). Keys and tensors keep the
// order they were added in; tensor data is aligned to `alignment`.
// Tensors either carry their bytes (add_tensor) or are declared without them
// (declare_tensor) and produced while the file is written (write with a
// TensorFill): then memory holds one tensor at a time, not the whole model.
class GgufWriter {
 public:
  // Produces the bytes of the declared tensor `index` (its position among all
  // tensors, in the order added) into `out`, which has exactly its size.
  using TensorFill = std::function<void(size_t index, std::span<std::byte> out)>;

  void set(std::string key, GgufValue value);  // replaces an existing key in place
  // Removes a key if present; a later set() appends it at the end (llama-quantize
  // moves general.file_type to the end this way).
  void remove(std::string_view key);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_f32_array(std::string key, std::vector<float> v);
  void set_i32_array(std::string key, std::vector<int32_t> v);
  // Copies `data` (must be row_bytes(type, ne[0]) * rows bytes).
  void add_tensor(std::string name, DType type, std::vector<int64_t> ne, std::span<const std::byte> data);
  // A tensor whose bytes (row_bytes(type, ne[0]) * rows) come from the TensorFill at write time.
  void declare_tensor(std::string name, DType type, std::vector<int64_t> ne);
  size_t n_tensors() const { return tensors_.size(); }
  // Bytes of the tensor data section (with alignment padding): the file size minus the header.
  size_t data_bytes() const;

  // Both need every tensor's bytes: throw tokamak::Error if one was only declared.
  std::vector<std::byte> to_bytes() const;
  void write(const std::filesystem::path& path) const;
  // Writes `path` through an OutputFile (it appears only when complete), calling
  // fill() for each declared tensor in order; on any error (fill may throw) the
  // partial file is removed and the error rethrown. Buffer memory: the largest
  // declared tensor.
  void write(const std::filesystem::path& path, const TensorFill& fill) const;
  // The same bytes to `out`, without committing it: the caller commits.
  void write(OutputFile& out, const TensorFill& fill) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    size_t n_bytes = 0;
    bool declared = false;        // bytes come from a TensorFill
    std::vector<std::byte> data;  // empty when declared
  };
  // Checks name, shape and block divisibility; returns the tensor's byte size.
  size_t check_new_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne) const;
  // Header, metadata, tensor infos and the padding up to the data section.
  std::vector<std::byte> header_bytes() const;

  std::vector<GgufKeyValue> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace tokamak::io
