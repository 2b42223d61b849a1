// Internal to matmul_avx2_interleaved.cpp and matmul_avx_vnni_interleaved.cpp,
// which include it inside their target regions, in an anonymous namespace,
// after interleaved_unpack.h; interleaved_kernel() at the end is the table.
// AVX2 kernels over weights interleaved 8 rows at a time (kernels/interleave.h):
// the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) against Q8_0
// activations, Q2_K .. Q6_K and IQ4_XS against Q8_K ones, F16 and BF16
// against f32 (rounded to their type).
//
// Per 32-element block of a group: the 8 rows' scales load as one vector;
// each 32-byte line holds 4 quants of each row and meets the same 4
// activations broadcast to every lane, so vpmaddubsw + vpmaddwd leave each
// row's block sum in its own lane: no horizontal sums, no scalar scales.
// Q4_0 sums its 8 lines in int16 (|nibble x activation pair| <= 2 x 15 x 127,
// eight of them <= 30480) and widens once; Q8_0 widens every line.
//
// With AVX-VNNI (TOKAMAK_MATMUL_INT_VNNI set by the includer: Alder Lake and
// later Intel client CPUs, Zen 5) the 32-element formats' products go through
// VPDPBUSD instead, straight into int32: one instruction where vpmaddubsw,
// the int16 add and the widening took two or three, and the same exact sums
// (none of the int16 steps above saturates), so the same bits. A prompt's
// K-quant tiles (unpacked_tile) sum each sub-block in int32 the same way and
// weigh it by vpmulld where AVX2 weighs its int16 pieces by vpmaddwd; the
// K-quants' one-token kernels stay as they are (decode reads, it does not
// multiply, at its pace).
//
// Each output element is one float lane: per block, acc = fma(float(block's
// integer sum), d_row x d_act, acc), in block order, the same for every tile
// shape, so tokens and rows never change each other's values.
#pragma once


// How far ahead the 32-element formats prefetch a group's weights (a group
// streams as one sequence): ~6 KiB, whole blocks. 16 blocks, 2.3 KiB of
// Q4_0, streamed one core at 25-28 GB/s, 42 at 30-32 (matmul_bench GemvX8
// threads:1, TOKAMAK_BENCH_ISA=avx2, 4 alternations; Q8_0 29-33 -> 33-35).
constexpr size_t kPrefetchBytes32 = 6144;

// The 32-element formats, lines outside and tokens inside: each line's load
// and unpacking serve the T tokens (a token-outer loop redid them per token:
// 12% more work for Q8_0). F::sums<T>(block, xq, b, s) adds each token's
// integer sums of block b into s[t]; F::total(s, activations' sum) is the
// block's exact integer dot.

// Q4_0 and Q4_1: 4 lines of nibbles a block from byte kLines; low nibbles
// of line c are elements 4c..4c+3, high nibbles 16+4c..16+4c+3. The 8 lines'
// sums stay in int16 (|nibble x activation pair| <= 2 x 15 x 127, eight of
// them <= 30480). Q4_0's value is q - 8, so 8 x the activations' sum comes
// off at the end; Q4_1's is d q + m, the min's term a float step of its own.
template <size_t kLines, bool kMin>
struct Nibble4Lines {
  static constexpr size_t kBlockBytes = kMin ? 8 * 20 : 8 * 18;
  static constexpr bool kHasMin = kMin;
  static constexpr int kTokens = 6;
  template <int T>
  static void sums(const uint8_t* p, const uint8_t* const* xq, int64_t b, __m256i* s) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load256(p + kLines + 32 * c);
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
#if TOKAMAK_MATMUL_INT_VNNI
        s[t] = _mm256_dpbusd_avx_epi32(s[t], lo, broadcast4(xq[t] + 32 * b, c));
        s[t] = _mm256_dpbusd_avx_epi32(s[t], hi, broadcast4(xq[t] + 32 * b, c + 4));
#else
        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(lo, broadcast4(xq[t] + 32 * b, c)));
        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(hi, broadcast4(xq[t] + 32 * b, c + 4)));
#endif
        asm("" : "+x"(s[t]));  // no reassociation into a tree kept on the stack (see unpacked_tile)
      }
    }
  }
  // s: int32 sums with VNNI, else int16.
  static __m256i total(__m256i s, int16_t xsum) {
#if TOKAMAK_MATMUL_INT_VNNI
    const __m256i s32 = s;
#else
    const __m256i s32 = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
#endif
    return kMin ? s32 : _mm256_sub_epi32(s32, _mm256_set1_epi32(8 * static_cast<int32_t>(xsum)));
  }
};
using Q4_0Lines = Nibble4Lines<16, false>;
using Q4_1Lines = Nibble4Lines<32, true>;

