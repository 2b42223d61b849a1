#include "core/dtype.h"

#include <array>
#include <cctype>

namespace tokamak {
namespace {

constexpr size_t kQK_K = 256;

struct Entry {
  uint32_t id;
  DTypeTraits traits;
};

// Block sizes and byte counts follow ggml's block_* structs.
constexpr std::array<Entry, 33> kTypes{{
    {0, {"f32", 1, 4}},
    {1, {"f16", 1, 2}},
    {2, {"q4_0", 32, 2 + 16}},
    {3, {"q4_1", 32, 2 + 2 + 16}},
    {6, {"q5_0", 32, 2 + 4 + 16}},
    {7, {"q5_1", 32, 2 + 2 + 4 + 16}},
    {8, {"q8_0", 32, 2 + 32}},
    {9, {"q8_1", 32, 2 + 2 + 32}},
    {10, {"q2_K", 256, kQK_K / 16 + kQK_K / 4 + 2 + 2}},
    {11, {"q3_K", 256, kQK_K / 8 + kQK_K / 4 + 12 + 2}},
    {12, {"q4_K", 256, 2 + 2 + 12 + kQK_K / 2}},
    {13, {"q5_K", 256, 2 + 2 + 12 + kQK_K / 8 + kQK_K / 2}},
    {14, {"q6_K", 256, kQK_K / 2 + kQK_K / 4 + kQK_K / 16 + 2}},
    {15, {"q8_K", 256, 4 + kQK_K + kQK_K / 16 * 2}},
    {16, {"iq2_xxs", 256, 2 + kQK_K / 8 * 2}},
    {17, {"iq2_xs", 256, 2 + kQK_K / 8 * 2 + kQK_K / 32}},
    {18, {"iq3_xxs", 256, 2 + 3 * kQK_K / 8}},
    {19, {"iq1_s", 256, 2 + kQK_K / 8 + kQK_K / 32 * 2}},
    {20, {"iq4_nl", 32, 2 + 16}},
    {21, {"iq3_s", 256, 2 + kQK_K / 4 + kQK_K / 32 + kQK_K / 8 + 4}},
    {22, {"iq2_s", 256, 2 + kQK_K / 4 + kQK_K / 32 + kQK_K / 32}},
    {23, {"iq4_xs", 256, 2 + 2 + kQK_K / 64 + kQK_K / 2}},
    {24, {"i8", 1, 1}},
    {25, {"i16", 1, 2}},
    {26, {"i32", 1, 4}},
    {27, {"i64", 1, 8}},
    {28, {"f64", 1, 8}},
    {29, {"iq1_m", 256, kQK_K / 8 + kQK_K / 16 + kQK_K / 32}},
    {30, {"bf16", 1, 2}},
    {34, {"tq1_0", 256, (kQK_K - 4 * kQK_K / 64) / 5 + kQK_K / 64 + 2}},
    {35, {"tq2_0", 256, kQK_K / 4 + 2}},
    {kFirstInternalDType, {"iq3_s_wide", 256, 2 + 2 + kQK_K / 64 + kQK_K / 2}},
    {kFirstInternalDType + 1, {"iq3_xxs_wide", 256, 2 + 2 + kQK_K / 64 + kQK_K / 2}},
}};

const Entry* find_entry(uint32_t id) {
  for (const Entry& e : kTypes) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

}  // namespace

std::optional<DType> dtype_from_id(uint32_t id) {
  if (id >= kFirstInternalDType || find_entry(id) == nullptr) return std::nullopt;
  return static_cast<DType>(id);
}

const DTypeTraits& dtype_traits(DType t) {
  // Every DType value is in the table, so this lookup cannot fail for a
  // value made through dtype_from_id / dtype_from_name or a named enumerator.
  return find_entry(static_cast<uint32_t>(t))->traits;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const Entry& e : kTypes) {
    if (e.id >= kFirstInternalDType || e.traits.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(name[i])) ==
             std::tolower(static_cast<unsigned char>(e.traits.name[i]));
    }
    if (same) return static_cast<DType>(e.id);
  }
  return std::nullopt;
}

}  // namespace tokamak
