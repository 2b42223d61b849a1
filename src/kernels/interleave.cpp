#include "kernels/interleave.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quants_impl.h"

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

constexpr size_t kQ4KBytes = 144;

// One Q4_K super-block of 8 plain rows (row_bytes apart) <-> its interleaved image.
void interleave_q4_k(const std::byte* plain, size_t row_bytes, std::byte* inter) {
  uint8_t sc[8][8], mn[8][8];  // [sub-block][row]
  std::memset(inter + 32, 0, 96);
  auto* lo = reinterpret_cast<uint8_t*>(inter + 32);
  auto* hi = reinterpret_cast<uint8_t*>(inter + 96);
  for (size_t r = 0; r < 8; ++r) {
    const std::byte* b = plain + r * row_bytes;
    std::memcpy(inter + 2 * r, b, 2);
    std::memcpy(inter + 16 + 2 * r, b + 2, 2);
    for (int s = 0; s < 8; ++s) detail::scale_min_k4(s, reinterpret_cast<const uint8_t*>(b + 4), &sc[s][r], &mn[s][r]);
    for (size_t j = 0; j < 4; ++j) {
      for (size_t c = 0; c < 8; ++c) std::memcpy(inter + 128 + 256 * j + 32 * c + 4 * r, b + 16 + 32 * j + 4 * c, 4);
    }
  }
  for (int i = 0; i < 64; ++i) {
    const uint8_t s = sc[i / 8][i % 8], m = mn[i / 8][i % 8];
    lo[i] = static_cast<uint8_t>((s & 0xF) | (m & 0xF) << 4);
    hi[i % 32] |= static_cast<uint8_t>(((s >> 4) | (m >> 4) << 2) << (i < 32 ? 0 : 4));
  }
}

void deinterleave_q4_k(const std::byte* inter, std::byte* plain, size_t row_bytes) {
  const auto* lo = reinterpret_cast<const uint8_t*>(inter + 32);
  const auto* hi = reinterpret_cast<const uint8_t*>(inter + 96);
  for (size_t r = 0; r < 8; ++r) {
    std::byte* b = plain + r * row_bytes;
    std::memcpy(b, inter + 2 * r, 2);
    std::memcpy(b + 2, inter + 16 + 2 * r, 2);
    uint8_t sc[8], mn[8];
    for (size_t s = 0; s < 8; ++s) {
      const size_t i = 8 * s + r;
      const uint8_t h = static_cast<uint8_t>(hi[i % 32] >> (i < 32 ? 0 : 4));
      sc[s] = static_cast<uint8_t>((lo[i] & 0xF) | (h & 3) << 4);
      mn[s] = static_cast<uint8_t>((lo[i] >> 4) | (h >> 2 & 3) << 4);
    }
    detail::pack_scale_min_k4(sc, mn, reinterpret_cast<uint8_t*>(b + 4));
    for (size_t j = 0; j < 4; ++j) {
      for (size_t c = 0; c < 8; ++c) std::memcpy(b + 16 + 32 * j + 4 * c, inter + 128 + 256 * j + 32 * c + 4 * r, 4);
    }
  }
}

}  // namespace

bool can_interleave(DType t) { return t == DType::Q4_0 || t == DType::Q8_0 || t == DType::Q4_K; }

bool prefers_interleaved(DType t, Isa isa) { return can_interleave(t) && gemm_kernel_interleaved(t, isa).fn != nullptr; }

void interleave_rows(DType t, const std::byte* src, std::byte* dst, int64_t n_rows, int64_t k) {
  const size_t rb = row_bytes(t, k);
  const int64_t groups = n_rows / kInterleaveRows;
  const size_t done = static_cast<size_t>(groups) * kInterleaveRows * rb;
  std::memcpy(dst + done, src + done, static_cast<size_t>(n_rows) * rb - done);
  if (t == DType::Q4_K) {
    for (int64_t g = 0; g < groups; ++g) {
      const size_t base = static_cast<size_t>(g) * kInterleaveRows * rb;
      for (int64_t b = 0; b < k / 256; ++b) {
        interleave_q4_k(src + base + static_cast<size_t>(b) * kQ4KBytes, rb, dst + base + static_cast<size_t>(b) * 8 * kQ4KBytes);
      }
    }
    return;
  }
  const BlockShape s = block_shape(t);
  const size_t block_bytes = s.scale_bytes + s.qs_bytes;
  const int64_t nb = k / 32;
  for (int64_t g = 0; g < groups; ++g) {
    const size_t base = static_cast<size_t>(g) * kInterleaveRows * rb;
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* plain = src + base + static_cast<size_t>(b) * block_bytes;
      std::byte* inter = dst + base + static_cast<size_t>(b) * kInterleaveRows * block_bytes;
      for_each_piece(s, rb, [&](size_t p, size_t i, size_t n) { std::memcpy(inter + i, plain + p, n); });
    }
  }
}

void deinterleave_group(DType t, const std::byte* group, std::byte* dst, int64_t k) {
  const size_t rb = row_bytes(t, k);
  if (t == DType::Q4_K) {
    for (int64_t b = 0; b < k / 256; ++b) {
      deinterleave_q4_k(group + static_cast<size_t>(b) * 8 * kQ4KBytes, dst + static_cast<size_t>(b) * kQ4KBytes, rb);
    }
    return;
  }
  const BlockShape s = block_shape(t);
  const size_t block_bytes = s.scale_bytes + s.qs_bytes;
  for (int64_t b = 0; b < k / 32; ++b) {
    const std::byte* inter = group + static_cast<size_t>(b) * kInterleaveRows * block_bytes;
    std::byte* plain = dst + static_cast<size_t>(b) * block_bytes;
    for_each_piece(s, rb, [&](size_t p, size_t i, size_t n) { std::memcpy(plain + p, inter + i, n); });
  }
}

}  // namespace tokamak::kernels
