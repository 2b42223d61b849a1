#include "kernels/widen.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/quants_blocks.h"
#include "kernels/quants_impl.h"

namespace tokamak::kernels {
namespace {

// The trits of a TQ1_0 block (digits 0..2, value + 1) in element order, as
// dequant_tq1_0 reads them: 32 bytes x 5 digits, 16 bytes x 5, qh's 4 x 4.
void tq1_0_digits(const BlockTQ1_0& b, uint8_t (&digits)[kQK_K]) {
  constexpr int kHead = 32, kTail = sizeof(BlockTQ1_0::qs) - kHead, kQh = sizeof(BlockTQ1_0::qh);
  int e = 0;
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < kHead; ++m) digits[e++] = static_cast<uint8_t>(detail::ternary_digit(b.qs[m], n));
  }
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < kTail; ++m) digits[e++] = static_cast<uint8_t>(detail::ternary_digit(b.qs[kHead + m], n));
  }
  for (int n = 0; n < 4; ++n) {
    for (int j = 0; j < kQh; ++j) digits[e++] = static_cast<uint8_t>(detail::ternary_digit(b.qh[j], n));
  }
}

// TQ2_0 stores value + 1 in 2 bits, Q2_K's order (detail::unpack_2bit):
// element e in bits 2((e % 128) / 32) of byte 32(e / 128) + e % 32.
BlockTQ2_0 tq1_0_to_tq2_0(const BlockTQ1_0& in) {
  uint8_t digits[kQK_K];
  tq1_0_digits(in, digits);
  BlockTQ2_0 out{};
  for (int e = 0; e < kQK_K; ++e) out.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(digits[e] << (2 * (e % 128 / 32)));
  out.d = in.d;
  return out;
}

}  // namespace

std::optional<DType> widened_type(DType t, Isa isa) {
  // The scalar variant is the reference the others are tested against: it
  // reads every format as stored. NEON has no kernel for either format yet.
  const bool x86 = isa == Isa::kAvx2 || isa == Isa::kAvx512 || isa == Isa::kAvx512Vnni || isa == Isa::kAvx512Bf16;
  if (x86 && t == DType::TQ1_0) return DType::TQ2_0;
  return std::nullopt;
}

void widen_rows(DType from, const std::byte* src, DType to, std::byte* dst, int64_t n_rows, int64_t k) {
  if (from != DType::TQ1_0 || to != DType::TQ2_0) {
    throw Error("widen_rows: no widening of " + std::string(dtype_name(from)) + " into " + std::string(dtype_name(to)));
  }
  const int64_t blocks = n_rows * (k / kQK_K);
  for (int64_t i = 0; i < blocks; ++i) {
    BlockTQ1_0 in;
    std::memcpy(&in, src + i * sizeof(BlockTQ1_0), sizeof(in));
    const BlockTQ2_0 out = tq1_0_to_tq2_0(in);
    std::memcpy(dst + i * sizeof(BlockTQ2_0), &out, sizeof(out));
  }
}

}  // namespace tokamak::kernels
