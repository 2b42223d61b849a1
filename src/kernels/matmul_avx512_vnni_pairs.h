// Helpers shared by the AVX-512 VNNI kernels over interleaved weights
// (matmul_avx512_vnni_interleaved.cpp: the 32-element formats and IQ4_XS;
// matmul_avx512_vnni_kquants.cpp: Q2_K .. Q6_K). Included after
// TOKAMAK_TARGET_REGION(TOKAMAK_ISA_AVX512_VNNI), after interleaved_unpack.h.
#pragma once

namespace tokamak::kernels {
namespace {

// [a, b]: group g's half in the low 256 bits, group g + 1's in the high.
inline __m512i halves(__m256i a, __m256i b) { return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1); }
inline __m512 halves(__m256 a, __m256 b) { return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1); }
// The 8 fp16 values at a and the 8 at b, as floats, a's in the low half.
inline __m512 fp16_halves(const uint8_t* a, const uint8_t* b) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(load128(a)), load128(b), 1));
}
// Activations 4j .. 4j + 3 of a block in every 32-bit lane (a broadcast load).
inline __m512i broadcast4_16(const uint8_t* xq, int j) {
  int32_t v;
  std::memcpy(&v, xq + 4 * j, sizeof(v));
  return _mm512_set1_epi32(v);
}

// Tokens per tile: T sums and T float accumulators in registers.
constexpr int kTokens = 8;
// How far ahead a prompt's pair tiles prefetch each group's weights.
constexpr size_t kPrefetchBlocks = 16;
// Decode (group_decode_32) prefetches ~6 KiB ahead, whole blocks: 24 of
// Q8_0's, 45 of Q4_0's (as the AVX2 kernels' kPrefetchBytes32). 16 of Q4_0's,
// 2.3 KiB, streamed one core at 24-27 GB/s against ~30-32 (tg64 Q4_0, 4
// alternations with ik_llama.cpp, twice: 59-61 -> 67-69 t/s); 4.25 KiB then
// held two cores to ~60 GB/s when the host's read bandwidth was ~80: 6.4 KiB
// made tg64 Q4_0 3% faster there (median of 36 pairs, 97 -> 101 t/s) and
// level at ~48 GB/s, 8.5 KiB ~2% slower at ~48 GB/s, L2 prefetches
// (prefetcht1) 16-32 KiB ahead 4-10% slower.
constexpr size_t kDecodePrefetchBytes = 24 * (8 * 34);  // 24 blocks of a Q8_0 group

// Rows [r, n_rows) of a (r a multiple of 8): the AVX2 kernel's share.
GemmArgs rows_from(const GemmArgs& a, int64_t r) {
  GemmArgs rest = a;
  rest.w = a.w + static_cast<size_t>(r) * a.w_stride;
  rest.y = a.y + r;
  rest.n_rows = a.n_rows - r;
  return rest;
}

// ---- One token: blocks b and b + 1 of one group side by side ----
//
// A decode reads each weight once, so the order of its reads matters as much
// as its instruction count. The pair kernels read groups g and g + 1 as two
// streams, which a Zen 5 host (2 threads) streams ~20% slower than one: a
// bare read loop of the same pattern, 39 against 51 GB/s; GemvX8 ffn_up Q4_K
// 34 GB/s on them against 40-45 on the AVX2 kernel's one stream. Here a register
// holds blocks b and b + 1 of one group (8 rows each), so each thread reads
// its groups as one stream, with VNNI's instructions. Each half's integer sum
// is exact and its float step is the AVX2 kernel's, in block order, so a
// token alone is bitwise the same token in a batch.

// Activations 4j .. 4j + 3 of x0 in the low 256 bits, of x1 in the high.
inline __m512i broadcast4_two(const uint8_t* x0, const uint8_t* x1, int j) {
  int32_t a, b;
  std::memcpy(&a, x0 + 4 * j, sizeof(a));
  std::memcpy(&b, x1 + 4 * j, sizeof(b));
  return halves(_mm256_set1_epi32(a), _mm256_set1_epi32(b));
}
inline __m256i low_half(__m512i v) { return _mm512_castsi512_si256(v); }
inline __m256i high_half(__m512i v) { return _mm512_extracti64x4_epi64(v, 1); }

