// GgufWriter: files written by llama.cpp come back byte-identical through
// reader -> writer, and every value type / several tensor types round-trip.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "common/test_data.h"
#include "core/error.h"
#include "io/gguf.h"

namespace tokamak::io {
namespace {

using tokamak::testing::test_data;
using Bytes = std::vector<std::byte>;

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  Bytes b(c.size());
  if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
  return b;
}

GgufWriter copy_of(const GgufFile& f) {
  GgufWriter w;
  for (const GgufKeyValue& kv : f.metadata()) w.set(kv.key, kv.value);
  for (const GgufTensorInfo& t : f.tensors()) {
    const TensorView v = f.view(t);
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), {v.data, v.n_bytes()});
  }
  return w;
}

// The files of ../shared were written by llama.cpp / gguf-py; reading one and
// writing it back must give the same bytes (same layout rules, same padding).
TEST(GgufWriter, RewritesSharedFilesByteIdentical) {
  int n_files = 0;
  for (const std::string dir : {"models/stories260K", "models/llama-2-tiny-random", "fixtures/models", "fixtures/quant",
                                "models/llama.cpp-vocab"}) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(test_data(dir))) {
      if (e.path().extension() != ".gguf") continue;
      SCOPED_TRACE(e.path().string());
      const Bytes original = read_file(e.path());
      const GgufFile f = GgufFile::parse(original, e.path().string());
      const Bytes rewritten = copy_of(f).to_bytes();
      ASSERT_EQ(rewritten.size(), original.size());
      EXPECT_TRUE(rewritten == original);
      ++n_files;
    }
  }
  EXPECT_EQ(n_files, 42);
}

GgufValue scalar_int(GgufType t, int64_t i) {
  GgufValue v;
  v.type = t;
  v.i = i;
  return v;
}

GgufValue scalar_float(GgufType t, double f) {
  GgufValue v;
  v.type = t;
  v.f = f;
  return v;
}

GgufValue int_array(GgufType elem, std::vector<int64_t> xs) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = elem;
  v.ints = std::move(xs);
  return v;
}

GgufValue float_array(GgufType elem, std::vector<double> xs) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = elem;
  v.floats = std::move(xs);
  return v;
}

// Every value type, at its limits.
std::vector<GgufKeyValue> all_value_types() {
  constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
  constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
  std::vector<GgufKeyValue> kv = {
      {"t.u8", scalar_int(GgufType::U8, 255)},
      {"t.i8", scalar_int(GgufType::I8, -128)},
      {"t.u16", scalar_int(GgufType::U16, 65535)},
      {"t.i16", scalar_int(GgufType::I16, -32768)},
      {"t.u32", scalar_int(GgufType::U32, 4294967295)},
      {"t.i32", scalar_int(GgufType::I32, -2147483648)},
      {"t.u64", scalar_int(GgufType::U64, kI64Max)},
      {"t.i64", scalar_int(GgufType::I64, kI64Min)},
      {"t.bool", scalar_int(GgufType::BOOL, 1)},
      {"t.f32", scalar_float(GgufType::F32, -1.5e-7f)},
      {"t.f64", scalar_float(GgufType::F64, 3.141592653589793)},
      {"a.u8", int_array(GgufType::U8, {0, 1, 255})},
      {"a.i8", int_array(GgufType::I8, {-128, 0, 127})},
      {"a.u16", int_array(GgufType::U16, {0, 65535})},
      {"a.i16", int_array(GgufType::I16, {-32768, 32767})},
      {"a.u32", int_array(GgufType::U32, {0, 4294967295})},
      {"a.i32", int_array(GgufType::I32, {-2147483648, 2147483647})},
      {"a.u64", int_array(GgufType::U64, {0, kI64Max})},
      {"a.i64", int_array(GgufType::I64, {kI64Min, kI64Max})},
      {"a.bool", int_array(GgufType::BOOL, {1, 0, 1})},
      {"a.f32", float_array(GgufType::F32, {0.5, -2.0, std::numeric_limits<float>::infinity()})},
      {"a.f64", float_array(GgufType::F64, {1e300, -1e-300})},
      {"a.empty", int_array(GgufType::I32, {})},
  };
  GgufValue str;
  str.type = GgufType::STRING;
  str.str = std::string("with\0nul and \xe2\x96\x81utf8", 20);
  kv.push_back({"t.string", str});
  GgufValue empty_str;
  empty_str.type = GgufType::STRING;
  kv.push_back({"t.empty_string", empty_str});
  GgufValue strs;
  strs.type = GgufType::ARRAY;
  strs.elem_type = GgufType::STRING;
  strs.strings = {"", "a", std::string(1000, 'x'), "<0x0A>"};
  kv.push_back({"a.string", strs});
  return kv;
}