// Q5_0 and Q5_1: Q4's nibble lines from byte kLines with their fifth bits
// from the line at kFifth (interleave.h: bit 2c + h of each byte is line
// c's, low nibbles h = 0), moved to bit 4 by one shift. |q x activation
// pair| <= 2 x 31 x 127: a line's two halves and two lines fit int16, so
// every second line widens. Q5_0's value is q - 16.
template <size_t kFifth, size_t kLines, bool kMin>
struct Nibble5Lines {
  static constexpr size_t kBlockBytes = kMin ? 8 * 24 : 8 * 22;
  static constexpr bool kHasMin = kMin;
  static constexpr int kTokens = 4;  // 2 accumulators a token
  template <int shift>
  static __m256i fifth_bits(__m256i h) {
    const __m256i b = shift >= 0 ? _mm256_slli_epi16(h, shift) : _mm256_srli_epi16(h, -shift);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
  }
  // Adds line c's products into sums[t]: int16 (AVX2), or int32 (VNNI).
  template <int c, int T>
  static void line(const uint8_t* p, __m256i h, const uint8_t* const* xq, int64_t b, __m256i* sums) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i v = load256(p + kLines + 32 * c);
    const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), fifth_bits<4 - 2 * c>(h));
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), fifth_bits<3 - 2 * c>(h));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#if TOKAMAK_MATMUL_INT_VNNI
      sums[t] = _mm256_dpbusd_avx_epi32(sums[t], lo, broadcast4(xq[t] + 32 * b, c));
      sums[t] = _mm256_dpbusd_avx_epi32(sums[t], hi, broadcast4(xq[t] + 32 * b, c + 4));
#else
      sums[t] = _mm256_add_epi16(sums[t], _mm256_maddubs_epi16(lo, broadcast4(xq[t] + 32 * b, c)));
      sums[t] = _mm256_add_epi16(sums[t], _mm256_maddubs_epi16(hi, broadcast4(xq[t] + 32 * b, c + 4)));
#endif
      asm("" : "+x"(sums[t]));  // as above
    }
  }
  template <int T>
  static void widen(const __m256i* s16, __m256i* s) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(s16[t], _mm256_set1_epi16(1)));
  }
  template <int T>
  static void sums(const uint8_t* p, const uint8_t* const* xq, int64_t b, __m256i* s) {
    const __m256i h = load256(p + kFifth);
#if TOKAMAK_MATMUL_INT_VNNI
    line<0, T>(p, h, xq, b, s);  // straight into the int32 sums
    line<1, T>(p, h, xq, b, s);
    line<2, T>(p, h, xq, b, s);
    line<3, T>(p, h, xq, b, s);
#else
    __m256i s16[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s16[t] = _mm256_setzero_si256();
    line<0, T>(p, h, xq, b, s16);
    line<1, T>(p, h, xq, b, s16);
    widen<T>(s16, s);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s16[t] = _mm256_setzero_si256();
    line<2, T>(p, h, xq, b, s16);
    line<3, T>(p, h, xq, b, s16);
    widen<T>(s16, s);
#endif
  }
  static __m256i total(__m256i s32, int16_t xsum) {
    return kMin ? s32 : _mm256_sub_epi32(s32, _mm256_set1_epi32(16 * static_cast<int32_t>(xsum)));
  }
};
using Q5_0Lines = Nibble5Lines<16, 48, false>;
using Q5_1Lines = Nibble5Lines<32, 64, true>;

// IQ4_NL: Q4_0's lines, each nibble an index into the 16 int8 values
// (vpshufb); the signed values meet the activations like Q8_0's (|w| against
// the activation with w's sign, every line widened: pairs reach 2 x 127 x 127).
struct IQ4_NLLines {
  static constexpr size_t kBlockBytes = 8 * 18;
  static constexpr bool kHasMin = false;
  static constexpr int kTokens = 6;
  template <int T>
  static void sums(const uint8_t* p, const uint8_t* const* xq, int64_t b, __m256i* s) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);  // (not with VNNI)
    const __m256i values = _mm256_broadcastsi128_si256(load128(reinterpret_cast<const uint8_t*>(kIQ4NLValues)));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load256(p + 16 + 32 * c);
      const __m256i lo = _mm256_shuffle_epi8(values, _mm256_and_si256(v, m4));
      const __m256i hi = _mm256_shuffle_epi8(values, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
      const __m256i alo = _mm256_sign_epi8(lo, lo), ahi = _mm256_sign_epi8(hi, hi);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
#if TOKAMAK_MATMUL_INT_VNNI
        s[t] = _mm256_dpbusd_avx_epi32(s[t], alo, _mm256_sign_epi8(broadcast4(xq[t] + 32 * b, c), lo));
        s[t] = _mm256_dpbusd_avx_epi32(s[t], ahi, _mm256_sign_epi8(broadcast4(xq[t] + 32 * b, c + 4), hi));
#else
        const __m256i plo = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(broadcast4(xq[t] + 32 * b, c), lo));
        const __m256i phi = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(broadcast4(xq[t] + 32 * b, c + 4), hi));
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(plo, ones));
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(phi, ones));
#endif
        asm("" : "+x"(s[t]));  // as above
      }
    }
  }
  static __m256i total(__m256i s32, int16_t) { return s32; }
};

