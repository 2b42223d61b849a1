// The safetensors reader: valid files read back exactly; a corpus of malformed
// headers each gets a tokamak::Error naming the file and the offending tensor
// or value, never a crash (run under ASan+UBSan). Files are built here by a
// writer independent of the reader.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tokamak::io {
namespace {

using json = nlohmann::json;
using Bytes = std::vector<std::byte>;

Bytes bytes_of(const std::string& s) {
  Bytes b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// u64 little-endian header length, the header text, the data.
Bytes file_of(const std::string& header, const Bytes& data, uint64_t declared_length) {
  Bytes out(8);
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>(declared_length >> (8 * i));
  const Bytes h = bytes_of(header);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}
Bytes file_of(const std::string& header, const Bytes& data) { return file_of(header, data, header.size()); }

// A valid two-tensor file: "a" F32 [2, 3] = 0..5, "b" F16 [2] = {1.5, -2}.
const std::string kValidHeader =
    R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
    R"("b":{"dtype":"F16","shape":[2],"data_offsets":[24,28]}})";
Bytes valid_data() {
  Bytes d(28);
  for (int i = 0; i < 6; ++i) {
    const float v = static_cast<float>(i);
    std::memcpy(d.data() + 4 * i, &v, 4);
  }
  const uint16_t h[2] = {0x3E00, 0xC000};  // 1.5, -2 in binary16
  std::memcpy(d.data() + 24, h, 4);
  return d;
}

// Parses a copy in an exactly-sized heap buffer (so ASan sees any overread)
// and reads every byte of every tensor. Returns the error, or "" if it parsed.
std::string try_parse(const Bytes& bytes) {
  auto buf = std::make_unique<std::byte[]>(bytes.size() + 1);
  if (!bytes.empty()) std::memcpy(buf.get(), bytes.data(), bytes.size());
  try {
    const SafetensorsFile f = SafetensorsFile::parse({buf.get(), bytes.size()}, "bad.safetensors");
    volatile unsigned sink = 0;
    for (const SafetensorsTensor& t : f.tensors()) {
      for (std::byte b : t.data) sink = sink + static_cast<unsigned>(b);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsAValidFile) {
  const Bytes bytes = file_of(kValidHeader, valid_data());
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "ok.safetensors");
  ASSERT_EQ(f.tensors().size(), 2u);
  const SafetensorsTensor* a = f.find("a");
  const SafetensorsTensor* b = f.find("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(f.find("c"), nullptr);
  EXPECT_EQ(a->dtype, SafetensorsDType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->n_elements(), 6);
  EXPECT_EQ(a->data.data(), bytes.data() + 8 + kValidHeader.size());
  EXPECT_EQ(b->shape_string(), "[2]");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  std::vector<float> out(6);
  read_f32(*a, 0, 6, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, 1, 2, 3, 4, 5}));
  read_f32(*a, 4, 2, out.data());
  EXPECT_EQ(out[0], 4.0f);
  read_f32(*b, 0, 2, out.data());
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_THROW(read_f32(*a, 5, 2, out.data()), Error);
}

TEST(Safetensors, Bf16F64ScalarsAndEmptyTensors) {
  const std::string header =
      R"({"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0,4],"data_offsets":[8,8]},)"
      R"("h":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]},"i":{"dtype":"I64","shape":[1],"data_offsets":[10,18]}}    )";
  Bytes data(18);
  const double d = -0.25;
  std::memcpy(data.data(), &d, 8);
  const uint16_t bf = 0x4049;  // 3.140625 in bfloat16
  std::memcpy(data.data() + 8, &bf, 2);
  const Bytes bytes = file_of(header, data);  // parse() keeps views into it
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "x.safetensors");
  float v = 0;
  read_f32(*f.find("s"), 0, 1, &v);
  EXPECT_EQ(v, -0.25f);
  EXPECT_EQ(f.find("s")->n_elements(), 1);
  EXPECT_EQ(f.find("e")->n_elements(), 0);
  read_f32(*f.find("h"), 0, 1, &v);
  EXPECT_EQ(v, 3.140625f);
  try {
    read_f32(*f.find("i"), 0, 1, &v);
    ADD_FAILURE() << "read an I64 tensor as float";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'i' has dtype I64"), std::string::npos) << e.what();
  }
}

struct Malformed {
  const char* what;
  Bytes bytes;
  std::vector<std::string> expected;  // substrings of the message
};

