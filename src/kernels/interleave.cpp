#include "kernels/interleave.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/matmul_kernels.h"

namespace tokamak::kernels {
namespace {

// Bytes of the fp16 scale and of the quants of one 32-element block.
struct BlockShape {
  size_t scale_bytes = 2;
  size_t qs_bytes = 0;
};

BlockShape block_shape(DType t) {
  switch (t) {
    case DType::Q4_0: return {2, 16};
    case DType::Q8_0: return {2, 32};
    default: throw Error("interleave: no interleaved layout for " + std::string(dtype_name(t)));
  }
}

// Calls piece(plain offset, interleaved offset, bytes) for every piece of
// one block of a group: plain offsets from the block's start in row 0 (rows
// row_bytes apart), interleaved ones from the start of its interleaved image.
template <class Piece>
void for_each_piece(const BlockShape& s, size_t row_bytes, const Piece& piece) {
  const size_t lines = s.qs_bytes / 4;
  for (size_t r = 0; r < kInterleaveRows; ++r) {
    piece(r * row_bytes, r * s.scale_bytes, s.scale_bytes);
    for (size_t c = 0; c < lines; ++c) {
      piece(r * row_bytes + s.scale_bytes + 4 * c, kInterleaveRows * s.scale_bytes + 32 * c + 4 * r, size_t{4});
    }
  }
}

}  // namespace

bool can_interleave(DType t) { return t == DType::Q4_0 || t == DType::Q8_0; }

bool prefers_interleaved(DType t, Isa isa) { return can_interleave(t) && gemm_kernel_interleaved(t, isa).fn != nullptr; }

void interleave_rows(DType t, const std::byte* src, std::byte* dst, int64_t n_rows, int64_t k) {
  const BlockShape s = block_shape(t);
  const size_t rb = row_bytes(t, k);
  const size_t block_bytes = s.scale_bytes + s.qs_bytes;
  const int64_t nb = k / 32;
  const int64_t groups = n_rows / kInterleaveRows;
  for (int64_t g = 0; g < groups; ++g) {
    const size_t base = static_cast<size_t>(g) * kInterleaveRows * rb;
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* plain = src + base + static_cast<size_t>(b) * block_bytes;
      std::byte* inter = dst + base + static_cast<size_t>(b) * kInterleaveRows * block_bytes;
      for_each_piece(s, rb, [&](size_t p, size_t i, size_t n) { std::memcpy(inter + i, plain + p, n); });
    }
  }
  const size_t done = static_cast<size_t>(groups) * kInterleaveRows * rb;
  std::memcpy(dst + done, src + done, static_cast<size_t>(n_rows) * rb - done);
}

void deinterleave_group(DType t, const std::byte* group, std::byte* dst, int64_t k) {
  const BlockShape s = block_shape(t);
  const size_t rb = row_bytes(t, k);
  const size_t block_bytes = s.scale_bytes + s.qs_bytes;
  for (int64_t b = 0; b < k / 32; ++b) {
    const std::byte* inter = group + static_cast<size_t>(b) * kInterleaveRows * block_bytes;
    std::byte* plain = dst + static_cast<size_t>(b) * block_bytes;
    for_each_piece(s, rb, [&](size_t p, size_t i, size_t n) { std::memcpy(plain + p, inter + i, n); });
  }
}

}  // namespace tokamak::kernels