// Q8_0: 8 lines of signed bytes a block, line c = elements 4c..4c+3.
// vpmaddubsw wants one unsigned operand: |w| against the activation with w's
// sign; each line widens to int32 (two lines' pairs could pass int16).
struct Q8_0Lines {
  static constexpr size_t kBlockBytes = 8 * 34;
  static constexpr bool kHasMin = false;
  static constexpr int kTokens = 6;
  template <int T>
  static void sums(const uint8_t* p, const uint8_t* const* xq, int64_t b, __m256i* s) {
    [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);  // (VNNI: one token only)
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i w = load256(p + 16 + 32 * c);
      const __m256i aw = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        // One token takes AVX2's vpmaddubsw even with VNNI: on a Zen 5 host
        // its decode reads Q8_0 from DRAM faster that way (tg64 TinyLlama
        // Q8_0 --isa avx_vnni 53.5 -> 56.2 t/s, 5 of 5 alternations; GemvX8
        // q8_0 ffn_up one thread 7.6% slower with vpdpbusd, though 18% faster
        // in L2). Two vpdpbusd chains instead of one were slower still; the
        // prefetch distance (3-12 KiB) changed nothing; Q4_0 is level either
        // way. The same exact sums, so the same bits.
        if constexpr (TOKAMAK_MATMUL_INT_VNNI && T > 1) {
#if TOKAMAK_MATMUL_INT_VNNI
          s[t] = _mm256_dpbusd_avx_epi32(s[t], aw, _mm256_sign_epi8(broadcast4(xq[t] + 32 * b, c), w));
#endif
        } else {
          const __m256i pairs = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(broadcast4(xq[t] + 32 * b, c), w));
          s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(pairs, ones));
        }
        asm("" : "+x"(s[t]));  // as above
      }
    }
  }
  static __m256i total(__m256i s32, int16_t) { return s32; }
};

// One group of 8 rows against activation rows [t0, t0 + T).
template <class F, int T>
void group_tile_32(const uint8_t* g, int64_t nb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  const uint8_t* xq[T];
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    xq[t] = x.qs(t0 + t);
    acc[t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = g + static_cast<size_t>(b) * F::kBlockBytes;
    for (size_t line = 0; line < F::kBlockBytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes32 / F::kBlockBytes * F::kBlockBytes + line), _MM_HINT_T0);
    }
    __m256i s[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
    F::template sums<T>(p, xq, b, s);
    const __m256 d = _mm256_cvtph_ps(load128(p));
    [[maybe_unused]] __m256 m;
    if constexpr (F::kHasMin) m = _mm256_cvtph_ps(load128(p + 16));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int16_t xsum = x.sums(t0 + t)[b];
      const float dx = x.d(t0 + t)[b];
      const __m256i total = F::total(s[t], xsum);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[t]);
      // Rows with a min add min x (the activations' sum), as a second step.
      if constexpr (F::kHasMin) acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(dx * static_cast<float>(xsum)), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

template <class F>
struct Blocks32 {
  static constexpr ActFormat kAct = ActFormat::kQ8_0;
  static constexpr int kTokens = F::kTokens;
  template <int T>
  static void tile(const uint8_t* g, int64_t k, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
    group_tile_32<F, T>(g, k / 32, x, t0, y, ldy);
  }
};
using Q4_0x8 = Blocks32<Q4_0Lines>;
using Q8_0x8 = Blocks32<Q8_0Lines>;
using Q4_1x8 = Blocks32<Q4_1Lines>;
using Q5_0x8 = Blocks32<Q5_0Lines>;
using Q5_1x8 = Blocks32<Q5_1Lines>;
using IQ4_NLx8 = Blocks32<IQ4_NLLines>;

// ---- Q4_K x Q8_K (scales: Q4KScales, interleaved_unpack.h) ----

// One group of 8 rows against Q8_K activation rows [t0, t0 + T): per
// super-block, each row's integer sum of scale x q x activation, and of min x
// the activations' sub-block sums, then two float steps.
template <int T>
void group_tile_q4_k(const uint8_t* g, int64_t n_sb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  constexpr size_t kBlock = 8 * 144;
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* p = g + static_cast<size_t>(sb) * kBlock;
    for (size_t line = 0; line < kBlock; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + 2 * kBlock + line), _MM_HINT_T0);
    }
    Q4KScales scales;
    unpack_q4_k_scales(p, scales);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      __m256i sa[T], sb2[T];
      for (int t = 0; t < T; ++t) sa[t] = sb2[t] = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const __m256i v = load256(p + 128 + 256 * j + 32 * c);
        const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        for (int t = 0; t < T; ++t) {
          const uint8_t* xq = x.qs(t0 + t) + 256 * sb + 64 * j;
          sa[t] = _mm256_add_epi16(sa[t], _mm256_maddubs_epi16(lo, broadcast4(xq, c)));
          sb2[t] = _mm256_add_epi16(sb2[t], _mm256_maddubs_epi16(hi, broadcast4(xq + 32, c)));
        }
      }
      const __m256i sc_a = scales_of(scales, 2 * j), sc_b = scales_of(scales, 2 * j + 1);
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(_mm256_madd_epi16(sa[t], ones), sc_a));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(_mm256_madd_epi16(sb2[t], ones), sc_b));
      }
    }
    const __m256 d = _mm256_cvtph_ps(load128(p)), dmin = _mm256_cvtph_ps(load128(p + 16));
    for (int t = 0; t < T; ++t) {
      // Sums of the activations per 32: (xs0..xs3) twice in the low lane, (xs4..xs7) in the high one.
      const __m256i bs = load256(reinterpret_cast<const uint8_t*>(x.sums(t0 + t) + 16 * sb));
      const __m256i xs = _mm256_hadd_epi16(bs, bs);
      __m256i msum = _mm256_setzero_si256();
      for (int q = 0; q < 4; ++q) {
        const __m256i pair = _mm256_permutevar8x32_epi32(xs, _mm256_set1_epi32(q < 2 ? q : q + 2));
        msum = _mm256_add_epi32(msum, _mm256_madd_epi16(scales.m16[q], pair));
      }
      const __m256 dx = _mm256_set1_ps(x.d(t0 + t)[sb]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, dx), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dx), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