std::vector<Malformed> malformed_corpus() {
  using namespace std::string_literals;
  const Bytes data = valid_data();
  const auto with = [&](const std::string& header, Bytes d) { return file_of(header, std::move(d)); };
  const auto tensor = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return R"({"t":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
  };
  Bytes four(4);
  return {
      {"empty file", {}, {"0 bytes", "too short"}},
      {"7 bytes", Bytes(7), {"7 bytes"}},
      {"length past the end", file_of("{}", {}, 1000), {"header length 1000", "past the end"}},
      {"length over the limit", file_of("{}", {}, uint64_t{1} << 40), {"1099511627776", "limit"}},
      {"length 2^64-1", file_of("{}", {}, ~uint64_t{0}), {"18446744073709551615"}},
      {"not an object", with("[1, 2]", {}), {"does not start with '{'"}},
      {"empty header", file_of("", {}, 0), {"does not start with '{'"}},
      {"not JSON", with("{\"a\": ", {}), {"not valid JSON"}},
      {"NUL padding", with("{}\0\0"s, {}), {"NUL byte at offset 10"}},
      {"invalid UTF-8 name", with("{\"\xff\":1}", {}), {"not valid JSON"}},
      {"duplicate tensor",
       with(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four),
       {"duplicate key \"t\""}},
      {"duplicate field", with(R"({"t":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", four),
       {"duplicate key \"dtype\""}},
      {"nested too deep", with(tensor("\"F32\"", "[[1]]", "[0,4]"), four), {"nest deeper"}},
      {"deep metadata", with(R"({"__metadata__":{"a":{"b":{}}}})", {}), {"nest deeper"}},
      {"entry not an object", with(R"({"t":[1]})", {}), {"'t'", "not an object"}},
      {"unknown dtype", with(tensor("\"F17\"", "[1]", "[0,4]"), four), {"'t'", "\"F17\""}},
      {"dtype not a string", with(tensor("7", "[1]", "[0,4]"), four), {"'t'", "dtype 7"}},
      {"shape not an array", with(tensor("\"F32\"", "4", "[0,4]"), four), {"'t'", "shape 4"}},
      {"negative size", with(tensor("\"F32\"", "[-1]", "[0,4]"), four), {"'t'", "shape[0] = -1"}},
      {"fractional size", with(tensor("\"F32\"", "[1.5]", "[0,4]"), four), {"'t'", "shape[0] = 1.5"}},
      {"too many dims", with(tensor("\"F32\"", "[1,1,1,1,1,1,1,1,1]", "[0,4]"), four), {"'t'", "at most 8"}},
      {"shape overflow", with(tensor("\"F32\"", "[4294967296,4294967296]", "[0,4]"), four), {"'t'", "overflows"}},
      {"huge size", with(tensor("\"U8\"", "[18446744073709551615]", "[0,4]"), four), {"'t'", "overflows"}},
      {"offsets not a pair", with(tensor("\"F32\"", "[1]", "[0]"), four), {"'t'", "not [begin, end]"}},
      {"negative offset", with(tensor("\"F32\"", "[1]", "[-4,0]"), four), {"'t'", "data_offsets[0] = -4"}},
      {"end before begin", with(tensor("\"F32\"", "[1]", "[4,0]"), four), {"'t'", "end before"}},
      {"size mismatch", with(tensor("\"F32\"", "[2]", "[0,4]"), four), {"'t'", "hold 4 bytes", "needs 8"}},
      {"past the data", with(tensor("\"F32\"", "[2]", "[0,8]"), four), {"'t'", "past the data section"}},
      {"gap before", with(tensor("\"F32\"", "[1]", "[4,8]"), Bytes(8)), {"'t'", "leave a gap"}},
      {"overlap",
       with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", Bytes(8)),
       {"'b'", "overlap"}},
      {"uncovered tail", with(tensor("\"F32\"", "[1]", "[0,4]"), Bytes(12)), {"cover 4 bytes of a 12-byte"}},
      {"unknown field", with(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", four),
       {"'t'", "unknown field 'x'"}},
      {"missing field", with(R"({"t":{"dtype":"F32","shape":[1]}})", four), {"'t'", "needs dtype"}},
      {"metadata not an object", with(R"({"__metadata__":[]})", {}), {"__metadata__ []"}},
      {"metadata value", with(R"({"__metadata__":{"k":1}})", {}), {"'k' = 1"}},
      {"valid header, data cut", with(kValidHeader, Bytes(data.begin(), data.begin() + 20)), {"'a'", "past the data section"}},
  };
}

