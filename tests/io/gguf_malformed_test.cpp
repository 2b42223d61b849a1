// Malformed GGUF corpus, generated from valid files: each case must throw a
// tokamak::Error whose message names the file and the offending field/value,
// and never crash (this test is meant to run under ASan+UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "common/test_data.h"
#include "core/error.h"
#include "io/gguf.h"

namespace tokamak::io {
namespace {

using Bytes = std::vector<std::byte>;
constexpr uint64_t k2p60 = uint64_t{1} << 60;

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  Bytes b(c.size());
  if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
  return b;
}

// Parses a copy of `bytes` in an exactly-sized heap buffer (so ASan sees any
// overread); touches every tensor view when it parses. Returns the error
// message, or "" when the bytes parsed.
std::string try_parse(const Bytes& bytes, const std::string& name = "bad.gguf") {
  auto buf = std::make_unique<std::byte[]>(bytes.size());
  if (!bytes.empty()) std::memcpy(buf.get(), bytes.data(), bytes.size());
  try {
    const GgufFile f = GgufFile::parse({buf.get(), bytes.size()}, name);
    volatile unsigned sink = 0;  // reads the first and last byte of every tensor
    for (const GgufTensorInfo& t : f.tensors()) {
      const TensorView v = f.view(t);
      sink = sink + static_cast<unsigned>(v.data[0]) + static_cast<unsigned>(v.data[v.n_bytes() - 1]);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The message of the error `bytes` must give; a parse without error fails the test.
std::string parse_error(const Bytes& bytes, const std::string& name = "bad.gguf") {
  std::string msg = try_parse(bytes, name);
  if (msg.empty()) ADD_FAILURE() << "parsed without error";
  return msg;
}

Bytes truncated(const Bytes& b, size_t n) { return Bytes(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n)); }

// Emits GGUF fields one by one, valid or not.
struct Raw {
  Bytes b;
  template <class T>
  Raw& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& str(std::string_view s) {
    u64(s.size());
    for (char c : s) b.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Raw& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b.insert(b.end(), {std::byte{'G'}, std::byte{'G'}, std::byte{'U'}, std::byte{'F'}});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  Raw& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    return u32(type).u64(offset);
  }
  Raw& pad(size_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment);
    return *this;
  }
  Raw& zeros(size_t n) {
    b.resize(b.size() + n);
    return *this;
  }
};

// A valid file made by the writer: every value type and several tensor types.
Bytes writer_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("general.alignment", 64);
  w.set_u32("u32", 7);
  w.set_i32("i32", -7);
  w.set_u64("u64", 1ull << 40);
  w.set_f32("f32", 0.5f);
  w.set_bool("bool", true);
  w.set_string_array("strings", {"<unk>", "<s>", "", "hello"});
  w.set_f32_array("floats", {0.0f, -1.0f, 2.5f});
  w.set_i32_array("ints", {1, 2, 3});
  for (GgufType t : {GgufType::U8, GgufType::I8, GgufType::U16, GgufType::I16, GgufType::I64, GgufType::F64}) {
    GgufValue v;
    v.type = t;
    v.i = t == GgufType::F64 ? 0 : 3;
    v.f = 1.25;
    w.set("s." + std::string(gguf_type_name(t)), v);
    GgufValue a;
    a.type = GgufType::ARRAY;
    a.elem_type = t;
    a.ints = {1, 2};
    a.floats = {1.0, 2.0};
    if (t == GgufType::F64) a.ints.clear(); else a.floats.clear();
    w.set("a." + std::string(gguf_type_name(t)), a);
  }
  auto bytes_of = [](size_t n) { return Bytes(n, std::byte{0x3c}); };
  w.add_tensor("tok_embd", DType::F32, {8, 4}, bytes_of(8 * 4 * 4));
  w.add_tensor("norm", DType::F16, {8}, bytes_of(16));
  w.add_tensor("wq", DType::Q8_0, {32, 2}, bytes_of(2 * 34));
  w.add_tensor("wk", DType::Q4_K, {256, 1, 1, 2}, bytes_of(2 * 144));
  return w.to_bytes();
}

bool contains(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

#define EXPECT_ERROR(bytes, ...)                                                      \
  do {                                                                              \
    const std::string msg_ = parse_error(bytes);                                    \
    for (const char* part_ : {__VA_ARGS__}) EXPECT_TRUE(contains(msg_, part_)) << msg_; \
    EXPECT_EQ(msg_.rfind("bad.gguf: ", 0), 0u) << msg_;                             \
  } while (0)

TEST(GgufMalformed, Stories260KTruncatedEverywhere) {
  const Bytes full = read_file(tokamak::testing::test_data("models/stories260K/stories260K.gguf"));
  const GgufFile ok = GgufFile::parse(full, "stories260K.gguf");
  // Every cut inside the header (magic .. last tensor info) and a stride of cuts
  // through the data: all must be errors naming the file.
  const size_t header_end = ok.data_offset();
  for (size_t n = 0; n < full.size(); n += (n < header_end + 64 ? 1 : 4093)) {
    const std::string msg = parse_error(truncated(full, n), "stories260K.gguf");
    ASSERT_EQ(msg.rfind("stories260K.gguf: ", 0), 0u) << "cut at " << n << ": " << msg;
  }
  // Cuts in each section name that section's field.
  EXPECT_ERROR(truncated(full, 2), "header", "magic");
  EXPECT_ERROR(truncated(full, 30), "metadata key count 19 is impossible");
  EXPECT_ERROR(truncated(full, 5000), "key 'tokenizer.ggml.tokens'", "truncated");
  EXPECT_ERROR(truncated(full, 13000), "tensor #28", "tensor name length 19 exceeds");
  EXPECT_ERROR(truncated(full, 200000), "tensor 'output.weight'", "data [offset 145504, 131072 bytes]",
               "extends past end of file (size 200000)");
  EXPECT_ERROR(truncated(full, full.size() - 1), "tensor 'blk.4.ffn_norm.weight'", "extends past end of file");
}

TEST(GgufMalformed, WriterFileTruncatedAtEveryByte) {
  const Bytes full = writer_file();
  ASSERT_EQ(try_parse(full), "");
  // The padding after the last tensor is not needed; every shorter cut is an error.
  const GgufFile f = GgufFile::parse(full, "ok.gguf");
  const size_t end = f.data_offset() + f.tensors().back().offset + f.tensors().back().n_bytes;
  ASSERT_LT(end, full.size());
  EXPECT_EQ(try_parse(truncated(full, end)), "");
  for (size_t n = 0; n < end; ++n) {
    const std::string msg = parse_error(truncated(full, n));
    ASSERT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << "cut at " << n << ": " << msg;
    ASSERT_TRUE(contains(msg, "truncated") || contains(msg, "exceeds") || contains(msg, "impossible") ||
                contains(msg, "extends past end of file"))
        << "cut at " << n << ": " << msg;
  }
}

TEST(GgufMalformed, Header) {
  EXPECT_ERROR(Bytes{}, "magic truncated", "file size 0");
  Bytes magic = writer_file();
  magic[3] = std::byte{'G'};
  EXPECT_ERROR(magic, "bad magic 'GGUG'");
  EXPECT_ERROR(Raw().header(1, 0, 0).b, "version 1 is not supported");
  EXPECT_ERROR(Raw().header(0, 0, 0).b, "unsupported GGUF version 0");
  EXPECT_ERROR(Raw().header(4, 0, 0).b, "unsupported GGUF version 4");
  EXPECT_ERROR(Raw().header(0x03000000, 0, 0).b, "big-endian");
  EXPECT_ERROR(Raw().header(3, k2p60, 0).b, "tensor count 1152921504606846976 is impossible");
  EXPECT_ERROR(Raw().header(3, 0, k2p60).b, "metadata key count 1152921504606846976 is impossible");
  EXPECT_ERROR(Raw().header(3, ~uint64_t{0}, 0).b, "tensor count 18446744073709551615");
  // Version 2 is read like version 3; a file with nothing in it is valid.
  EXPECT_EQ(try_parse(Raw().header(2, 0, 0).b), "");
  EXPECT_EQ(try_parse(Raw().header(3, 0, 0).b), "");
}

TEST(GgufMalformed, MetadataValues) {
  EXPECT_ERROR(Raw().header(3, 0, 1).u64(k2p60).zeros(16).b, "metadata key #0", "key length 1152921504606846976 exceeds");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(8).u64(k2p60).zeros(16).b, "key 'k'",
               "string value length 1152921504606846976 exceeds");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(13).zeros(16).b, "key 'k'", "unknown value type id 13");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(0xFFFFFFFF).zeros(16).b, "unknown value type id 4294967295");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(7).u8(2).b, "key 'k'", "bool value 2");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(10).u64(~uint64_t{0}).b, "key 'k'",
               "u64 value 18446744073709551615 does not fit in int64");
  // Arrays: element type, nesting, absurd lengths (checked before any allocation).
  EXPECT_ERROR(Raw().header(3, 0, 1).str("arr").u32(9).u32(9).u32(0).u64(0).b, "key 'arr'", "nested arrays");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("arr").u32(9).u32(99).u64(1).zeros(8).b, "key 'arr'",
               "unknown array element type id 99");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("arr").u32(9).u32(0).u64(k2p60).zeros(8).b, "key 'arr'",
               "array length 1152921504606846976 is impossible");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("arr").u32(9).u32(8).u64(uint64_t{1} << 61).zeros(8).b,
               "array length 2305843009213693952 is impossible");
  // 2^62 u64 elements: count * 8 would wrap to 0 in 64 bits.
  EXPECT_ERROR(Raw().header(3, 0, 1).str("arr").u32(9).u32(10).u64(uint64_t{1} << 62).zeros(8).b,
               "array length 4611686018427387904 is impossible");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("arr").u32(9).u32(8).u64(2).str("a").u64(k2p60).b, "key 'arr'",
               "key 'arr' element 1: string length 1152921504606846976 exceeds");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("arr").u32(9).u32(7).u64(3).u8(1).u8(0).u8(5).b, "key 'arr' element 2: bool value 5");
  EXPECT_ERROR(Raw().header(3, 0, 3).kv_u32("dup", 1).kv_u32("other", 2).kv_u32("dup", 3).b,
               "duplicate key 'dup' (entries #0 and #2)");
}