struct Q4_Kx8 {
  static constexpr ActFormat kAct = ActFormat::kQ8_K;
  static constexpr int kTokens = 2;
  template <int T>
  static void tile(const uint8_t* g, int64_t k, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
    group_tile_q4_k<T>(g, k / 256, x, t0, y, ldy);
  }
};

// ---- Q6_K x Q8_K (values: q6_k_values, interleaved_unpack.h) ----

// One group of 8 rows against Q8_K activation rows [t0, t0 + T). Per
// super-block: q (0..63) x activation summed per 16 (two lines in int16:
// |pair| <= 2 x 63 x 128, two of them fit), times the row's int8 scale, minus
// 32 x sum over sub-blocks of scale x the activations' sum; then one float step.
template <int T>
void group_tile_q6_k(const uint8_t* g, int64_t n_sb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  constexpr size_t kBlock = 8 * 210;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* p = g + static_cast<size_t>(sb) * kBlock;
    for (size_t line = 0; line < kBlock; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + 2 * kBlock + line), _MM_HINT_T0);
    }
    const uint8_t* scales = p + 16;  // int8 at 8s + r
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      for (int half = 0; half < 2; ++half) {  // lines 4 half .. 4 half + 3: sub-blocks 8h + 2j + half
        __m256i s32[T][4];
        for (int t = 0; t < T; ++t)
          for (int j = 0; j < 4; ++j) s32[t][j] = _mm256_setzero_si256();
        for (int pair = 0; pair < 2; ++pair) {
          __m256i s16[T][4];
          for (int t = 0; t < T; ++t)
            for (int j = 0; j < 4; ++j) s16[t][j] = _mm256_setzero_si256();
          for (int mm = 0; mm < 2; ++mm) {
            const int m = 4 * half + 2 * pair + mm;
            __m256i q[4];
            q6_k_values(p, h, m, q);
            for (int t = 0; t < T; ++t) {
              const uint8_t* xq = x.qs(t0 + t) + 256 * sb + 128 * h;
              for (int j = 0; j < 4; ++j) s16[t][j] = _mm256_add_epi16(s16[t][j], _mm256_maddubs_epi16(q[j], broadcast4(xq + 32 * j, m)));
            }
          }
          for (int t = 0; t < T; ++t)
            for (int j = 0; j < 4; ++j) s32[t][j] = _mm256_add_epi32(s32[t][j], _mm256_madd_epi16(s16[t][j], ones));
        }
        for (int j = 0; j < 4; ++j) {
          const int sub = 8 * h + 2 * j + half;
          const __m256i sc = byte_per_row<true>(scales + 8 * sub);
          for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s32[t][j], sc));
        }
      }
    }
    // Scales as int16 pairs (s = 2c, 2c + 1) per row lane, against the activations' sums per 16.
    __m256i sc16[8];
    for (int c = 0; c < 8; ++c) sc16[c] = byte_pairs_per_row<true>(scales, c);
    const __m256 d = _mm256_cvtph_ps(load128(p));
    for (int t = 0; t < T; ++t) {
      const __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(pairs_dot_sums(sc16, x, t0 + t, sb), 5));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_set1_ps(x.d(t0 + t)[sb])), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

struct Q6_Kx8 {
  static constexpr ActFormat kAct = ActFormat::kQ8_K;
  static constexpr int kTokens = 2;
  template <int T>
  static void tile(const uint8_t* g, int64_t k, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
    group_tile_q6_k<T>(g, k / 256, x, t0, y, ldy);
  }
};


// Q5_K decode (one token): Q5_KUnpacked's values assembled in registers and
// met at once, no buffer; the same exact integer sums per super-block and
// the same float steps as the unpacked tiles.
// Each line of nibbles and its line of fifth bits are loaded once for both
// sub-blocks they hold (low nibbles: sub-block 2J, high: 2J + 1); loading them
// per sub-block held one core at ~20 GB/s. Integer sums are exact, so their
// order is free.
template <int J>
inline __m256i q5_k_chunk_dot(const uint8_t* p, const UnpackedSuperBlock& u, const uint8_t* xq, __m256i isum) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int piece = 0; piece < 2; ++piece) {
    __m256i s16_lo = _mm256_setzero_si256(), s16_hi = _mm256_setzero_si256();
    for (int c = 4 * piece; c < 4 * piece + 4; ++c) {
      const __m256i v = load256(p + 128 + 256 * J + 32 * c), h = load256(p + 1152 + 32 * c);
      const __m256i q_lo = _mm256_or_si256(_mm256_and_si256(v, m4), bit_to_16<2 * J>(h));
      const __m256i q_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), bit_to_16<2 * J + 1>(h));
      s16_lo = _mm256_add_epi16(s16_lo, _mm256_maddubs_epi16(q_lo, broadcast4(xq + 64 * J, c)));
      s16_hi = _mm256_add_epi16(s16_hi, _mm256_maddubs_epi16(q_hi, broadcast4(xq + 64 * J + 32, c)));
    }
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16_lo, u.scale[2 * J]));
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16_hi, u.scale[2 * J + 1]));
  }
  return isum;
}