Bytes pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (std::byte& x : b) x = static_cast<std::byte>(rng());
  return b;
}

struct TensorCase {
  std::string name;
  DType type;
  std::vector<int64_t> ne;
};

const std::vector<TensorCase> kTensorCases = {
    {"f32.1d", DType::F32, {3}},
    {"f16.2d", DType::F16, {4, 2}},
    {"bf16.3d", DType::BF16, {2, 2, 2}},
    {"q8_0", DType::Q8_0, {64, 3}},
    {"q4_0.4d", DType::Q4_0, {32, 1, 2, 2}},
    {"q4_K", DType::Q4_K, {256, 2}},
    {"q6_K", DType::Q6_K, {512, 1}},
    {"i32", DType::I32, {5}},
};

size_t n_bytes_of(const TensorCase& c) {
  size_t rows = 1;
  for (size_t d = 1; d < c.ne.size(); ++d) rows *= static_cast<size_t>(c.ne[d]);
  return row_bytes(c.type, c.ne[0]) * rows;
}

void check_round_trip(size_t alignment) {
  SCOPED_TRACE("alignment " + std::to_string(alignment));
  GgufWriter w;
  const std::vector<GgufKeyValue> kv = all_value_types();
  if (alignment != 32) w.set_u32("general.alignment", static_cast<uint32_t>(alignment));
  for (const GgufKeyValue& e : kv) w.set(e.key, e.value);
  std::vector<Bytes> data;
  for (size_t k = 0; k < kTensorCases.size(); ++k) {
    data.push_back(pattern(n_bytes_of(kTensorCases[k]), static_cast<uint32_t>(k)));
    w.add_tensor(kTensorCases[k].name, kTensorCases[k].type, kTensorCases[k].ne, data.back());
  }
  const Bytes bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "round-trip.gguf");

  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  ASSERT_EQ(f.metadata().size(), kv.size() + (alignment != 32 ? 1 : 0));
  for (const GgufKeyValue& e : kv) {
    SCOPED_TRACE(e.key);
    const GgufValue* v = f.find(e.key);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->type, e.value.type);
    EXPECT_EQ(v->i, e.value.i);
    if (e.value.type == GgufType::F32) {
      EXPECT_EQ(v->f, static_cast<float>(e.value.f));
    } else {
      EXPECT_EQ(v->f, e.value.f);
    }
    EXPECT_EQ(v->str, e.value.str);
    if (e.value.type == GgufType::ARRAY) {
      EXPECT_EQ(v->elem_type, e.value.elem_type);
      EXPECT_EQ(v->array_size(), e.value.array_size());
    }
    EXPECT_EQ(v->ints, e.value.ints);
    EXPECT_EQ(v->floats, e.value.floats);  // the f32 test values are exact in float
    EXPECT_EQ(v->strings, e.value.strings);
  }
  EXPECT_EQ(f.get_string("t.string")->size(), 20u);
  EXPECT_EQ(f.get_int("t.u32"), 4294967295);
  EXPECT_EQ(f.get_bool("t.bool"), true);

  ASSERT_EQ(f.tensors().size(), kTensorCases.size());
  for (size_t k = 0; k < kTensorCases.size(); ++k) {
    const TensorCase& c = kTensorCases[k];
    SCOPED_TRACE(c.name);
    const GgufTensorInfo& t = f.tensors()[k];  // insertion order is kept
    EXPECT_EQ(t.name, c.name);
    EXPECT_EQ(t.type, c.type);
    ASSERT_EQ(t.n_dims, static_cast<int>(c.ne.size()));
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < c.ne.size() ? c.ne[d] : 1);
    EXPECT_EQ(t.offset % alignment, 0u);
    ASSERT_EQ(t.n_bytes, data[k].size());
    const TensorView v = f.view(t);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % alignment, reinterpret_cast<uintptr_t>(bytes.data()) % alignment);
    EXPECT_EQ(std::memcmp(v.data, data[k].data(), t.n_bytes), 0);
  }
}