TEST(GgufMalformed, Alignment) {
  EXPECT_ERROR(Raw().header(3, 0, 1).kv_u32("general.alignment", 0).b, "general.alignment",
               "alignment 0 is not a nonzero power of two");
  EXPECT_ERROR(Raw().header(3, 0, 1).kv_u32("general.alignment", 48).b, "alignment 48 is not");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("general.alignment").u32(10).u64(32).b, "general.alignment",
               "has type u64, expected u32");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("general.alignment").u32(8).str("32").b, "has type string");
}

// One tensor (default: F32 `w` [8] at offset 0 with its 32 bytes of data), no metadata.
Bytes one_tensor(std::vector<uint64_t> ne, uint32_t type = 0, uint64_t offset = 0, size_t data_bytes = 32,
                 std::string_view name = "w") {
  Raw r;
  r.header(3, 1, 0).tensor(name, std::move(ne), type, offset).pad(32).zeros(data_bytes);
  return r.b;
}

TEST(GgufMalformed, TensorInfos) {
  EXPECT_EQ(try_parse(one_tensor({8})), "");
  EXPECT_ERROR(one_tensor({}), "tensor 'w'", "n_dims 0 is not in 1..4");
  EXPECT_ERROR(one_tensor({1, 1, 1, 1, 8}), "tensor 'w'", "n_dims 5 is not in 1..4");
  EXPECT_ERROR(Raw().header(3, 1, 0).str("w").u32(0xFFFFFFFF).zeros(64).b, "n_dims 4294967295");
  EXPECT_ERROR(one_tensor({8, 0}), "tensor 'w'", "ne[1] = 0", "positive");
  EXPECT_ERROR(one_tensor({uint64_t{1} << 63}), "ne[0] = 9223372036854775808 does not fit in int64");
  EXPECT_ERROR(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}), "tensor 'w'",
               "shape [4294967296, 4294967296]: element count overflows int64");
  EXPECT_ERROR(one_tensor({uint64_t{1} << 62}, 28), "tensor 'w'", "byte size overflows");  // f64
  EXPECT_ERROR(one_tensor({uint64_t{1} << 61, 2}, 0), "byte size overflows");
  EXPECT_ERROR(one_tensor({33, 1}, 8), "tensor 'w'", "ne[0] = 33 is not a multiple of the q8_0 block size 32");
  EXPECT_ERROR(one_tensor({8}, 4), "tensor 'w'", "unknown tensor type id 4");
  EXPECT_ERROR(one_tensor({8}, 36), "unknown tensor type id 36");
  EXPECT_ERROR(one_tensor({8}, 0xFFFFFFFF), "unknown tensor type id 4294967295");
  EXPECT_ERROR(Raw().header(3, 1, 0).u64(k2p60).zeros(64).b, "tensor #0", "tensor name length 1152921504606846976");
  Raw dup;
  dup.header(3, 3, 0).tensor("a", {8}, 0, 0).tensor("w", {8}, 0, 32).tensor("a", {8}, 0, 64).pad(32).zeros(96);
  EXPECT_ERROR(dup.b, "duplicate tensor name 'a' (tensors #0 and #2)");
  // Names from the file are quoted with control bytes escaped.
  EXPECT_ERROR(one_tensor({8}, 4, 0, 32, std::string_view("a\nb\0c", 5)), "tensor 'a\\x0ab\\x00c'");
}