void group_tile_q5_k_decode(const uint8_t* g, int64_t n_sb, const ActRows& x, int64_t t, float* y) {
  constexpr size_t kBlock = Q5_KUnpacked::kBlockBytes;
  __m256 acc = _mm256_setzero_ps();
  UnpackedSuperBlock u;  // scales only: q stays unused
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* p = g + static_cast<size_t>(sb) * kBlock;
    for (size_t line = 0; line < kBlock; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + 2 * kBlock + line), _MM_HINT_T0);
    }
    Q5_KUnpacked::unpack_scales(p, u);
    const uint8_t* xq = x.qs(t) + 256 * sb;
    __m256i isum = _mm256_setzero_si256();
    isum = q5_k_chunk_dot<0>(p, u, xq, isum);
    isum = q5_k_chunk_dot<1>(p, u, xq, isum);
    isum = q5_k_chunk_dot<2>(p, u, xq, isum);
    isum = q5_k_chunk_dot<3>(p, u, xq, isum);
    acc = Q5_KUnpacked::finish(u, isum, x, t, sb, acc);
  }
  _mm256_storeu_ps(y, acc);
}

struct Q5_Kx8 {
  static constexpr ActFormat kAct = ActFormat::kQ8_K;
  static constexpr int kTokens = 1;
  template <int T>
  static void tile(const uint8_t* g, int64_t k, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
    static_assert(T == 1, "Q5_K has a direct kernel for one token only");
    group_tile_q5_k_decode(g, k / 256, x, t0, y + t0 * ldy);
  }
};


// ---- Q2_K and Q3_K x Q8_K (layout and unpacking: interleaved_unpack.h) ----

// One half (128 elements) of a super-block for one token: 8 lines, 4 values
// each, summed in int16 per sub-block and scaled into isum.
template <class K, int H>
inline __m256i half_2bit_dot(const uint8_t* p, const UnpackedSuperBlock& u, const uint8_t* xq, __m256i isum) {
  __m256i s16[4][2];
  for (int j = 0; j < 4; ++j) s16[j][0] = s16[j][1] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int mm = 0; mm < 8; ++mm) {
    const __m256i qs = load256(p + K::kQs + 32 * (8 * H + mm));
    __m256i hm = _mm256_setzero_si256();
    if constexpr (K::kHasHmask) hm = load256(p + K::kHmask + 32 * mm);
    const uint8_t* x = xq + 128 * H;
    __m256i* s = &s16[0][mm / 4];  // s[2j]: sub-block 8H + 2j + mm / 4
    s[0] = _mm256_add_epi16(s[0], _mm256_maddubs_epi16(K::template values<0, H>(qs, hm), broadcast4(x, mm)));
    s[2] = _mm256_add_epi16(s[2], _mm256_maddubs_epi16(K::template values<1, H>(qs, hm), broadcast4(x + 32, mm)));
    s[4] = _mm256_add_epi16(s[4], _mm256_maddubs_epi16(K::template values<2, H>(qs, hm), broadcast4(x + 64, mm)));
    s[6] = _mm256_add_epi16(s[6], _mm256_maddubs_epi16(K::template values<3, H>(qs, hm), broadcast4(x + 96, mm)));
    asm("" : "+x"(s[0]), "+x"(s[2]), "+x"(s[4]), "+x"(s[6]));  // sums stay in registers (see unpacked_tile)
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16[j][0], u.scale[8 * H + 2 * j]));
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16[j][1], u.scale[8 * H + 2 * j + 1]));
  }
  return isum;
}

// Decode (one token) straight from the interleaved group: the unpacked
// tiles' integer sums per super-block and their float steps, so a token's
// results are the same alone and in a batch.
template <class K>
void group_tile_2bit_decode(const uint8_t* g, int64_t n_sb, const ActRows& x, int64_t t, float* y) {
  __m256 acc = _mm256_setzero_ps();
  UnpackedSuperBlock u;  // scales only: q stays unused
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* p = g + static_cast<size_t>(sb) * K::kBlockBytes;
    for (size_t line = 0; line < K::kBlockBytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + 2 * K::kBlockBytes + line), _MM_HINT_T0);
    }
    K::unpack_scales(p, u);
    const uint8_t* xq = x.qs(t) + 256 * sb;
    __m256i isum = half_2bit_dot<K, 0>(p, u, xq, _mm256_setzero_si256());
    isum = half_2bit_dot<K, 1>(p, u, xq, isum);
    acc = K::finish(u, isum, x, t, sb, acc);
  }
  _mm256_storeu_ps(y, acc);
}