TEST(GgufWriter, EveryValueTypeAndSeveralTensorTypesRoundTrip) {
  check_round_trip(32);
  check_round_trip(64);
  check_round_trip(4096);
  check_round_trip(1);
}

TEST(GgufWriter, WriteToFileThenOpen) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_i32("x.i32", -5);
  w.set_u64("x.u64", 1ull << 40);
  w.set_f32("x.f32", 0.25f);
  w.set_bool("x.bool", false);
  w.set_string_array("x.strings", {"a", "bb"});
  w.set_f32_array("x.floats", {1.5f, -0.5f});
  w.set_i32_array("x.ints", {-1, 7});
  w.set_u32("llama.block_count", 3);  // replaces, keeps its place
  const Bytes q8 = pattern(row_bytes(DType::Q8_0, 64) * 2, 7);
  w.add_tensor("w", DType::Q8_0, {64, 2}, q8);
  const auto path = std::filesystem::temp_directory_path() / ("tokamak_gguf_writer_" + std::to_string(::getpid()) + ".gguf");
  w.write(path);
  const Bytes on_disk = read_file(path);
  {
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.metadata().size(), 9u);
    EXPECT_EQ(f.metadata()[1].key, "llama.block_count");
    EXPECT_EQ(f.get_int("llama.block_count"), 3);
    EXPECT_EQ(f.get_int("x.i32"), -5);
    EXPECT_EQ(f.get_int("x.u64"), int64_t{1} << 40);
    EXPECT_EQ(f.get_float("x.f32"), 0.25);
    EXPECT_EQ(f.get_bool("x.bool"), false);
    EXPECT_EQ(f.get_array("x.strings", GgufType::STRING)->strings, (std::vector<std::string>{"a", "bb"}));
    EXPECT_EQ(f.get_array("x.floats", GgufType::F32)->floats, (std::vector<double>{1.5, -0.5}));
    EXPECT_EQ(f.get_array("x.ints", GgufType::I32)->ints, (std::vector<int64_t>{-1, 7}));
    EXPECT_EQ(std::memcmp(f.view(f.tensors()[0]).data, q8.data(), q8.size()), 0);
  }
  std::filesystem::remove(path);
  EXPECT_TRUE(on_disk == w.to_bytes());
  EXPECT_THROW(w.write("/nonexistent-dir/x.gguf"), Error);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  const Bytes d = pattern(64, 1);
  EXPECT_NE(error_of([&] { w.add_tensor("t", DType::F32, {15}, d); }).find("64 bytes"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor("t", DType::Q8_0, {16}, d); }).find("block size 32"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor("t", DType::F32, {}, d); }).find("n_dims 0"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor("t", DType::F32, {4, 1, 1, 1, 4}, d); }).find("n_dims 5"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor("t", DType::F32, {16, 0}, d); }).find("ne[1] = 0"), std::string::npos);
  w.add_tensor("t", DType::F32, {16}, d);
  EXPECT_NE(error_of([&] { w.add_tensor("t", DType::F32, {16}, d); }).find("'t': added twice"), std::string::npos);

  GgufValue nested;
  nested.type = GgufType::ARRAY;
  nested.elem_type = GgufType::ARRAY;
  EXPECT_NE(error_of([&] { w.set("n", nested); }).find("'n': nested arrays"), std::string::npos);
  EXPECT_THROW(w.set_u64("big", ~uint64_t{0}), Error);
  w.set("u8", scalar_int(GgufType::U8, 300));
  EXPECT_NE(error_of([&] { (void)w.to_bytes(); }).find("'u8': value 300 does not fit u8"), std::string::npos);

  GgufWriter a;
  a.set_u32("general.alignment", 48);
  EXPECT_NE(error_of([&] { (void)a.to_bytes(); }).find("general.alignment"), std::string::npos);
}

