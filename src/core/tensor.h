// A non-owning view of a tensor in GGML's layout: ne[0] is the fastest-moving
// dimension, so a 2-D weight [ne0 = n_in, ne1 = n_out] is ne1 rows of ne0 values.
// Views are cheap to copy; whoever made the view keeps the bytes alive.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace tokamak {

// How a weight's rows lie in memory. kInterleaved8: rows in groups of 8,
// interleaved block by block for the SIMD matmul kernels (the layout is in
// kernels/interleave.h); rows after the last full group stay plain. A group
// starts where its first row would in the plain layout, and only the matmul
// reads such a tensor: row() does not apply to it.
enum class RowLayout : uint8_t { kPlain, kInterleaved8 };

struct TensorView {
  DType type = DType::F32;
  RowLayout layout = RowLayout::kPlain;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  const std::byte* data = nullptr;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_stride() const { return row_bytes(type, ne[0]); }
  size_t n_bytes() const { return row_stride() * static_cast<size_t>(n_rows()); }
  const std::byte* row(int64_t i) const { return data + static_cast<size_t>(i) * row_stride(); }
  const float* f32() const { return reinterpret_cast<const float*>(data); }
};

}  // namespace tokamak