template <class K>
struct Bits2x8 {
  static constexpr ActFormat kAct = ActFormat::kQ8_K;
  static constexpr int kTokens = 1;
  template <int T>
  static void tile(const uint8_t* g, int64_t k, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
    static_assert(T == 1, "Q2_K / Q3_K have a direct kernel for one token only");
    group_tile_2bit_decode<K>(g, k / 256, x, t0, y + t0 * ldy);
  }
};

// ---- IQ4_XS x Q8_K ----
//
// Line c (interleave.h) holds qs[4c .. 4c + 3] of each row: sub-block c / 4,
// low nibbles elements 32(c / 4) + 4(c % 4) + i, high ones 16 further. Each
// nibble indexes the 16 int8 values (vpshufb); the signed values meet the
// activations as Q8_0's do (|w| against the activation with w's sign), and
// vpmaddwd against the sub-block's scale widens and scales the pairs at once
// (|pair| <= 2 x 127 x 127, times |scale| <= 32: exact in int32).

// One group of 8 rows against Q8_K activation rows [t0, t0 + T); the levels
// and d factor of Block (kLevelsOf, kDScaleOf: IQ4_XS's, or a widened IQ3
// format's on the same layout).
template <class Block, int T>
void group_tile_iq4_xs(const uint8_t* g, int64_t n_sb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  constexpr size_t kBlock = 8 * 136;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i values = _mm256_broadcastsi128_si256(load128(reinterpret_cast<const uint8_t*>(kLevelsOf<Block>)));
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* p = g + static_cast<size_t>(sb) * kBlock;
    for (size_t line = 0; line < kBlock; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + 2 * kBlock + line), _MM_HINT_T0);
    }
    __m256i sc[8];
    unpack_iq4_xs_scales(p, sc);
    __m256i isum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int ib = 0; ib < 8; ++ib) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i v = load256(p + 64 + 32 * (4 * ib + c));
        const __m256i lo = _mm256_shuffle_epi8(values, _mm256_and_si256(v, m4));
        const __m256i hi = _mm256_shuffle_epi8(values, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        const __m256i alo = _mm256_sign_epi8(lo, lo), ahi = _mm256_sign_epi8(hi, hi);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const uint8_t* xq = x.qs(t0 + t) + 256 * sb + 32 * ib;
          const __m256i plo = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(broadcast4(xq, c), lo));
          const __m256i phi = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(broadcast4(xq, c + 4), hi));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(plo, sc[ib]));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(phi, sc[ib]));
          asm("" : "+x"(isum[t]));  // as above
        }
      }
    }
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(load128(p)), _mm256_set1_ps(kDScaleOf<Block>));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(x.d(t0 + t)[sb])), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

template <class Block>
struct IQ4_XSx8 {
  static constexpr ActFormat kAct = ActFormat::kQ8_K;
  static constexpr int kTokens = 4;
  template <int T>
  static void tile(const uint8_t* g, int64_t k, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
    group_tile_iq4_xs<Block, T>(g, k / 256, x, t0, y, ldy);
  }
};

// One unpacked group against activation rows [t0, t0 + T). Flat arrays and
// forced unrolling keep the 2T accumulators in registers (see groups_tile_f).
template <class K, int T>
void unpacked_tile(const UnpackedSuperBlock* u, int64_t n_sb, const ActRows& x, int64_t t0, float* y, int64_t ldy) {
  __m256 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const UnpackedSuperBlock& b = u[sb];
    const uint8_t* xq[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) xq[t] = x.qs(t0 + t) + 256 * sb;
    __m256i isum[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#if TOKAMAK_MATMUL_INT_VNNI
    // VPDPBUSD sums in int32: a whole sub-block at a time, then its scale
    // (the pair's high half, sign-extended) by vpmulld; the same exact sums.
    for (int sub = 0; sub < 64 / K::kScaleLines; ++sub) {
      __m256i s32[T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) s32[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int l = 0; l < K::kScaleLines; ++l) {
        const int line = sub * K::kScaleLines + l;
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.q + 32 * line));
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          s32[t] = _mm256_dpbusd_avx_epi32(s32[t], w, broadcast4(xq[t], line));
          asm("" : "+x"(s32[t]));  // as below
        }
      }
      const __m256i sc = _mm256_srai_epi32(b.scale[sub], 16);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s32[t], sc));
    }
#else
    for (int piece = 0; piece < 64 / K::kPieceLines; ++piece) {
      __m256i s16[T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) s16[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int l = 0; l < K::kPieceLines; ++l) {
        const int line = piece * K::kPieceLines + l;
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.q + 32 * line));
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(w, broadcast4(xq[t], line)));
          // Pins the sum to a register here: GCC otherwise reassociates the
          // integer adds into a tree over all lines' products, which it
          // keeps on the stack (half the speed).
          asm("" : "+x"(s16[t]));
        }
      }
      const __m256i sc = b.scale[piece * K::kPieceLines / K::kScaleLines];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
    }