// One token's activations in the form the decode kernels' broadcast
// operands come from (GemmKernel::decode_operands, built once per call by
// Matmul::run): for the pair of blocks 2p and 2p + 1 (kBlockBytes
// activations each), entry e holds bytes 16e .. 16e + 15 of block 2p in
// 128-bit lanes 0 and 1 and those of block 2p + 1 in lanes 2 and 3 (an odd
// count's last block meets itself). Operand i (dword i of each block, in
// every lane of its half) is then a load and an in-lane vpshufd, where two
// broadcasts and an insert assembled it for every group of rows (GemvX8Hot
// one thread, Zen 5: Q4_K 9.0 -> 8.3 us, Q8_0 5.35 -> 4.1, Q4_0 7.2 -> 6.75).
// Twice the activations' bytes: finished operands (16 times their bytes)
// were faster at k = 2048 but, at 45 KiB for ffn_down's k = 5632, pushed the
// weights out of L1 (GemvX8 q4_K ffn_down one thread 190 -> 327 us).
template <int kBlockBytes>
void build_pair_operands(const std::byte* act, int64_t k, std::byte* out) {
  const uint8_t* qs = reinterpret_cast<const uint8_t*>(act);
  const int64_t n_blocks = k / kBlockBytes;
  __m512i* e = reinterpret_cast<__m512i*>(out);
  for (int64_t b = 0; b < n_blocks; b += 2) {
    const uint8_t* x0 = qs + static_cast<size_t>(b) * kBlockBytes;
    const uint8_t* x1 = b + 1 < n_blocks ? x0 + kBlockBytes : x0;
    for (int i = 0; i < kBlockBytes; i += 16) {
      _mm512_store_si512(e++, halves(_mm256_broadcastsi128_si256(load128(x0 + i)), _mm256_broadcastsi128_si256(load128(x1 + i))));
    }
  }
}
// The entries of the pair starting at block b (even) in a call's operands.
template <int kBlockBytes>
const __m512i* pair_entries(const GemmArgs& a, int64_t b) {
  return reinterpret_cast<const __m512i*>(a.decode_operands) + kBlockBytes / 32 * b;
}

// Operand i of a pair's entries at xb: dword i of the first block in the low
// 256 bits, of the second in the high. i is a constant once the callers'
// loops are unrolled, and the switch folds away.
[[gnu::always_inline]] inline __m512i pair_operand(const __m512i* xb, int i) {
  const __m512i e = _mm512_load_si512(xb + i / 4);
  switch (i % 4) {
    case 0: return _mm512_shuffle_epi32(e, _MM_PERM_AAAA);
    case 1: return _mm512_shuffle_epi32(e, _MM_PERM_BBBB);
    case 2: return _mm512_shuffle_epi32(e, _MM_PERM_CCCC);
    default: return _mm512_shuffle_epi32(e, _MM_PERM_DDDD);
  }
}

// The decode kernels' walk over one group's blocks (super-blocks) of
// kBlock bytes: fn(b, both, p0, p1) for blocks b and b + 1 side by side, in
// order (both false: the last block of an odd count meets itself in the
// high half, whose sums go unused), with the lines `ahead` blocks on
// prefetched. Callers mark fn always_inline: a call per pair kept Q2_K's
// decode ~7% slower (GemvX8 q2_K ffn_up one thread).
template <size_t kBlock, class Fn>
[[gnu::always_inline]] inline void for_each_block_pair(const uint8_t* g, int64_t n, size_t ahead, Fn fn) {
  for (int64_t b = 0; b < n; b += 2) {
    const bool both = b + 1 < n;
    const uint8_t* p0 = g + static_cast<size_t>(b) * kBlock;
    const uint8_t* p1 = both ? p0 + kBlock : p0;
    for (size_t line = 0; line < 2 * kBlock; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p0 + ahead * kBlock + line), _MM_HINT_T0);
    }
    fn(b, both, p0, p1);
  }
}

// One token: decode(group, x, y) for each group of 8 rows in turn (one
// stream), then the plain tail rows on the AVX2 kernel.
template <class Decode>
void gemm_groups_decode(const GemmArgs& a, ActFormat act, Decode decode) {
  const ActRows x{reinterpret_cast<const uint8_t*>(a.act), a.act_stride, act_layout(act, a.k)};
  const size_t group_bytes = kInterleaveRows * a.w_stride;
  const int64_t groups = a.n_rows / kInterleaveRows;
  for (int64_t gi = 0; gi < groups; ++gi) {
    decode(reinterpret_cast<const uint8_t*>(a.w) + static_cast<size_t>(gi) * group_bytes, x, a.y + gi * kInterleaveRows);
  }
  if (groups * kInterleaveRows < a.n_rows) gemm_kernel_avx2_interleaved(a.type).fn(rows_from(a, groups * kInterleaveRows));
}

}  // namespace
}  // namespace tokamak::kernels