TEST(GgufMalformed, TensorData) {
  EXPECT_ERROR(one_tensor({8}, 0, 8), "tensor 'w'", "data offset 8 is not a multiple of the alignment 32");
  EXPECT_ERROR(one_tensor({8}, 0, 0, 31), "tensor 'w'", "data [offset 64, 32 bytes] extends past end of file (size 95)");
  EXPECT_ERROR(one_tensor({8}, 0, 32), "data [offset 96, 32 bytes] extends past end of file (size 96)");
  EXPECT_ERROR(one_tensor({8}, 0, uint64_t{1} << 63), "data [offset 9223372036854775872, 32 bytes]");
  // data_offset + offset wraps around 2^64.
  EXPECT_ERROR(one_tensor({8}, 0, ~uint64_t{31}), "data [offset 64 + 18446744073709551584, 32 bytes]",
               "extends past end of file");
  // A huge tensor in a small file.
  EXPECT_ERROR(one_tensor({uint64_t{1} << 40}), "data [offset 64, 4398046511104 bytes] extends past end of file");
  // Header ends inside what would be the padding: no data section at all.
  EXPECT_ERROR(Raw().header(3, 1, 0).tensor("w", {8}, 0, 0).b, "extends past end of file (size 57)");
  // With a custom alignment, offsets are checked against it.
  Raw aligned;
  aligned.header(3, 1, 1).kv_u32("general.alignment", 64).tensor("w", {8}, 0, 32).pad(64).zeros(128);
  EXPECT_ERROR(aligned.b, "data offset 32 is not a multiple of the alignment 64");
}

// Flip bytes of valid files at random: each mutant parses (and its views are
// touched) or gives an Error; ASan/UBSan watch for anything else.
TEST(GgufMalformed, RandomMutationsNeverCrash) {
  const Bytes stories = read_file(tokamak::testing::test_data("models/stories260K/stories260K.gguf"));
  const Bytes header = truncated(stories, GgufFile::parse(stories, "s").data_offset() + 4096);
  std::mt19937_64 rng(1234);
  int errors = 0;
  int n = 0;
  for (const Bytes* base : {&header, static_cast<const Bytes*>(nullptr)}) {
    const Bytes src = base != nullptr ? *base : writer_file();
    for (int iter = 0; iter < 1500; ++iter, ++n) {
      Bytes m = src;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        const size_t at = rng() % m.size();
        // Mostly small-integer damage to length/count/type fields, sometimes random bytes.
        m[at] = rng() % 2 ? static_cast<std::byte>(rng()) : static_cast<std::byte>(static_cast<uint8_t>(m[at]) ^ (1u << (rng() % 8)));
      }
      errors += !try_parse(m).empty();
    }
  }
  EXPECT_GT(errors, n / 10);  // the mutations do reach the checks
}

}  // namespace
}  // namespace tokamak::io
