// The matmul driver: converts activations, splits rows between threads and
// blocks rows x tokens for the caches; the kernels do the arithmetic.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/interleave.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quants.h"

namespace tokamak::kernels {
namespace {

// A kernel call's weight rows and its activation rows should fit together in
// L2 (matmul_blocks): run_rows keeps one block of rows in L2 while every
// token block passes by, so weights come from memory once and the activations
// (a few MB for a long prompt, in L3) once per row block.
const MatmulBlocks& blocks() {
  static const MatmulBlocks b = matmul_blocks(l2_cache_bytes());
  return b;
}

// Chunks of rows handed to threads are multiples of this (whole register
// tiles, whole cache lines of y).
constexpr int64_t kRowAlign = 16;
// Multiply-adds: below kSmallJob a job is split in fixed ranges of at least kSmallJobGrain (Matmul::run).
constexpr int64_t kSmallJob = int64_t{1} << 18;
constexpr int64_t kSmallJobGrain = 2048;
static_assert(kRowAlign % kInterleaveRows == 0, "chunks of interleaved weights start on a group");

struct Target {
  GemmKernel kernel;
  const TensorView* w;
  float* y;
  int64_t n_rows;
  size_t row_bytes;
  bool deinterleave;      // interleaved weights, a kernel that reads plain rows
  int act_slot;           // which converted copy of x it reads; -1: x itself
  const std::byte* act;  // activation row 0
  size_t act_stride;
  const std::byte* decode_operands;  // one token: built from act by kernel.decode_operands
};

// Rows per kernel call: about blocks().weight_bytes of weights, a multiple of kRowAlign.
int64_t row_block(const Target& t) {
  return std::max<int64_t>(kRowAlign, static_cast<int64_t>(blocks().weight_bytes / t.row_bytes) / kRowAlign * kRowAlign);
}

// A plain kernel over interleaved rows: each group of 8 is copied back to
// plain rows first (the variants without interleaved kernels, and the f32
// reference path; the copy costs little beside their arithmetic). The same
// rows in the same order: the values equal those from plain weights.
void gemm_deinterleaved(const GemmArgs& a, GemmFn plain) {
  thread_local std::vector<std::byte> rows;
  rows.resize(kInterleaveRows * a.w_stride);
  const int64_t groups = a.n_rows / kInterleaveRows;
  GemmArgs g = a;
  for (int64_t i = 0; i < groups; ++i) {
    deinterleave_group(a.type, a.w + static_cast<size_t>(i) * kInterleaveRows * a.w_stride, rows.data(), a.k);
    g.w = rows.data();
    g.n_rows = kInterleaveRows;
    g.y = a.y + i * kInterleaveRows;
    plain(g);
  }
  if (groups * kInterleaveRows < a.n_rows) {
    g.w = a.w + static_cast<size_t>(groups) * kInterleaveRows * a.w_stride;
    g.n_rows = a.n_rows - groups * kInterleaveRows;
    g.y = a.y + groups * kInterleaveRows;
    plain(g);
  }
}

void run_rows(const Target& t, int64_t k, int64_t begin, int64_t end, int64_t n_tokens, bool continue_sums) {
  const int64_t rows_per_call = row_block(t);
  // A multiple of 12 tokens: whole register tiles (4 or 6 tokens wide), so
  // only the batch's last tokens go through narrower tiles.
  const int64_t token_block = std::max<int64_t>(12, static_cast<int64_t>(blocks().act_bytes / t.act_stride) / 12 * 12);
  GemmArgs a;
  a.type = t.w->type;
  a.w_stride = t.row_bytes;
  a.k = k;
  a.act_stride = t.act_stride;
  a.ldy = t.n_rows;
  a.continue_sums = continue_sums;
  for (int64_t r0 = begin; r0 < end; r0 += rows_per_call) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += token_block) {
      a.w = t.w->data + static_cast<size_t>(r0) * t.row_bytes;
      a.n_rows = std::min(rows_per_call, end - r0);
      a.act = t.act + static_cast<size_t>(t0) * t.act_stride;
      a.n_tokens = std::min(token_block, n_tokens - t0);
      a.decode_operands = t.decode_operands;  // set for one-token calls only
      a.y = t.y + t0 * t.n_rows + r0;
      if (t.deinterleave) {
        gemm_deinterleaved(a, t.kernel.fn);
      } else {
        t.kernel.fn(a);
      }
    }
  }
}

}  // namespace

