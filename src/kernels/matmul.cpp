// The matmul driver: converts activations, splits rows between threads and
// blocks rows x tokens for the caches; the kernels do the arithmetic.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <string>

#include "core/error.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quants.h"

namespace tokamak::kernels {
namespace {

// A kernel call's weight rows and activation rows should each fit in about a
// quarter of a 1-2 MB L2, so the rows are read from memory once per token
// block and the activations once per row block.
constexpr size_t kBlockBytes = 256 * 1024;
// Thread shares start on a multiple of this many rows (whole register tiles,
// whole cache lines of y).
constexpr int64_t kRowAlign = 16;

struct Target {
  GemmKernel kernel;
  const TensorView* w;
  float* y;
  int64_t n_rows;
  size_t row_bytes;
  int act_slot;           // which converted copy of x it reads; -1: x itself
  const std::byte* act;  // activation row 0
  size_t act_stride;
};

// The first row of target j at or after cost `v` (costs are bytes of weights,
// counted over the targets in order), rounded up to kRowAlign.
int64_t row_at_cost(int64_t v, int64_t target_start_cost, const Target& t) {
  const auto row_cost = static_cast<int64_t>(t.row_bytes);
  const int64_t rel = std::max<int64_t>(0, v - target_start_cost);
  const int64_t row = (rel + row_cost - 1) / row_cost;
  return std::min(t.n_rows, (row + kRowAlign - 1) / kRowAlign * kRowAlign);
}

void run_rows(const Target& t, int64_t k, int64_t begin, int64_t end, int64_t n_tokens) {
  const int64_t row_block = std::max<int64_t>(kRowAlign, static_cast<int64_t>(kBlockBytes / t.row_bytes) / kRowAlign * kRowAlign);
  const int64_t token_block = std::max<int64_t>(4, static_cast<int64_t>(kBlockBytes / t.act_stride) / 4 * 4);
  GemmArgs a;
  a.type = t.w->type;
  a.w_stride = t.row_bytes;
  a.k = k;
  a.act_stride = t.act_stride;
  a.ldy = t.n_rows;
  for (int64_t r0 = begin; r0 < end; r0 += row_block) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += token_block) {
      a.w = t.w->data + static_cast<size_t>(r0) * t.row_bytes;
      a.n_rows = std::min(row_block, end - r0);
      a.act = t.act + static_cast<size_t>(t0) * t.act_stride;
      a.n_tokens = std::min(token_block, n_tokens - t0);
      a.y = t.y + t0 * t.n_rows + r0;
      t.kernel.fn(a);
    }
  }
}

}  // namespace

Matmul::Matmul(MatmulOptions options) : options_(options) {
  if (!isa_supported(options.isa)) throw Error("matmul: this CPU cannot run the " + std::string(isa_name(options.isa)) + " kernels");
}

void Matmul::run(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool) {
  if (outs.empty() || n_tokens <= 0) return;
  if (outs.size() > static_cast<size_t>(kMaxFused)) {
    throw Error("matmul: " + std::to_string(outs.size()) + " fused weights, at most " + std::to_string(kMaxFused));
  }
  const int64_t k = outs[0].w->ne[0];
  std::array<Target, kMaxFused> targets;
  const int n_targets = static_cast<int>(outs.size());
  for (int j = 0; j < n_targets; ++j) {
    const TensorView& w = *outs[static_cast<size_t>(j)].w;
    if (w.ne[0] != k) {
      throw Error("matmul: fused weight " + std::to_string(j) + " has " + std::to_string(w.ne[0]) +
                  " inputs per row, the first has " + std::to_string(k));
    }
    if (!can_dequantize(w.type)) throw Error("matmul: unsupported weight type " + std::string(dtype_name(w.type)));
    Target& t = targets[static_cast<size_t>(j)];
    t.kernel = options_.precision == MatmulPrecision::kF32 ? GemmKernel{gemm_f32_reference, ActFormat::kF32}
                                                           : gemm_kernel(w.type, options_.isa);
    t.w = &w;
    t.y = outs[static_cast<size_t>(j)].y;
    t.n_rows = w.n_rows();
    t.row_bytes = w.row_stride();
  }

  // Convert x once per distinct format; kF32 reads x in place.
  std::array<ActFormat, kMaxFused> formats;
  std::array<size_t, kMaxFused> offsets;
  int n_formats = 0;
  size_t scratch_bytes = 0;
  for (int j = 0; j < n_targets; ++j) {
    Target& t = targets[static_cast<size_t>(j)];
    t.act_slot = -1;
    if (t.kernel.act == ActFormat::kF32) {
      t.act = reinterpret_cast<const std::byte*>(x);
      t.act_stride = static_cast<size_t>(k) * sizeof(float);
      continue;
    }
    t.act_stride = act_layout(t.kernel.act, k).row_bytes;
    int f = 0;
    while (f < n_formats && formats[static_cast<size_t>(f)] != t.kernel.act) ++f;
    if (f == n_formats) {
      formats[static_cast<size_t>(f)] = t.kernel.act;
      offsets[static_cast<size_t>(f)] = scratch_bytes;
      scratch_bytes += static_cast<size_t>(n_tokens) * t.act_stride;
      ++n_formats;
    }
    t.act_slot = f;
  }
  scratch_.reserve(scratch_bytes);
  for (int j = 0; j < n_targets; ++j) {
    Target& t = targets[static_cast<size_t>(j)];
    if (t.act_slot >= 0) t.act = scratch_.data() + offsets[static_cast<size_t>(t.act_slot)];
  }
  if (n_formats > 0) {
    pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int) {
      for (int f = 0; f < n_formats; ++f) {
        const ActFormat fmt = formats[static_cast<size_t>(f)];
        const size_t stride = act_layout(fmt, k).row_bytes;
        for (int64_t t = begin; t < end; ++t) {
          quantize_act_row(fmt, x + t * k, scratch_.data() + offsets[static_cast<size_t>(f)] + static_cast<size_t>(t) * stride, k);
        }
      }
    });
  }

  // Split the rows of all targets between the threads by bytes of weights.
  std::array<int64_t, kMaxFused + 1> start_cost{};
  for (int j = 0; j < n_targets; ++j) {
    const Target& t = targets[static_cast<size_t>(j)];
    start_cost[static_cast<size_t>(j) + 1] = start_cost[static_cast<size_t>(j)] + t.n_rows * static_cast<int64_t>(t.row_bytes);
  }
  const int64_t total = start_cost[static_cast<size_t>(n_targets)];
  const int n_threads = pool.size();
  pool.parallel_for(n_threads, [&](int64_t first, int64_t last, int) {
    for (int64_t i = first; i < last; ++i) {
      const int64_t lo = total / n_threads * i + total % n_threads * i / n_threads;
      const int64_t hi = total / n_threads * (i + 1) + total % n_threads * (i + 1) / n_threads;
      for (int j = 0; j < n_targets; ++j) {
        const Target& t = targets[static_cast<size_t>(j)];
        const int64_t begin = row_at_cost(lo, start_cost[static_cast<size_t>(j)], t);
        const int64_t end = row_at_cost(hi, start_cost[static_cast<size_t>(j)], t);
        if (begin < end) run_rows(t, k, begin, end, n_tokens);
      }
    }
  });
}

}  // namespace tokamak::kernels
