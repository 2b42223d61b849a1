// Matrix products against stored weights: y = x · Wᵀ for a batch of tokens.
//
// Decode (one token) streams every weight byte once, so it is bound by memory
// bandwidth; prefill (many tokens) is bound by arithmetic. One kernel per
// (weight type, instruction set) serves both: it tiles rows x tokens in
// registers (a GEMV when there is one token, a register-blocked GEMM when
// there are many), and the driver blocks rows and tokens so a tile's weights
// and activations stay in L2 (matmul.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>

#include "core/aligned_buffer.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"

namespace tokamak::kernels {

// How activations meet the weights.
enum class MatmulPrecision {
  // Activations are converted to the weight type's partner format (fp16/bf16
  // rounding, or Q8_0 / Q8_K quantization: see matmul_act.h) and multiplied
  // with SIMD kernels: llama.cpp's CPU arithmetic, the fast path.
  kQuantized,
  // f32 activations and the scalar dot_row_ref for every element: the all-f32
  // reference (matches llama.cpp's "deqf32" logits), slow.
  kF32,
};

struct MatmulOptions {
  Isa isa = best_isa();
  MatmulPrecision precision = MatmulPrecision::kQuantized;
};

// Bytes of weights and of activations per kernel call, from the L2 size
// (bytes per core; 0: unknown). Exposed for tests.
struct MatmulBlocks {
  size_t weight_bytes;
  size_t act_bytes;
};
MatmulBlocks matmul_blocks(size_t l2_bytes);

// One weight of a (possibly fused) product and where its result goes.
struct MatmulOut {
  const TensorView* w = nullptr;  // [ne0 = n_in, ne1 = n_out], any supported type
  float* y = nullptr;             // [n_tokens, n_out], row-major
};

// Owns the scratch that converted activations live in; it grows to the
// largest call and is then reused, so a decode loop allocates nothing.
// Not thread-safe: one Matmul per forward pass.
class Matmul {
 public:
  explicit Matmul(MatmulOptions options = {});

  const MatmulOptions& options() const { return options_; }

  // y[t, r] = dot(w row r, x row t) for t < n_tokens; x: [n_tokens, n_in].
  void run(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
    run({MatmulOut{&w, y}}, x, n_tokens, pool);
  }

  // Several weights that share the input x (Q/K/V, gate/up): x is converted
  // once per activation format and one parallel pass covers the rows of all
  // weights, without a barrier between them and without concatenating the
  // weights in memory. Every weight needs ne0 == n_in; at most kMaxFused.
  // Each element equals what run() on its weight alone gives, bitwise.
  void run(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool);
  void run(std::initializer_list<MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool) {
    run(std::span<const MatmulOut>(outs.begin(), outs.size()), x, n_tokens, pool);
  }

  // The f32 reference path (MatmulPrecision::kF32) only: each y[t, r] is the
  // start of its sum, which goes on in element order as dot_row_ref's does.
  // Ranks holding consecutive column ranges of a weight continue one another's
  // sums this way, giving the bits of one process (model/forward.cpp).
  void run_continuing(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

  static constexpr int kMaxFused = 8;

 private:
  // A thread's share of a large job's chunks, [next, end), on its own cache
  // line: its owner claims them in order, then helps the other shares.
  struct alignas(64) ChunkShare {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };

  MatmulOptions options_;
  bool continue_sums_ = false;
  AlignedBuffer scratch_;  // converted activations, one region per format
  std::unique_ptr<ChunkShare[]> shares_;  // one per pool thread
  int n_shares_ = 0;
};

}  // namespace tokamak::kernels
