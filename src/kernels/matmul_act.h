// Activation formats of the matmul kernels: what a row of activations is
// turned into before it meets the rows of one weight type.
//
// The choice (GemmKernel::act, matmul_kernels.h) follows llama.cpp's CPU
// backend, the engine our reference logits come from: F16 weights meet
// activations rounded to fp16, BF16 ones activations rounded to bf16, the
// 32-element formats meet Q8_0 activations and the K-quants (and IQ4_XS,
// IQ3_XXS, IQ3_S, TQ1_0, TQ2_0) Q8_K ones. Where
// the weights are integers (the quantized formats), an integer dot product is
// then the fast way: 64 multiply-adds per AVX-512 VNNI instruction instead of
// 16, and a quarter of the activation bytes. The cost is fidelity: activations
// carry 8 bits, so the logits move away from an all-f32 computation (about
// 0.1 on micro-llama) while they match llama.cpp's own (native) logits.
//
// Rows are laid out for the SIMD kernels, not as GGML blocks: quants of a row
// are contiguous (so 64 of them load at once) and scales and sums follow in
// their own arrays. Every array starts on a 64-byte boundary and is padded
// with zeros to one, so kernels may read a whole vector past the last block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tokamak::kernels {

enum class ActFormat : uint8_t {
  kF32,           // the caller's floats as they are (F32 weights, and the scalar f32 path)
  kF32RoundF16,   // f32 values rounded to fp16 (round to nearest even)
  kF32RoundBF16,  // f32 values rounded to bf16 (round to nearest even)
  kBF16,          // the same values stored as bf16 (for AVX512-BF16's dot instruction)
  kF16,           // f32 values rounded to fp16, stored as fp16 (AVX-512 F16 weights: half the bytes of kF32RoundF16)
  kQ8_0,          // per 32: int8 q, scale d (an fp16 value) and the sum of q
  kQ8_K,          // per 256: int8 q and an f32 scale d; per 16: the sum of q
};

inline constexpr size_t pad64(size_t n) { return (n + 63) / 64 * 64; }

// Where the parts of one row of k activations lie, in bytes from the row start.
// Q8 formats: qs int8[k] at 0, d float[k / block] at d_offset, sums
// int16[k / 32 (Q8_0) or k / 16 (Q8_K)] at sums_offset.
struct ActLayout {
  size_t d_offset = 0;
  size_t sums_offset = 0;
  size_t row_bytes = 0;  // a multiple of 64
};

inline ActLayout act_layout(ActFormat f, int64_t k) {
  const auto n = static_cast<size_t>(k);
  ActLayout l;
  switch (f) {
    case ActFormat::kF32:
    case ActFormat::kF32RoundF16:
    case ActFormat::kF32RoundBF16: l.row_bytes = pad64(4 * n); break;
    case ActFormat::kBF16:
    case ActFormat::kF16: l.row_bytes = pad64(2 * n); break;
    case ActFormat::kQ8_0:
      l.d_offset = pad64(n);
      l.sums_offset = l.d_offset + pad64(4 * (n / 32));
      l.row_bytes = l.sums_offset + pad64(2 * (n / 32));
      break;
    case ActFormat::kQ8_K:
      l.d_offset = pad64(n);
      l.sums_offset = l.d_offset + pad64(4 * (n / 256));
      l.row_bytes = l.sums_offset + pad64(2 * (n / 16));
      break;
  }
  return l;
}

// Converts k floats into one row of format f at dst (act_layout(f, k).row_bytes
// bytes, 64-byte aligned). k must be a multiple of 32 (kQ8_0) or 256 (kQ8_K).
// Q8_0 reproduces llama.cpp's x86 quantize_row_q8_0: d = amax / 127 rounded
// to fp16, q = round-half-even(x * (127 / amax)). Q8_K reproduces ggml's
// quantize_row_q8_K (quant_q8_k). Every kernel variant reads the same bytes,
// so variants differ only in the order of their float additions.
void quantize_act_row(ActFormat f, const float* x, std::byte* dst, int64_t k);

// The same bytes from portable scalar code: what quantize_act_row runs where
// the CPU has no AVX2 (its Q8_0 and Q8_K loops are vectorized there, a few %
// of a prompt's time), and what the tests hold the vectorized code to.
void quantize_act_row_scalar(ActFormat f, const float* x, std::byte* dst, int64_t k);

}  // namespace tokamak::kernels