TEST(Safetensors, MalformedHeadersGiveCleanErrors) {
  for (const Malformed& m : malformed_corpus()) {
    const std::string msg = try_parse(m.bytes);
    ASSERT_FALSE(msg.empty()) << m.what << ": parsed without error";
    EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << m.what << ": " << msg;
    for (const std::string& s : m.expected) EXPECT_NE(msg.find(s), std::string::npos) << m.what << ": " << msg;
  }
}

TEST(Safetensors, SpacePaddedHeaderIsValid) {
  EXPECT_EQ(try_parse(file_of(kValidHeader + "      ", valid_data())), "");
}

// Random byte flips, truncations and header-length changes of a valid file:
// each either parses (and its tensors lie inside the buffer) or throws Error.
TEST(Safetensors, MutationsNeverCrash) {
  const Bytes base = file_of(kValidHeader, valid_data());
  std::mt19937 rng(5);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    Bytes b = base;
    switch (i % 3) {
      case 0:
        for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) b[rng() % b.size()] = static_cast<std::byte>(rng());
        break;
      case 1:
        b.resize(rng() % b.size());
        break;
      default:
        b[rng() % 8] = static_cast<std::byte>(rng());
        break;
    }
    parsed += try_parse(b).empty() ? 1 : 0;
  }
  EXPECT_GT(parsed, 0);  // some flips land in tensor data and keep the file valid
}

// ---------------------------------------------------------------- folders

class SafetensorsFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("st_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void write(const std::string& name, const Bytes& b) {
    std::ofstream out(dir_ / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  void write(const std::string& name, const std::string& text) { write(name, bytes_of(text)); }
  static Bytes one(const std::string& name) {
    return file_of(R"({")" + name + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", Bytes(4));
  }
  std::string error_of() {
    try {
      SafetensorsModel::open(dir_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(SafetensorsFolder, IndexNamesTheShards) {
  write("model-00001-of-00002.safetensors", one("x"));
  write("model-00002-of-00002.safetensors", one("y"));
  write("model.safetensors.index.json",
        R"({"metadata":{},"weight_map":{"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors"}})");
  const SafetensorsModel m = SafetensorsModel::open(dir_);
  EXPECT_EQ(m.n_shards(), 2u);
  EXPECT_EQ(m.names(), (std::vector<std::string>{"x", "y"}));
  ASSERT_NE(m.find("y"), nullptr);
  EXPECT_EQ(m.find("y")->name, "y");
  EXPECT_EQ(m.find("z"), nullptr);
}

TEST_F(SafetensorsFolder, WithoutIndexEveryShardIsRead) {
  write("a.safetensors", one("x"));
  write("b.safetensors", one("y"));
  EXPECT_EQ(SafetensorsModel::open(dir_).names(), (std::vector<std::string>{"x", "y"}));
  write("c.safetensors", one("x"));
  EXPECT_NE(error_of().find("'x' is also in another shard"), std::string::npos) << error_of();
}

TEST_F(SafetensorsFolder, BadIndexesAreErrors) {
  write("s.safetensors", one("x"));
  write("model.safetensors.index.json", R"({"weight_map":{"x":"../s.safetensors"}})");
  EXPECT_NE(error_of().find("'../s.safetensors', which is not a file name"), std::string::npos) << error_of();
  write("model.safetensors.index.json", R"({"weight_map":{"x":"s.safetensors","y":"s.safetensors"}})");
  EXPECT_NE(error_of().find("'y' is not in its shard s.safetensors"), std::string::npos) << error_of();
  write("model.safetensors.index.json", R"({"weight_map":{"x":"gone.safetensors"}})");
  EXPECT_NE(error_of().find("gone.safetensors"), std::string::npos) << error_of();
  write("model.safetensors.index.json", R"({"weight_map":[]})");
  EXPECT_NE(error_of().find("no weight_map"), std::string::npos) << error_of();
  write("model.safetensors.index.json", R"({"weight_map":{"x":5}})");
  EXPECT_NE(error_of().find("'x' = 5"), std::string::npos) << error_of();
  write("model.safetensors.index.json", "{");
  EXPECT_NE(error_of().find("not valid JSON"), std::string::npos) << error_of();
}

TEST_F(SafetensorsFolder, EmptyFolderIsAnError) {
  EXPECT_NE(error_of().find("no model.safetensors"), std::string::npos) << error_of();
}

}  // namespace
}  // namespace tokamak::io
