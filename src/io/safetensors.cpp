#include "io/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/half.h"

namespace tokamak::io {
namespace {

using json = nlohmann::json;

// The reference implementation's limit: larger headers are rejected before parsing.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kMaxDims = 8;

struct DTypeInfo {
  SafetensorsDType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 15> kDTypes{{
    {SafetensorsDType::BOOL, "BOOL", 1},       {SafetensorsDType::U8, "U8", 1},
    {SafetensorsDType::I8, "I8", 1},           {SafetensorsDType::F8_E4M3, "F8_E4M3", 1},
    {SafetensorsDType::F8_E5M2, "F8_E5M2", 1}, {SafetensorsDType::U16, "U16", 2},
    {SafetensorsDType::I16, "I16", 2},         {SafetensorsDType::F16, "F16", 2},
    {SafetensorsDType::BF16, "BF16", 2},       {SafetensorsDType::U32, "U32", 4},
    {SafetensorsDType::I32, "I32", 4},         {SafetensorsDType::F32, "F32", 4},
    {SafetensorsDType::U64, "U64", 8},         {SafetensorsDType::I64, "I64", 8},
    {SafetensorsDType::F64, "F64", 8},
}};

// A JSON value for an error message, cut short if long.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 61) + "..." : s;
}

// The header JSON with its structure checked while parsing: no duplicate key
// in any object (the last one would silently win), and nothing nested deeper
// than a tensor's shape array.
json parse_header(std::string_view text, const std::string& file) {
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  std::string problem;
  const auto check = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= 3) {
          problem = "values nest deeper than a tensor's shape";
          throw Error(problem);
        }
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second) {
          problem = "duplicate key " + shown(parsed);
          throw Error(problem);
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const Error&) {
    throw Error(file + ": header: " + problem);
  } catch (const json::exception& e) {
    throw Error(file + ": header is not valid JSON: " + e.what());
  }
}

uint64_t offset_value(const json& v, const std::string& where) {
  if (!v.is_number_unsigned()) throw Error(where + " = " + shown(v) + " is not a non-negative integer");
  return v.get<uint64_t>();
}

SafetensorsTensor parse_tensor(const std::string& name, const json& entry, const std::string& file) {
  const std::string where = file + ": tensor '" + name + "'";
  if (!entry.is_object()) throw Error(where + ": entry " + shown(entry) + " is not an object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") throw Error(where + ": unknown field '" + key + "'");
  }
  if (!entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
    throw Error(where + ": needs dtype, shape and data_offsets");
  }
  SafetensorsTensor t;
  t.name = name;
  const json& dtype = entry["dtype"];
  const std::optional<SafetensorsDType> dt =
      dtype.is_string() ? safetensors_dtype_from_name(dtype.get<std::string>()) : std::nullopt;
  if (!dt) throw Error(where + ": dtype " + shown(dtype) + " is not a safetensors dtype");
  t.dtype = *dt;

  const json& shape = entry["shape"];
  if (!shape.is_array() || shape.size() > kMaxDims) {
    throw Error(where + ": shape " + shown(shape) + " is not an array of at most " + std::to_string(kMaxDims) +
                " sizes");
  }
  uint64_t n_bytes = safetensors_dtype_size(t.dtype);
  for (size_t d = 0; d < shape.size(); ++d) {
    const uint64_t n = offset_value(shape[d], where + ": shape[" + std::to_string(d) + "]");
    if (n > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(n_bytes, n, &n_bytes)) {
      throw Error(where + ": shape " + shown(shape) + " overflows");
    }
    t.shape.push_back(static_cast<int64_t>(n));
  }

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    throw Error(where + ": data_offsets " + shown(offsets) + " is not [begin, end]");
  }
  t.begin = offset_value(offsets[0], where + ": data_offsets[0]");
  t.end = offset_value(offsets[1], where + ": data_offsets[1]");
  if (t.end < t.begin) throw Error(where + ": data_offsets " + shown(offsets) + " end before they begin");
  if (t.end - t.begin != n_bytes) {
    throw Error(where + ": data_offsets " + shown(offsets) + " hold " + std::to_string(t.end - t.begin) +
                " bytes, but dtype " + std::string(safetensors_dtype_name(t.dtype)) + " x shape " + t.shape_string() +
                " needs " + std::to_string(n_bytes));
  }
  return t;
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDType t) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.type == t) return d.name;
  }
  return "?";
}

