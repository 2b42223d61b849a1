// Hugging Face safetensors: a validated reader over a memory mapping.
//
// Layout: u64 little-endian N, then N bytes of a UTF-8 JSON object (may end in
// spaces), then the data section. The object maps each tensor name to
// {"dtype": "F16", "shape": [rows, cols], "data_offsets": [begin, end]} with
// offsets relative to the data section, row-major data, and an optional
// "__metadata__" object of strings. As the reference implementation requires,
// the tensors tile the data section exactly: sorted by offset, each begins
// where the previous one ends, and the last ends at the end of the file.
// Every size is checked (overflow-safe) before any data is touched; errors
// name the file, the tensor and the value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"

namespace tokamak::io {

enum class SafetensorsDType : uint8_t {
  BOOL, U8, I8, F8_E4M3, F8_E5M2, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64,
};
std::string_view safetensors_dtype_name(SafetensorsDType t);  // "F16"
size_t safetensors_dtype_size(SafetensorsDType t);              // bytes per element
std::optional<SafetensorsDType> safetensors_dtype_from_name(std::string_view name);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::F32;
  std::vector<int64_t> shape;        // outermost first (PyTorch order); empty for a scalar
  uint64_t begin = 0, end = 0;       // byte range in the data section
  std::span<const std::byte> data;   // the tensor's bytes (no alignment guaranteed)

  int64_t n_elements() const;  // product of shape (1 for a scalar)
  std::string shape_string() const;  // "[4096, 11008]"
};

class SafetensorsFile {
 public:
  // Maps and validates the whole header. Throws tokamak::Error.
  static SafetensorsFile open(const std::filesystem::path& path);
  // Parses bytes the caller keeps alive (fuzzing, tests); `name` appears in errors.
  static SafetensorsFile parse(std::span<const std::byte> bytes, std::string name);

  const std::string& name() const { return name_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in data order
  const SafetensorsTensor* find(std::string_view tensor_name) const;          // O(log n)
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string name_;
  std::shared_ptr<MappedFile> file_;  // empty when parsed from caller-owned bytes
  std::vector<SafetensorsTensor> tensors_;
  std::vector<uint32_t> by_name_;     // indices into tensors_, sorted by name
  std::map<std::string, std::string> metadata_;
};

// Converts elements [first, first + n) of a floating-point tensor (F32, F16,
// BF16, F64) to f32. Throws Error naming the tensor for another dtype or a
// range outside it.
void read_f32(const SafetensorsTensor& t, int64_t first, int64_t n, float* out);

// The tensors of a model folder: `model.safetensors.index.json` (its
// "weight_map" names each tensor's shard), else `model.safetensors`, else every
// `*.safetensors` file in the folder. Shards are opened (mapped) once each.
// A tensor listed in the index but missing from its shard, a shard path that
// leaves the folder, and a tensor name found in two shards are errors.
class SafetensorsModel {
 public:
  static SafetensorsModel open(const std::filesystem::path& dir);

  const SafetensorsTensor* find(std::string_view tensor_name) const;
  std::vector<std::string> names() const;  // sorted
  size_t n_shards() const { return shards_.size(); }

 private:
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> tensors_;
};

}  // namespace tokamak::io