#endif
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[t] = K::finish(b, isum[t], x, t0 + t, sb, acc[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

// The tensor's last n_rows % 8 rows, stored plain, through the plain kernel.
void gemm_plain_tail(const GemmArgs& a) {
  const int64_t groups = a.n_rows / kInterleaveRows;
  if (groups * kInterleaveRows == a.n_rows) return;
  GemmArgs tail = a;
  tail.w = a.w + static_cast<size_t>(groups) * kInterleaveRows * a.w_stride;
  tail.n_rows = a.n_rows - groups * kInterleaveRows;
  tail.y = a.y + groups * kInterleaveRows;
  gemm_kernel_avx2(a.type).fn(tail);
}

// Each group in F's token tiles, then the plain tail. Decode (one token)
// reads its groups one after the other, one stream per thread: Q8_0 read two
// groups side by side (each activation broadcast serving both), which a Zen 5
// core streamed ~30% slower (matmul_bench GemvX8/q8_0 threads:1,
// TOKAMAK_BENCH_ISA=avx2, 4 alternations: 27 -> 38 GB/s; 2 threads 38-43 ->
// 45; the VNNI kernels learned the same, matmul_avx512_vnni_interleaved.cpp).
template <class F>
void gemm_interleaved(const GemmArgs& a) {
  const ActRows x{reinterpret_cast<const uint8_t*>(a.act), a.act_stride, act_layout(F::kAct, a.k)};
  const int64_t groups = a.n_rows / kInterleaveRows;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* w = reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(g) * kInterleaveRows * a.w_stride;
    float* y = a.y + g * kInterleaveRows;
    int64_t t = 0;
    for (; t + F::kTokens <= a.n_tokens; t += F::kTokens) F::template tile<F::kTokens>(w, a.k, x, t, y, a.ldy);
    for (; t < a.n_tokens; ++t) F::template tile<1>(w, a.k, x, t, y, a.ldy);
  }
  gemm_plain_tail(a);
}

// The last n % T tokens: one tile of exactly that many.
template <class K, int T>
void unpacked_rest(const UnpackedSuperBlock* u, int64_t n_sb, const ActRows& x, int64_t t0, int64_t rest, float* y, int64_t ldy) {
  if constexpr (T > 0) {
    if (rest == T) {
      unpacked_tile<K, T>(u, n_sb, x, t0, y, ldy);
    } else {
      unpacked_rest<K, T - 1>(u, n_sb, x, t0, rest, y, ldy);
    }
  }
}

// Token tile over unpacked groups: 2T accumulators, a line and a broadcast.
constexpr int kUnpackedTokens = 6;

// Below K::kMinTokens tokens the direct kernels run (Q4_K, Q6_K: unpacking a
// group costs about what one token's pass over it does).
template <class K, class Direct = void>
void gemm_k_quant(const GemmArgs& a) {
  if constexpr (!std::is_void_v<Direct>) {
    if (a.n_tokens < K::kMinTokens) {
      gemm_interleaved<Direct>(a);
      return;
    }
  }
  const ActRows x{reinterpret_cast<const uint8_t*>(a.act), a.act_stride, act_layout(ActFormat::kQ8_K, a.k)};
  const int64_t n_sb = a.k / 256;
  thread_local std::vector<UnpackedSuperBlock> unpacked;
  if (unpacked.size() < static_cast<size_t>(n_sb)) unpacked.resize(static_cast<size_t>(n_sb));
  const int64_t groups = a.n_rows / kInterleaveRows;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* w = reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(g) * kInterleaveRows * a.w_stride;
    for (int64_t sb = 0; sb < n_sb; ++sb) K::unpack(w + static_cast<size_t>(sb) * K::kBlockBytes, unpacked[static_cast<size_t>(sb)]);
    float* y = a.y + g * kInterleaveRows;
    int64_t t = 0;
    for (; t + kUnpackedTokens <= a.n_tokens; t += kUnpackedTokens) unpacked_tile<K, kUnpackedTokens>(unpacked.data(), n_sb, x, t, y, a.ldy);
    unpacked_rest<K, kUnpackedTokens - 1>(unpacked.data(), n_sb, x, t, a.n_tokens - t, y, a.ldy);
  }
  gemm_plain_tail(a);
}

// ---- F16 and BF16 x f32 (activations rounded to the weight's type) ----
//
// Element i of a group is the 8 rows' weights side by side: one conversion
// gives a register of 8 rows, which meets activation i of each token
// broadcast. A 2-group x 6-token tile does 12 FMAs per 2 conversions and 6
// broadcasts (the plain layout's dot per row and token needs a conversion
// per 8 FMAs and a horizontal sum at the end). Each output element is one
// lane: acc = fma(w[i], x[i], acc) for i in order, for every tile shape.
// Tried and slower or no faster on Zen 3: 1 group x 12 tokens (13 loads per
// 12 FMAs), 3 x 4 (no spare register), converting 256 elements of a pair
// of groups to an f32 buffer in L1 once for all token tiles.

struct F16x8 {
  static constexpr ActFormat kAct = ActFormat::kF32RoundF16;
  static __m256 load(const uint8_t* p) { return _mm256_cvtph_ps(load128(p)); }
};
struct BF16x8 {
  static constexpr ActFormat kAct = ActFormat::kF32RoundBF16;
  static __m256 load(const uint8_t* p) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16)); }
};