MatmulBlocks matmul_blocks(size_t l2_bytes) {
  // A quarter of L2 for weights and half for activations: on a 1 MiB L2 (Zen 5)
  // 256 and 512 KiB, where matmul_bench Gemm f16 tokens:512 measured attn_q +5%
  // and ffn_up +7% against 256 KiB of activations, the quantized types level,
  // and 768 KiB slower for every type. An unknown L2 counts as 1 MiB; the
  // bounds keep tiny or odd reports from starving the register tiles.
  const size_t l2 = l2_bytes == 0 ? size_t{1} << 20 : l2_bytes;
  return {std::clamp<size_t>(l2 / 4, 64 * 1024, 1024 * 1024), std::clamp<size_t>(l2 / 2, 128 * 1024, 2048 * 1024)};
}

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
    t.deinterleave = false;
    if (w.layout == RowLayout::kInterleaved8) {
      const GemmKernel inter = gemm_kernel_interleaved(w.type, options_.isa);
      if (options_.precision == MatmulPrecision::kQuantized && inter.fn != nullptr) {
        t.kernel = inter;
      } else {
        t.deinterleave = true;
      }
    }
    t.w = &w;
    t.y = outs[static_cast<size_t>(j)].y;
    t.n_rows = w.n_rows();
    t.row_bytes = w.row_stride();
  }

  // Convert x once per distinct format; kF32 reads x in place. A format
  // some kernel builds decode operands from gets room for them whatever the
  // token count, so that the scratch stops growing after the first call.
  std::array<ActFormat, kMaxFused> formats;
  std::array<size_t, kMaxFused> offsets;
  std::array<DecodeOperandsFn, kMaxFused> builders{};
  std::array<size_t, kMaxFused> operand_offsets{};
  int n_formats = 0;
  size_t scratch_bytes = 0;
  for (int j = 0; j < n_targets; ++j) {
    Target& t = targets[static_cast<size_t>(j)];
    t.act_slot = -1;
    t.decode_operands = nullptr;
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
    const size_t slot = static_cast<size_t>(f);
    if (t.kernel.decode_operands != nullptr && builders[slot] == nullptr) {
      builders[slot] = t.kernel.decode_operands;
      operand_offsets[slot] = (scratch_bytes + 63) / 64 * 64;
      scratch_bytes = operand_offsets[slot] + decode_operand_bytes(k);
    }
  }
  scratch_.reserve(scratch_bytes);
  for (int j = 0; j < n_targets; ++j) {
    Target& t = targets[static_cast<size_t>(j)];
    if (t.act_slot < 0) continue;
    const size_t slot = static_cast<size_t>(t.act_slot);
    t.act = scratch_.data() + offsets[slot];
    if (n_tokens == 1 && t.kernel.decode_operands != nullptr) t.decode_operands = scratch_.data() + operand_offsets[slot];
  }
  if (n_formats > 0) {
    const int64_t token_grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, k));
    pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int) {
      for (int f = 0; f < n_formats; ++f) {
        const ActFormat fmt = formats[static_cast<size_t>(f)];
        const size_t stride = act_layout(fmt, k).row_bytes;
        for (int64_t t = begin; t < end; ++t) {
          quantize_act_row(fmt, x + t * k, scratch_.data() + offsets[static_cast<size_t>(f)] + static_cast<size_t>(t) * stride, k);
        }
        if (n_tokens == 1 && builders[static_cast<size_t>(f)] != nullptr) {
          builders[static_cast<size_t>(f)](scratch_.data() + offsets[static_cast<size_t>(f)], k,
                                           scratch_.data() + operand_offsets[static_cast<size_t>(f)]);
        }
      }
    }, token_grain);
  }

  // Rows of all targets go out in chunks that threads of a large job claim as
  // they finish the previous one, so a thread slowed by anything else on its
  // core does not hold up the rest. Which thread computes a row never changes
  // its value.
  std::array<int64_t, kMaxFused> chunk_rows{};
  std::array<int64_t, kMaxFused + 1> first_chunk{};
  const int n_threads = pool.size();
  for (int j = 0; j < n_targets; ++j) {
    const Target& t = targets[static_cast<size_t>(j)];
    const int64_t per_thread = (t.n_rows + 4 * n_threads - 1) / (4 * n_threads);
    const int64_t rows = std::min(row_block(t), std::max(kRowAlign, (per_thread + kRowAlign - 1) / kRowAlign * kRowAlign));
    chunk_rows[static_cast<size_t>(j)] = rows;
    first_chunk[static_cast<size_t>(j) + 1] = first_chunk[static_cast<size_t>(j)] + (t.n_rows + rows - 1) / rows;
  }
  const int64_t n_chunks = first_chunk[static_cast<size_t>(n_targets)];
  auto run_chunk = [&](int64_t c, int& j) {
    if (c < first_chunk[static_cast<size_t>(j)]) j = 0;
    while (c >= first_chunk[static_cast<size_t>(j) + 1]) ++j;
    const Target& t = targets[static_cast<size_t>(j)];
    const int64_t begin = (c - first_chunk[static_cast<size_t>(j)]) * chunk_rows[static_cast<size_t>(j)];
    run_rows(t, k, begin, std::min(t.n_rows, begin + chunk_rows[static_cast<size_t>(j)]), n_tokens, continue_sums_);
  };
  // A small job (a decode step of a model whose weights fit in the cores'
  // caches: stories260K's matmuls are 4K-32K multiply-adds) is split once, in
  // fixed ranges: claiming its ~10 chunks one by one cost a contended atomic
  // each, and a core's rows moved to the other core's cache from step to
  // step. Ranges hold >= kSmallJobGrain multiply-adds, ~5x a fork-join of
  // the pool (~140 ns with its workers spinning).
  int64_t work = 0;
  for (int j = 0; j < n_targets; ++j) work += targets[static_cast<size_t>(j)].n_rows * k * n_tokens;
  if (work < kSmallJob) {
    pool.parallel_for(n_chunks, [&](int64_t b, int64_t e, int) {
      int j = 0;
      for (int64_t c = b; c < e; ++c) run_chunk(c, j);
    }, std::max<int64_t>(1, n_chunks * kSmallJobGrain / std::max<int64_t>(1, work)));
    return;
  }
  // Thread i claims the chunks of its own contiguous share in order, so its
  // next chunk starts where the last one ended and the prefetches running
  // ahead of the weights (the kernels' ~6 KiB and the hardware's) carry on
  // into it; then it helps the other shares. One counter for all dealt the
  // chunks out alternately, each a new stream, and each thread's prefetches
  // ran on past a chunk's end into lines the other thread was reading:
  // TinyLlama Q4_0 decode ran 12-15% slower (Q8_0, Q4_K_M 8-13%). With each
  // thread's chunks every other one, on counters of their own, 11% slower:
  // the streams matter, not the shared line; asking for a chunk's first
  // 6 KiB at once did not help either, so it is not the start's latency
  // alone (tokamak bench tg64, 2 threads, Zen 5 VM). A share's counter is on
  // its owner's cache line: its claims stay local until another thread
  // comes to help.
  if (n_shares_ < n_threads) {
    shares_ = std::make_unique<ChunkShare[]>(static_cast<size_t>(n_threads));
    n_shares_ = n_threads;
  }
  for (int i = 0; i < n_threads; ++i) {
    shares_[static_cast<size_t>(i)].next.store(n_chunks * i / n_threads, std::memory_order_relaxed);
    shares_[static_cast<size_t>(i)].end = n_chunks * (i + 1) / n_threads;
  }
  pool.parallel_for(n_threads, [&](int64_t begin, int64_t end, int) {
    for (int64_t me = begin; me < end; ++me) {
      int j = 0;
      for (int64_t other = 0; other < n_threads; ++other) {
        ChunkShare& share = shares_[static_cast<size_t>((me + other) % n_threads)];
        for (int64_t c = share.next.fetch_add(1, std::memory_order_relaxed); c < share.end;
             c = share.next.fetch_add(1, std::memory_order_relaxed)) {
          run_chunk(c, j);
        }
      }
    }
  });
}

void Matmul::run_continuing(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (options_.precision != MatmulPrecision::kF32) {
    throw Error("matmul: continuing sums needs the f32 reference path (--matmul f32)");
  }
  continue_sums_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{continue_sums_};
  run(w, x, n_tokens, y, pool);
}

}  // namespace tokamak::kernels