size_t safetensors_dtype_size(SafetensorsDType t) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.type == t) return d.size;
  }
  return 0;
}

std::optional<SafetensorsDType> safetensors_dtype_from_name(std::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.name == name) return d.type;
  }
  return std::nullopt;
}

int64_t SafetensorsTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // bounded by the byte size checked at parse time
  return n;
}

std::string SafetensorsTensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes, std::string name) {
  SafetensorsFile f;
  f.name_ = std::move(name);
  const std::string& file = f.name_;
  if (bytes.size() < 8) {
    throw Error(file + ": " + std::to_string(bytes.size()) + " bytes is too short for the 8-byte header length");
  }
  uint64_t n_header = 0;
  for (int i = 7; i >= 0; --i) n_header = n_header << 8 | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (n_header > kMaxHeaderBytes) {
    throw Error(file + ": header length " + std::to_string(n_header) + " exceeds the limit of " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (n_header > bytes.size() - 8) {
    throw Error(file + ": header length " + std::to_string(n_header) + " runs past the end of the file (" +
                std::to_string(bytes.size()) + " bytes)");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<size_t>(n_header));
  if (text.empty() || text.front() != '{') throw Error(file + ": header does not start with '{'");
  // The JSON parser would stop at a NUL as at the end of a C string; JSON text has none.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error(file + ": header has a NUL byte at offset " + std::to_string(8 + nul));
  }
  const json header = parse_header(text, file);
  if (!header.is_object()) throw Error(file + ": header is not a JSON object");

  const std::span<const std::byte> data = bytes.subspan(8 + static_cast<size_t>(n_header));
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw Error(file + ": __metadata__ " + shown(value) + " is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) throw Error(file + ": __metadata__ '" + mk + "' = " + shown(mv) + " is not a string");
        f.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    f.tensors_.push_back(parse_tensor(key, value, file));
  }

  // The tensors must tile the data section: sorted by offset, no gap, no overlap.
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (SafetensorsTensor& t : f.tensors_) {
    if (t.begin != expected) {
      throw Error(file + ": tensor '" + t.name + "' data_offsets [" + std::to_string(t.begin) + ", " +
                  std::to_string(t.end) + "] " + (t.begin < expected ? "overlap the previous tensor" : "leave a gap") +
                  " (expected to begin at " + std::to_string(expected) + ")");
    }
    if (t.end > data.size()) {
      throw Error(file + ": tensor '" + t.name + "' data_offsets end " + std::to_string(t.end) +
                  " is past the data section (" + std::to_string(data.size()) + " bytes)");
    }
    t.data = data.subspan(static_cast<size_t>(t.begin), static_cast<size_t>(t.end - t.begin));
    expected = t.end;
  }
  if (expected != data.size()) {
    throw Error(file + ": the tensors cover " + std::to_string(expected) + " bytes of a " +
                std::to_string(data.size()) + "-byte data section");
  }
  f.by_name_.resize(f.tensors_.size());
  for (size_t i = 0; i < f.by_name_.size(); ++i) f.by_name_[i] = static_cast<uint32_t>(i);
  std::sort(f.by_name_.begin(), f.by_name_.end(),
            [&](uint32_t a, uint32_t b) { return f.tensors_[a].name < f.tensors_[b].name; });
  return f;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto mapped = std::make_shared<MappedFile>(MappedFile::open(path));
  SafetensorsFile f = parse(mapped->bytes(), path.string());
  f.file_ = std::move(mapped);
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view tensor_name) const {
  const auto it = std::lower_bound(by_name_.begin(), by_name_.end(), tensor_name,
                                   [&](uint32_t i, std::string_view n) { return tensors_[i].name < n; });
  return it != by_name_.end() && tensors_[*it].name == tensor_name ? &tensors_[*it] : nullptr;
}

void read_f32(const SafetensorsTensor& t, int64_t first, int64_t n, float* out) {
  if (first < 0 || n < 0 || first > t.n_elements() - n) {
    throw Error("safetensors: tensor '" + t.name + "': elements [" + std::to_string(first) + ", " +
                std::to_string(first) + " + " + std::to_string(n) + ") are outside its " +
                std::to_string(t.n_elements()));
  }
  const std::byte* src = t.data.data() + static_cast<size_t>(first) * safetensors_dtype_size(t.dtype);
  const auto count = static_cast<size_t>(n);
  switch (t.dtype) {
    case SafetensorsDType::F32:
      if (count > 0) std::memcpy(out, src, count * sizeof(float));
      return;
    case SafetensorsDType::F16:
    case SafetensorsDType::BF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = t.dtype == SafetensorsDType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      return;
    case SafetensorsDType::F64:
      for (size_t i = 0; i < count; ++i) {
        double d;
        std::memcpy(&d, src + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return;
    default:
      throw Error("safetensors: tensor '" + t.name + "' has dtype " + std::string(safetensors_dtype_name(t.dtype)) +
                  ", not a floating-point type (F32, F16, BF16, F64)");
  }
}

namespace {

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error(path.string() + ": not valid JSON: " + e.what());
  }
}

// A shard name from the index must be a plain file name inside the folder.
void check_shard_name(const std::string& shard, const std::filesystem::path& index) {
  const std::filesystem::path p(shard);
  if (shard.empty() || p.is_absolute() || p.has_parent_path() || shard == "." || shard == "..") {
    throw Error(index.string() + ": weight_map names shard '" + shard + "', which is not a file name in the folder");
  }
}

}  // namespace

SafetensorsModel SafetensorsModel::open(const std::filesystem::path& dir) {
  SafetensorsModel m;
  const std::filesystem::path index_path = dir / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // tensor -> shard, from the index
  std::vector<std::string> shard_names;
  if (std::filesystem::exists(index_path)) {
    const json index = read_json_file(index_path);
    const json* wm = index.is_object() && index.contains("weight_map") ? &index["weight_map"] : nullptr;
    if (wm == nullptr || !wm->is_object() || wm->empty()) {
      throw Error(index_path.string() + ": no weight_map object with tensors in it");
    }
    for (const auto& [tensor, shard] : wm->items()) {
      if (!shard.is_string()) {
        throw Error(index_path.string() + ": weight_map '" + tensor + "' = " + shown(shard) + " is not a file name");
      }
      const std::string s = shard.get<std::string>();
      check_shard_name(s, index_path);
      weight_map[tensor] = s;
      if (std::find(shard_names.begin(), shard_names.end(), s) == shard_names.end()) shard_names.push_back(s);
    }
  } else if (std::filesystem::exists(dir / "model.safetensors")) {
    shard_names.push_back("model.safetensors");
  } else {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors") shard_names.push_back(e.path().filename().string());
    }
    if (ec) throw Error(dir.string() + ": cannot list the folder: " + ec.message());
    if (shard_names.empty()) throw Error(dir.string() + ": no model.safetensors, index or *.safetensors file");
  }
  std::sort(shard_names.begin(), shard_names.end());

  // The files are opened first and indexed after: pointers into a file's tensor
  // list stay valid when the SafetensorsFile (or this model) is moved.
  m.shards_.reserve(shard_names.size());
  for (const std::string& s : shard_names) m.shards_.push_back(SafetensorsFile::open(dir / s));
  for (size_t i = 0; i < m.shards_.size(); ++i) {
    const SafetensorsFile& shard = m.shards_[i];
    for (const SafetensorsTensor& t : shard.tensors()) {
      if (!weight_map.empty()) {
        const auto it = weight_map.find(t.name);
        if (it == weight_map.end() || it->second != shard_names[i]) continue;  // the index decides
      }
      if (!m.tensors_.emplace(t.name, &t).second) {
        throw Error(shard.name() + ": tensor '" + t.name + "' is also in another shard");
      }
    }
  }
  for (const auto& [tensor, shard] : weight_map) {
    if (m.tensors_.find(tensor) == m.tensors_.end()) {
      throw Error(index_path.string() + ": tensor '" + tensor + "' is not in its shard " + shard);
    }
  }
  return m;
}

const SafetensorsTensor* SafetensorsModel::find(std::string_view tensor_name) const {
  const auto it = tensors_.find(tensor_name);
  return it == tensors_.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

}  // namespace tokamak::io
