// Element types of tensors, numbered exactly as GGML/GGUF number them, so a
// GGUF tensor's type id converts with a range check and nothing else.
// Block formats store `block_size` elements in `block_bytes` bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tokamak {

// Ids from here on name no GGML type: dtype_from_id and dtype_from_name never give them.
inline constexpr uint32_t kFirstInternalDType = 1u << 16;

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20,
  IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35,
  // Internal: a format loading widens weights into (kernels/widen.h), never
  // read from or written to a file. IQ3_S_WIDE: IQ4_XS's layout with IQ3_S's
  // 16 levels (kIQ3SWideLevels) and its scales 1 + 2s stored as 33 + 2s.
  IQ3_S_WIDE = kFirstInternalDType,
  // IQ3_XXS_WIDE: IQ4_XS's layout with IQ3_XXS's 16 levels (kIQ3XXSWideLevels),
  // its scales 2s + 1 as 33 + 2s, and d / 4 (exact: a power of two) as the
  // block's scale.
  IQ3_XXS_WIDE,
};

struct DTypeTraits {
  std::string_view name;  // as GGML spells it: "f32", "q4_0", "q4_K"
  int64_t block_size;     // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
};

// nullopt for ids GGML does not define (the removed 4, 5, 31-33, and anything past 35).
std::optional<DType> dtype_from_id(uint32_t id);
const DTypeTraits& dtype_traits(DType t);
inline std::string_view dtype_name(DType t) { return dtype_traits(t).name; }
// Parses a name case-insensitively ("Q4_0", "q4_k", "bf16").
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeTraits& tr = dtype_traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

}  // namespace tokamak