// Declared tensors are produced while the file is written; the file equals
// the one built from the same bytes in memory.
TEST(GgufWriter, StreamedTensorsEqualInMemoryOnes) {
  const Bytes a = pattern(row_bytes(DType::Q4_0, 64) * 3, 3);
  const Bytes b = pattern(row_bytes(DType::F32, 5), 4);  // 20 bytes: padding follows
  const Bytes c = pattern(row_bytes(DType::Q8_0, 32) * 2, 5);
  GgufWriter memory;
  GgufWriter streamed;
  for (GgufWriter* w : {&memory, &streamed}) {
    w->set_string("general.architecture", "llama");
    w->set_u32("general.file_type", 2);
    w->set_u32("general.quantization_version", 1);
  }
  memory.add_tensor("a", DType::Q4_0, {64, 3}, a);
  memory.add_tensor("b", DType::F32, {5}, b);
  memory.add_tensor("c", DType::Q8_0, {32, 2}, c);
  streamed.declare_tensor("a", DType::Q4_0, {64, 3});
  streamed.add_tensor("b", DType::F32, {5}, b);  // mixed: this one carries its bytes
  streamed.declare_tensor("c", DType::Q8_0, {32, 2});
  EXPECT_EQ(streamed.n_tensors(), 3u);
  EXPECT_EQ(streamed.data_bytes(), 128u + 32u + 96u);  // 108, 20 and 68 bytes, each padded to 32
  EXPECT_THROW((void)streamed.to_bytes(), Error);  // declared data is not in memory

  const auto path = std::filesystem::temp_directory_path() / ("tokamak_gguf_stream_" + std::to_string(::getpid()) + ".gguf");
  std::vector<size_t> asked;
  streamed.write(path, [&](size_t index, std::span<std::byte> out) {
    asked.push_back(index);
    const Bytes& src = index == 0 ? a : c;
    ASSERT_EQ(out.size(), src.size());
    std::memcpy(out.data(), src.data(), src.size());
  });
  EXPECT_EQ(asked, (std::vector<size_t>{0, 2}));
  EXPECT_TRUE(read_file(path) == memory.to_bytes());
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".part"));
  std::filesystem::remove(path);
}

// A fill that throws leaves neither the output nor the partial file, and an
// existing file at the path is kept.
TEST(GgufWriter, FailedStreamLeavesNoFile) {
  const auto path = std::filesystem::temp_directory_path() / ("tokamak_gguf_fail_" + std::to_string(::getpid()) + ".gguf");
  GgufWriter w;
  w.declare_tensor("a", DType::F32, {8});
  EXPECT_THROW(w.write(path, [](size_t, std::span<std::byte>) { throw Error("boom"); }), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".part"));
  { std::ofstream(path) << "keep"; }
  EXPECT_THROW(w.write(path, [](size_t, std::span<std::byte>) { throw Error("boom"); }), Error);
  EXPECT_EQ(std::filesystem::file_size(path), 4u);
  EXPECT_THROW(w.write(path), Error);  // without a fill, declared tensors have no bytes
  std::filesystem::remove(path);
}

// remove() drops a key; set() then appends it at the end (llama-quantize's order).
TEST(GgufWriter, RemoveThenSetMovesKeyToEnd) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_u32("general.file_type", 0);
  w.set_u32("b", 2);
  w.remove("general.file_type");
  w.remove("absent");
  w.set_u32("general.file_type", 7);
  const Bytes bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "mem");
  ASSERT_EQ(f.metadata().size(), 3u);
  EXPECT_EQ(f.metadata()[1].key, "b");
  EXPECT_EQ(f.metadata()[2].key, "general.file_type");
  EXPECT_EQ(f.get_int("general.file_type"), 7);
}

// Vocabularies of 100k+ strings must parse quickly (one allocation per string).
TEST(GgufWriter, LargeVocabularyParsesQuickly) {
  std::vector<std::string> vocab(200000);
  for (size_t i = 0; i < vocab.size(); ++i) vocab[i] = "tok" + std::to_string(i * 7919);
  GgufWriter w;
  w.set_string_array("tokenizer.ggml.tokens", vocab);
  w.set_f32_array("tokenizer.ggml.scores", std::vector<float>(vocab.size(), -1.0f));
  const Bytes bytes = w.to_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  const GgufFile f = GgufFile::parse(bytes, "vocab.gguf");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens", GgufType::STRING)->strings, vocab);
  // ~10 ms in a release build; the bound leaves room for sanitizers and a busy machine.
  EXPECT_LT(ms, 2000.0);
  std::printf("parsed 200000 strings + 200000 floats in %.1f ms\n", ms);
}

}  // namespace
}  // namespace tokamak::io