// Groups g0 .. g0 + G - 1 against tokens t0 .. t0 + T - 1.
template <class F, int G, int T>
void groups_tile_f(const GemmArgs& a, int64_t g0, int64_t t0) {
  const size_t group_bytes = kInterleaveRows * a.w_stride;
  const uint8_t* w = reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(g0) * group_bytes;
  // Flat arrays and forced unrolling: GCC otherwise keeps the accumulators in
  // memory and stores all of them every element (half the speed).
  const float* x[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(a.act) + static_cast<size_t>(t0 + t) * a.act_stride);
  __m256 acc[G * T];
#pragma GCC unroll 32
  for (int j = 0; j < G * T; ++j) acc[j] = _mm256_setzero_ps();
  const int64_t k = a.k;
  for (int64_t i = 0; i < k; ++i) {
    if (T == 1 && i % 4 == 0) {  // a 64-byte line of each group every 4 elements
      const size_t at = prefetch_offset_f16(i, group_bytes, G);
      for (int g = 0; g < G; ++g) _mm_prefetch(reinterpret_cast<const char*>(w + static_cast<size_t>(g) * group_bytes + at), _MM_HINT_T0);
    }
    __m256 wv[G];
    for (int g = 0; g < G; ++g) wv[g] = F::load(w + static_cast<size_t>(g) * group_bytes + 16 * static_cast<size_t>(i));
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_broadcast_ss(x[t] + i);
      for (int g = 0; g < G; ++g) acc[g * T + t] = _mm256_fmadd_ps(wv[g], xv, acc[g * T + t]);
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(a.y + (t0 + t) * a.ldy + (g0 + g) * kInterleaveRows, acc[g * T + t]);
}

// Groups g0 .. g0 + G - 1 against every token: 6-token tiles, then the rest in one.
template <class F, int G>
void groups_f(const GemmArgs& a, int64_t g0) {
  constexpr int kTokens = 6;
  int64_t t = 0;
  for (; t + kTokens <= a.n_tokens; t += kTokens) groups_tile_f<F, G, kTokens>(a, g0, t);
  switch (a.n_tokens - t) {
    case 5: groups_tile_f<F, G, 5>(a, g0, t); break;
    case 4: groups_tile_f<F, G, 4>(a, g0, t); break;
    case 3: groups_tile_f<F, G, 3>(a, g0, t); break;
    case 2: groups_tile_f<F, G, 2>(a, g0, t); break;
    case 1: groups_tile_f<F, G, 1>(a, g0, t); break;
    default: break;
  }
}

template <class F>
void gemm_interleaved_f(const GemmArgs& a) {
  const int64_t groups = a.n_rows / kInterleaveRows;
  int64_t g = 0;
  if (a.n_tokens == 1) {
    // Decode: 4 groups keep 4 independent FMA chains in flight.
    for (; g + 4 <= groups; g += 4) groups_tile_f<F, 4, 1>(a, g, 0);
  }
  for (; g + 2 <= groups; g += 2) groups_f<F, 2>(a, g);
  if (g < groups) groups_f<F, 1>(a, g);
  gemm_plain_tail(a);
}

// The kernel of type t (none: not interleaved here).
GemmKernel interleaved_kernel(DType t) {
  switch (t) {
    case DType::Q4_0: return {gemm_interleaved<Q4_0x8>, ActFormat::kQ8_0, true};
    case DType::Q8_0: return {gemm_interleaved<Q8_0x8>, ActFormat::kQ8_0, true};
    case DType::Q4_1: return {gemm_interleaved<Q4_1x8>, ActFormat::kQ8_0, true};
    case DType::Q5_0: return {gemm_interleaved<Q5_0x8>, ActFormat::kQ8_0, true};
    case DType::Q5_1: return {gemm_interleaved<Q5_1x8>, ActFormat::kQ8_0, true};
    case DType::IQ4_NL: return {gemm_interleaved<IQ4_NLx8>, ActFormat::kQ8_0, true};
    case DType::Q2_K: return {gemm_k_quant<Q2_KUnpacked, Bits2x8<Q2_KUnpacked>>, ActFormat::kQ8_K, true};
    case DType::Q3_K: return {gemm_k_quant<Q3_KUnpacked, Bits2x8<Q3_KUnpacked>>, ActFormat::kQ8_K, true};
    case DType::Q4_K: return {gemm_k_quant<Q4_KUnpacked, Q4_Kx8>, ActFormat::kQ8_K, true};
    case DType::IQ4_XS: return {gemm_interleaved<IQ4_XSx8<BlockIQ4_XS>>, ActFormat::kQ8_K, true};
    case DType::IQ3_S_WIDE: return {gemm_interleaved<IQ4_XSx8<BlockIQ3_S_WIDE>>, ActFormat::kQ8_K, true};
    case DType::IQ3_XXS_WIDE: return {gemm_interleaved<IQ4_XSx8<BlockIQ3_XXS_WIDE>>, ActFormat::kQ8_K, true};
    case DType::Q5_K: return {gemm_k_quant<Q5_KUnpacked, Q5_Kx8>, ActFormat::kQ8_K, true};
    case DType::Q6_K: return {gemm_k_quant<Q6_KUnpacked, Q6_Kx8>, ActFormat::kQ8_K, true};
    case DType::F16: return {gemm_interleaved_f<F16x8>, ActFormat::kF32RoundF16, true};
    case DType::BF16: return {gemm_interleaved_f<BF16x8>, ActFormat::kF32RoundBF16, true};
    default: return {};
  }
}

