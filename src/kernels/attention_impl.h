// Internal to attention_{scalar,avx2,avx512}.cpp: the tile loop of
// attention_chunk, written once over a vector-ops type V. Each of those files
// includes this inside its target region and instantiates it with its own V
// (in an anonymous namespace), so every instantiation is compiled for its ISA
// and stays local to its file.
//
// V provides, for arrays whose length is a multiple of V::kWidth:
//   dequant_row(KvType, const uint8_t* row, int d, float* dst)  bit-exact with dequantize_kv_row
//   dot(const float* a, const float* b, int d) -> float         fixed order
//   exp_shift(float* s, int n, float m)                          s[j] = exp(s[j] - m)
//   sum(const float* s, int n) -> float                          fixed order
//   max(const float* s, int n) -> float
//   scale(float* s, int n, float c)                              s[j] *= c
//   exp1(float x) -> float                                       the same exp, one value
//   axpy_tile(float* acc, float c, const float* p, const float* vt, int n, int d)
//       acc = acc * c + sum_j p[j] * vt[j * d ..], j in [0, n), in a fixed order
//   kTransposedScores: whether it also provides
//   transpose_tile(const float* kt, int d, float* ktt)  [kKeyTile][d] -> [d][kKeyTile]
//   load_transposed(KvType, const uint8_t* const* rows, int d, float* ktt) -> bool
//       the same from the kKeyTile rows as they lie, in registers (false: not for this type)
//   and the head-block operations of update_heads (below), which score the transposed tile
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention.h"
#include "kernels/prefetch.h"

namespace tokamak::kernels::detail {
// Internal linkage: each includer compiles these for its own ISA. With
// external linkage the linker kept one of the five same-named instantiations
// of for_each_run (scalar, AVX2, AVX-512, VNNI files) for all of them: the
// AVX2 one, so the scalar path ran AVX2 instructions (SIGILL on a CPU
// without them) and the AVX-512 kernels an out-of-line AVX2 walk.
namespace {

// Calls fn(type, first row, row bytes, j, count) for each run of rows that
// are adjacent in memory among K (or V) of kv head `head` at positions
// t0 + j, j < n. Rows adjacent in a block are adjacent in memory, so the
// block lookup happens once per run of rows, not once per row; in the
// planar pool (kv/kv_layout.h) so are a head's rows of consecutive blocks,
// and a run goes on into the next block when the table has it next in
// memory (a tile of 32 keys is then one run, not two).
template <class Fn>
void for_each_run(const KvView& kv, bool keys, int head, int64_t t0, int64_t n, Fn&& fn) {
  for (int64_t j = 0; j < n;) {
    const int64_t pos = t0 + j;
    const KvPages& pages = kv.pages(pos, keys);
    const int64_t r = pages.ring_rows > 0 ? pos % pages.ring_rows : pos;
    const int32_t row_bytes = keys ? pages.k_row_bytes : pages.v_row_bytes;
    const int64_t limit = std::min(n - j, kv.same_pages(pos, keys));
    int64_t run = std::min(limit, pages.block_size - pages.row_in_block(r));
    if (pages.ring_rows == 0 && (keys ? pages.k_block_stride : pages.v_block_stride) ==
                                    static_cast<int64_t>(pages.block_size) * row_bytes) {
      for (int64_t b = pages.block_of_row(r); run < limit && pages.block_table[b + 1] == pages.block_table[b] + 1; ++b) {
        run = std::min(limit, run + pages.block_size);
      }
    }
    const uint8_t* src = (keys ? pages.k_base : pages.v_base) + pages.row_offset_of_row(r, head, keys);
    fn(keys ? pages.k_type : pages.v_type, src, row_bytes, j, run);
    j += run;
  }
}

// A row of zeros as long as any head row (f32, the longest): the row of keys
// past a tile's end, whose scores are masked and weights 0. Zero bytes are 0
// in every KvType.
alignas(64) inline constexpr uint8_t kZeroKvRow[4 * kMaxHeadDim] = {};

// The cache lines of the tiles ahead, asked for before their use. A block's
// rows of one head are only block_size * row_bytes long, too short a stream
// for the hardware prefetcher to get ahead of a decode step bound by memory;
// in the planar pool a sequence whose blocks follow each other gives it one
// stream per head, and still the L2 stage below is worth ~2% of a decode
// step at 8K (Q4_0, q8 KV: off, 0.983x the step's speed over 5 pairs).
// Two tiles ahead, a tile's lines are asked into L2 at once as its rows are
// walked; one tile ahead, into L1. Kernels that can ask for the L1 lines a
// few at a time between pieces of their work on the current tile do (issue):
// a burst of a tile's ~70 requests (q8, head dim 64) from DRAM held every
// line fill buffer of the core and stalled the instructions behind it until
// most lines had arrived, so reading and computing took turns; dripped, the
// reads overlap the arithmetic. The others have them asked for at once.
// The L2 stage came when the integer kernels got fast enough that one tile of
// arithmetic (~350 ns) no longer covered a read from DRAM under load. The
// float tile step, whose f16 tile is ~130 lines, drips its L2 requests too
// (issue_far, at three points of the step): asked for at once they made a
// layer at 8K from DRAM ~20% slower than from L3 (attention_bench f16/8192
// 661-695 against 544-569 us), dripped 585-616 (hot 567-595).
class TilePrefetch {
 public:
  // Tiles ahead that gather walks (3 or 4 measured no faster than 2).
  static constexpr int kFar = 2;
  // drip: issue asks for the L1 lines a few at a time; else gather asks for
  // them at once (the f32 tile path: dripping made f16 KV at 8K 5% slower).
  // l2: whether gather asks for the far tile's lines into L2 (a kernel whose
  // tile takes long enough to cover a read from DRAM only pays for them).
  // l2_drip: the far tile's L2 requests wait for issue_far, a few at a time,
  // instead of going out at once as gather walks them; what a step leaves is
  // asked for at the next gather.
  explicit TilePrefetch(bool drip, bool l2 = true, bool l2_drip = false)
      : drip_(drip), l2_(l2), l2_drip_(l2_drip) {}
  // Walks the rows of keys [t0, t0 + n) of `head` (K and V), the tile kFar
  // steps ahead, and asks for their lines into L2 (with l2). The tile walked
  // by the call before becomes the one whose lines go into L1 (issue);
  // whatever was left of the previous one's is asked for first. The tile
  // walked kFar calls before is now the current one (rows()).
  void gather(const KvView& kv, int head, int64_t t0, int64_t n) {
    issue_all();
    issue_far(std::numeric_limits<int>::max());
    current_ = slot(1);
    near_ = {slots_[slot(1)].runs, slots_[slot(1)].n_runs};
    // Kept as runs of lines, not a line each: listing a tile's ~70 lines
    // one store at a time was 9% of a decode layer's attention at 8K. The
    // walk also notes each key's rows for the step that loads the tile
    // (rows()), which would otherwise walk the block table again.
    Slot& far = slots_[slot(kFar)];
    far.n_runs = 0;
    for (bool keys : {true, false}) {
      const uint8_t** row = keys ? far.rows.k : far.rows.v;
      for_each_run(kv, keys, head, t0, n, [&](KvType, const uint8_t* src, int32_t row_bytes, int64_t j, int64_t run) {
        for (int64_t r = 0; r < run; ++r) row[j + r] = src + r * row_bytes;
        const uintptr_t first = reinterpret_cast<uintptr_t>(src) & ~uintptr_t{63};
        const uintptr_t last = reinterpret_cast<uintptr_t>(src + run * row_bytes - 1) & ~uintptr_t{63};
        if (l2_ && !l2_drip_) {
          for (uintptr_t a = first; a <= last; a += 64) prefetch_l2(reinterpret_cast<const void*>(a));
        }
        far.runs[far.n_runs++] = {first, last + 64};
      });
      for (int64_t j = std::max<int64_t>(n, 0); j < kKeyTile; ++j) row[j] = kZeroKvRow;
    }
    if (l2_ && l2_drip_) far_ = {far.runs, far.n_runs};
    if (!drip_) issue_all();
  }
  // Asks for the next k lines of the far tile into L2 (l2_drip).
  void issue_far(int k) { far_.next<2>(k); }
  // Where K and V of each key of a tile lie: k[j], v[j] for keys t0 + j.
  struct TileRows {
    const uint8_t* k[kKeyTile];
    const uint8_t* v[kKeyTile];
  };
  // The rows of the tile gathered kFar calls before the latest: in
  // for_each_chunk_tile, those of the tile its step computes. Keys past the
  // tile's end read kZeroKvRow.
  const TileRows& rows() const { return slots_[current_].rows; }
  // Asks for the next k lines of the tile after the current one into L1.
  void issue(int k) { near_.next<1>(k); }
  void issue_all() { issue(std::numeric_limits<int>::max()); }

 private:
  struct LineRun {
    uintptr_t begin;  // first line's address
    uintptr_t end;    // past the last line
  };
  // A tile's runs, and where the requests for their lines have got to.
  struct LineCursor {
    const LineRun* runs = nullptr;
    int n_runs = 0;
    int next_run = 0;
    uintptr_t line = 0;  // next line of the current run
    uintptr_t end = 0;
    // Asks for the next k lines, in order, into L1 or L2 (kLevel).
    template <int kLevel>
    void next(int k) {
      for (int i = 0; i < k; ++i) {
        if (line == end) {
          if (next_run == n_runs) return;
          line = runs[next_run].begin;
          end = runs[next_run++].end;
        }
        if constexpr (kLevel == 1) {
          prefetch_l1(reinterpret_cast<const void*>(line));
        } else {
          prefetch_l2(reinterpret_cast<const void*>(line));
        }
        line += 64;
      }
    }
  };
  // A run is rows adjacent in one block: at most one per key, for K and V.
  static constexpr int kMaxRuns = 2 * kKeyTile;
  struct Slot {
    TileRows rows;
    LineRun runs[kMaxRuns];
    int n_runs = 0;
  };
  // The slot `ahead` tiles after the current one.
  int slot(int ahead) const { return (current_ + ahead) % (kFar + 1); }
  bool drip_;
  bool l2_;
  bool l2_drip_;
  Slot slots_[kFar + 1];
  int current_ = 0;
  LineCursor near_;  // the tile after the current one: L1 (issue)
  LineCursor far_;   // the tile kFar ahead, with l2_drip: L2 (issue_far)
};

// Query heads sharing a KV head at which the K tile is transposed once so
// that scores need no horizontal sums: the transposition costs about as much
// as a few queries' dot products. It depends on the model only, never on the
// batch, so each query's arithmetic stays fixed.
// Small heads transpose at any group: a head row of 16 or fewer values is
// one or two vectors, so a per-key dot is mostly its horizontal sum (stories260K,
// head_dim 8: attention was 39% of a decode step).
constexpr int kTransposeMinGroup = 4;
constexpr int kTransposeMaxSmallHead = 16;
inline bool transposed_scores(int group, int head_dim) {
  return group >= kTransposeMinGroup || head_dim <= kTransposeMaxSmallHead;
}

// One online-softmax step of one query over keys [jb, je) of a tile, a key's
// score a dot product: k_tile is [kKeyTile][d] (the transposed tile goes
// through update_heads). state: [m, l, acc[d]]; s: kKeyTile floats of scratch.
template <class V>
void update_query(const AttentionParams& p, const float* q, const float* k_tile, const float* vt, int jb, int je,
                  float scale, float* state, float* s) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int d = p.head_dim;
  // Whole vectors from a multiple of the width; keys outside [jb, je) -> -inf -> exp 0.
  const int vb = jb / V::kWidth * V::kWidth;
  const int ve = (je + V::kWidth - 1) / V::kWidth * V::kWidth;
  for (int j = jb; j < je; ++j) s[j] = V::dot(q, k_tile + static_cast<int64_t>(j) * d, d);
  V::scale(s + vb, ve - vb, scale);
  if (p.softcap > 0.0f) {
    for (int j = jb; j < je; ++j) s[j] = p.softcap * std::tanh(s[j] / p.softcap);
  }
  for (int j = vb; j < jb; ++j) s[j] = kNegInf;
  for (int j = je; j < ve; ++j) s[j] = kNegInf;
  const float m = state[0];
  const float m_new = std::max(m, V::max(s + vb, ve - vb));
  const float corr = m == kNegInf ? 0.0f : V::exp1(m - m_new);
  V::exp_shift(s + vb, ve - vb, m_new);
  state[0] = m_new;
  state[1] = state[1] * corr + V::sum(s + vb, ve - vb);
  V::axpy_tile(state + 2, corr, s + jb, vt + static_cast<int64_t>(jb) * d, je - jb, d);
}

// Query heads side by side: each phase of an online-softmax step (scores,
// max and exp, weighted values) runs for a block of heads before the next
// phase, so the heads' dependency chains overlap and each K or V vector loaded
// serves several heads. One query at a time (update_query), a tile's phases
// form one chain of ~300 cycles a query that the out-of-order core could
// not overlap with the next query's: f16 KV at 8K keys ran at a third of the
// FMA rate. attention_bench, a TinyLlama layer at 8K keys (8 heads a KV
// head), us: AVX-512 f16 845-867 -> 630-639, f32 950-970 -> 750-790; AVX2
// (blocks of 2 heads in its 16 registers) f16 1102-1147 -> 1071-1072, then
// blocks of 3 1071-1105 -> 1045-1096.
// The head-block operations of a V with kTransposedScores:
//   Vec, load, store, set1, fmadd, mul, add, sub, vmax, exp, max_all (the
//   largest lane in every lane), first (lane 0), reduce_add, load_kv (16 or 8
//   values of an f32, f16 or bf16 row as f32);
//   kScoreHeads: heads whose scores are summed side by side (kKeyTile /
//   kWidth sums each in registers); kValueHeads x kValueVectors: the
//   weighted-value sums in registers.

// s[h][j] = scale * (q_h . key j) over the transposed tile for the N heads,
// one sum per head and vector of keys, in order of c.
template <class V, int N>
[[gnu::always_inline]] inline void head_scores(const float* const* q, const float* ktt, int d, float scale,
                                               float (*s)[kKeyTile]) {
  constexpr int kv = kKeyTile / V::kWidth;
  typename V::Vec a[N][kv];
  for (int h = 0; h < N; ++h) {
    for (int u = 0; u < kv; ++u) a[h][u] = V::set1(0.0f);
  }
  for (int c = 0; c < d; ++c) {
    typename V::Vec k[kv];
    for (int u = 0; u < kv; ++u) k[u] = V::load(ktt + static_cast<int64_t>(c) * kKeyTile + u * V::kWidth);
#pragma GCC unroll 8
    for (int h = 0; h < N; ++h) {
      const typename V::Vec qc = V::set1(q[h][c]);
      for (int u = 0; u < kv; ++u) a[h][u] = V::fmadd(qc, k[u], a[h][u]);
    }
  }
  const typename V::Vec vs = V::set1(scale);
  for (int h = 0; h < N; ++h) {
    for (int u = 0; u < kv; ++u) V::store(s[h] + u * V::kWidth, V::mul(a[h][u], vs));
  }
}

// acc_h = acc_h * corr[h] + sum over keys [jb, je) of p[h][j] v_j for the N
// heads on NV vectors of values from `at`, in order of j.
template <class V, int N, int NV, class Rows>
[[gnu::always_inline]] inline void head_values(float* const* states, const float* corr, const float (*p)[kKeyTile],
                                               const Rows& rows, int jb, int je, int at) {
  typename V::Vec a[N][NV];
  for (int h = 0; h < N; ++h) {
    const typename V::Vec c = V::set1(corr[h]);
    for (int v = 0; v < NV; ++v) a[h][v] = V::mul(V::load(states[h] + 2 + at + v * V::kWidth), c);
  }
  for (int j = jb; j < je; ++j) {
    typename V::Vec x[NV];
    for (int v = 0; v < NV; ++v) x[v] = rows.load(j, at + v * V::kWidth);
#pragma GCC unroll 8
    for (int h = 0; h < N; ++h) {
      const typename V::Vec pj = V::set1(p[h][j]);
      for (int v = 0; v < NV; ++v) a[h][v] = V::fmadd(pj, x[v], a[h][v]);
    }
  }
  for (int h = 0; h < N; ++h) {
    for (int v = 0; v < NV; ++v) V::store(states[h] + 2 + at + v * V::kWidth, a[h][v]);
  }
}

// Where update_heads reads V: the tile dequantized to f32 ([kKeyTile][d]),
// or, for f32, f16 and bf16 rows, the rows where they lie, converted as they
// are read: each value is then converted once per block of heads instead of
// once, but the tile's stores and reloads go (attention_bench f16 at 8K: AVX2
// 1048-1055 -> 936-970 us hot, 1248-1249 -> 1049-1077 from DRAM; AVX-512
// 617-643 -> 544-591 hot, from DRAM level in one run and 768-785 -> 645-671
// in another).
template <class V>
struct DequantizedTile {
  const float* vt;
  int d;
  typename V::Vec load(int j, int c) const { return V::load(vt + static_cast<int64_t>(j) * d + c); }
};
template <class V, KvType T>
struct RowsInPlace {
  const uint8_t* const* rows;
  typename V::Vec load(int j, int c) const { return V::load_kv(T, rows[j], c); }
};

// One online-softmax step of n <= kMaxHeads query heads (rows q[h], states
// [m, l, acc[d]]) over keys [jb, je) of a transposed K tile, V read through
// vrows (one of the two above). A head's arithmetic depends on neither n nor
// the other heads.
constexpr int kMaxHeads = 8;
// L2 requests of the far tile (TilePrefetch::issue_far) at each of the float
// tile step's three points: an f16 tile of heads of 64 has ~130 lines.
constexpr int kFarLinesAStep = 48;
template <class V, class Rows>
void update_heads(const AttentionParams& p, const float* const* q, int n, const float* ktt, const Rows& vrows, int jb,
                  int je, float scale, float* const* states, TilePrefetch* ahead) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr int kv = kKeyTile / V::kWidth;
  const int d = p.head_dim;
  alignas(64) float s[kMaxHeads][kKeyTile];
  int h = 0;
  for (; h + V::kScoreHeads <= n; h += V::kScoreHeads) head_scores<V, V::kScoreHeads>(q + h, ktt, d, scale, s + h);
  if constexpr (V::kScoreHeads > 2) {
    for (; h + 2 <= n; h += 2) head_scores<V, 2>(q + h, ktt, d, scale, s + h);
  }
  for (; h < n; ++h) head_scores<V, 1>(q + h, ktt, d, scale, s + h);
  if (ahead) ahead->issue_far(kFarLinesAStep);
  float corr[kMaxHeads];
  for (h = 0; h < n; ++h) {
    if (p.softcap > 0.0f) {
      for (int j = jb; j < je; ++j) s[h][j] = p.softcap * std::tanh(s[h][j] / p.softcap);
    }
    for (int j = 0; j < jb; ++j) s[h][j] = kNegInf;
    for (int j = je; j < kKeyTile; ++j) s[h][j] = kNegInf;
  }
  for (h = 0; h < n; ++h) {
    typename V::Vec x[kv];
    typename V::Vec top = V::set1(states[h][0]);
    for (int u = 0; u < kv; ++u) top = V::vmax(top, x[u] = V::load(s[h] + u * V::kWidth));
    const float m = states[h][0];
    const typename V::Vec m_new = V::max_all(top);
    corr[h] = m == kNegInf ? 0.0f : V::first(V::exp(V::sub(V::set1(m), m_new)));
    for (int u = 0; u < kv; ++u) V::store(s[h] + u * V::kWidth, x[u] = V::exp(V::sub(x[u], m_new)));
    for (int w = kv / 2; w > 0; w /= 2) {  // pairwise: (x0 + x1) + (x2 + x3)
      for (int u = 0; u < w; ++u) x[u] = V::add(x[2 * u], x[2 * u + 1]);
    }
    states[h][0] = V::first(m_new);
    states[h][1] = states[h][1] * corr[h] + V::reduce_add(x[0]);
  }
  if (ahead) ahead->issue_far(kFarLinesAStep);
  constexpr int kSpan = V::kValueVectors * V::kWidth;  // values a block of sums covers
  for (h = 0; h < n; h += V::kValueHeads) {
    const int hn = std::min(V::kValueHeads, n - h);
    for (int at = 0; at < d;) {
      if (at + kSpan <= d) {
        if (hn == V::kValueHeads) {
          head_values<V, V::kValueHeads, V::kValueVectors>(states + h, corr + h, s + h, vrows, jb, je, at);
        } else if (V::kValueHeads > 2 && hn == 2) {
          head_values<V, 2, V::kValueVectors>(states + h, corr + h, s + h, vrows, jb, je, at);
        } else {
          for (int i = 0; i < hn; ++i) head_values<V, 1, V::kValueVectors>(states + h + i, corr + h + i, s + h + i, vrows, jb, je, at);
        }
        at += kSpan;
      } else {
        for (int i = 0; i < hn; ++i) head_values<V, 1, 1>(states + h + i, corr + h + i, s + h + i, vrows, jb, je, at);
        at += V::kWidth;
      }
    }
  }
}

// The transposed K tile, or a placeholder for ISAs without one.
template <class V>
constexpr int64_t kTransposedScoresFloats = V::kTransposedScores ? kKeyTile * kMaxHeadDim : 1;

// Per-call buffers of float_tile_step: a K tile, its transposition, a V tile
// and one query's scores.
template <class V>
struct FloatTileBuffers {
  alignas(64) float kt[kKeyTile * kMaxHeadDim];
  alignas(64) float ktt[kTransposedScoresFloats<V>];
  alignas(64) float vt[kKeyTile * kMaxHeadDim];
  alignas(64) float s[kKeyTile] = {};
};

// Keys a chunk's tiles cover for `tile`: [begin, end), begin a multiple of
// kKeyTile so that tiles stay aligned whatever a sliding window skips.
struct ChunkKeys {
  int64_t begin = 0;
  int64_t end = 0;
};
inline ChunkKeys chunk_keys(const AttentionParams& p, const QueryTile& tile, int64_t chunk) {
  int64_t max_pos = -1;
  int64_t min_first = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < tile.n_tokens; ++i) {
    max_pos = std::max<int64_t>(max_pos, tile.positions[i]);
    min_first = std::min(min_first, p.first_key(tile.positions[i]));
  }
  return {std::max(chunk * kKeyChunk, min_first / kKeyTile * kKeyTile), std::min((chunk + 1) * kKeyChunk, max_pos + 1)};
}

// Where the look-ahead of chunk `chunk`'s tile loop stops: the end of the
// next chunk's keys, or of this chunk's when the next has none.
inline int64_t look_ahead_end(const AttentionParams& p, const QueryTile& tile, int64_t chunk) {
  const ChunkKeys keys = chunk_keys(p, tile, chunk), next = chunk_keys(p, tile, chunk + 1);
  return next.begin == keys.end && next.end > next.begin ? next.end : keys.end;
}

// Keys [jb, je) of the tile at t0 (n_tile keys) that the query at `pos` attends.
struct TileKeys {
  int jb = 0;
  int je = 0;
};
inline TileKeys tile_keys(const AttentionParams& p, int64_t pos, int64_t t0, int64_t n_tile) {
  return {static_cast<int>(std::clamp<int64_t>(p.first_key(pos) - t0, 0, n_tile)),
          static_cast<int>(std::clamp<int64_t>(pos + 1 - t0, 0, n_tile))};
}

// Whether keys [t0, t0 + n) all lie in the main pages (none in mixed
// precision's f16 rows): the integer paths take only such tiles.
inline bool in_main_pages(const KvView& kv, int64_t t0, int64_t n) {
  return t0 + n <= kv.k_recent_begin && t0 + n <= kv.v_recent_begin;
}

// One online-softmax step of every query of `tile` over the n_tile keys at
// t0, whose rows are `rows` (TilePrefetch::rows), K and V dequantized to f32
// tiles first. With `ahead` (a TilePrefetch with l2_drip), the far tile's L2
// requests go out at its start, after the scores and after the softmax.
template <class V>
void float_tile_step(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t t0, int64_t n_tile,
                     const TilePrefetch::TileRows& rows, FloatTileBuffers<V>& b, float* partial,
                     TilePrefetch* ahead = nullptr) {
  if (ahead) ahead->issue_far(kFarLinesAStep);
  const int d = p.head_dim;
  const int group = p.group();
  const int64_t sf = attention_state_floats(p);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const bool transposed = V::kTransposedScores && transposed_scores(group, d);
  bool k_loaded = false;
  if constexpr (V::kTransposedScores) {
    // Straight from the rows into the transposed tile where the tile's keys
    // share one type that allows it (f32, f16, bf16), in registers: no
    // staging copy to store and reload (attention_bench, f16 KV at 8K: 1205
    // -> 1135 us, --isa avx2 1417 -> 1317; heads of 8 at 256 keys 6.8 -> 6.6
    // us). Keys past the end read kZeroKvRow: zeros in any type.
    k_loaded = transposed && kv.same_pages(t0, true) >= n_tile &&
               V::load_transposed(kv.pages(t0, true).k_type, rows.k, d, b.ktt);
  }
  if (!k_loaded) {
    // Keys past the end read zeros: they score 0, then are masked.
    const int64_t n_rows = transposed ? kKeyTile : n_tile;
    for (int64_t j = 0; j < n_rows; ++j) {
      V::dequant_row(kv.pages(t0 + std::min(j, n_tile - 1), true).k_type, rows.k[j], d, b.kt + j * d);
    }
    if constexpr (V::kTransposedScores) {
      if (transposed) V::transpose_tile(b.kt, d, b.ktt);
    }
  }
  // V rows read in place by the head blocks (RowsInPlace), else dequantized.
  bool v_in_place = false;
  if constexpr (V::kTransposedScores) {
    v_in_place = transposed && kv.same_pages(t0, false) >= n_tile && !kv_type_is_quantized(kv.pages(t0, false).v_type);
  }
  if (!v_in_place) {
    for (int64_t j = 0; j < n_tile; ++j) V::dequant_row(kv.pages(t0 + j, false).v_type, rows.v[j], d, b.vt + j * d);
  }
  for (int i = 0; i < tile.n_tokens; ++i) {
    const TileKeys keys = tile_keys(p, tile.positions[i], t0, n_tile);
    if (keys.jb >= keys.je) continue;
    if constexpr (V::kTransposedScores) {
      if (transposed) {
        for (int g0 = 0; g0 < group; g0 += kMaxHeads) {
          const int n = std::min(kMaxHeads, group - g0);
          const float* q[kMaxHeads];
          float* states[kMaxHeads];
          for (int h = 0; h < n; ++h) {
            q[h] = tile.q[i] + (static_cast<int64_t>(tile.kv_head) * group + g0 + h) * d;
            states[h] = partial + (static_cast<int64_t>(i) * group + g0 + h) * sf;
          }
          const auto step = [&](const auto& v_rows) {
            update_heads<V>(p, q, n, b.ktt, v_rows, keys.jb, keys.je, scale, states, ahead);
          };
          switch (v_in_place ? kv.pages(t0, false).v_type : KvType::Q8) {
            case KvType::F32: step(RowsInPlace<V, KvType::F32>{rows.v}); break;
            case KvType::F16: step(RowsInPlace<V, KvType::F16>{rows.v}); break;
            case KvType::BF16: step(RowsInPlace<V, KvType::BF16>{rows.v}); break;
            default: step(DequantizedTile<V>{b.vt, d});
          }
        }
        continue;
      }
    }
    for (int g = 0; g < group; ++g) {
      const float* q = tile.q[i] + (static_cast<int64_t>(tile.kv_head) * group + g) * d;
      update_query<V>(p, q, b.kt, b.vt, keys.jb, keys.je, scale,
                      partial + (static_cast<int64_t>(i) * group + g) * sf, b.s);
    }
  }
  if (ahead) ahead->issue_far(std::numeric_limits<int>::max());
}

// step(t0, n_tile) over the tiles of keys [begin, end) in key order (begin
// a multiple of kKeyTile). Before each step the rows of the tile kFar ahead
// are gathered into `ahead`, which asks for them into L2 and for the next
// tile's into L1 (the first tiles' at once); a dripping step asks for the L1
// lines as it goes, and whatever it leaves is asked for before the next step.
// The look-ahead runs on into keys [end, prefetch_end) (the next chunk's,
// end then a multiple of kKeyTile), so that a chunk's first tiles are on
// their way when it starts. Measured from DRAM, a layer at 8K q8 (older
// kernels, L1 only): 1 ahead 681 us, 2 ahead 684, 3 ahead 705, none 888; with
// the integer kernels twice as fast, L2 two ahead took a decode step's
// attention at 8K from ~250 to ~230 us a layer.
template <class Step>
void for_each_tile(const KvView& kv, int head, int64_t begin, int64_t end, int64_t prefetch_end, TilePrefetch& ahead,
                   Step&& step) {
  const auto keys_from = [&](int64_t t) { return std::max<int64_t>(0, std::min(kKeyTile, prefetch_end - t)); };
  if (begin < end) {
    for (int i = 0; i < TilePrefetch::kFar; ++i) {
      ahead.gather(kv, head, begin + i * kKeyTile, keys_from(begin + i * kKeyTile));
    }
  }
  for (int64_t t0 = begin; t0 < end; t0 += kKeyTile) {
    ahead.gather(kv, head, t0 + TilePrefetch::kFar * kKeyTile, keys_from(t0 + TilePrefetch::kFar * kKeyTile));
    step(t0, std::min(kKeyTile, end - t0));
  }
  ahead.issue_all();
}

// A chunk's tile loop: partial set to the empty state, then for_each_tile
// over the keys the chunk's tiles cover, looking ahead into the next chunk's
// (a decode step's task runs several chunks in a row).
template <class Step>
void for_each_chunk_tile(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk,
                         float* partial, TilePrefetch& ahead, Step&& step) {
  attention_reset(p, static_cast<int64_t>(tile.n_tokens) * p.group(), partial);
  const ChunkKeys keys = chunk_keys(p, tile, chunk);
  for_each_tile(kv, tile.kv_head, keys.begin, keys.end, look_ahead_end(p, tile, chunk), ahead, step);
}

template <class V>
void chunk_kernel(const AttentionParams& p, const KvView& kv, const QueryTile& tile, int64_t chunk, float* partial) {
  FloatTileBuffers<V> b;
  TilePrefetch ahead(false, true, true);
  for_each_chunk_tile(p, kv, tile, chunk, partial, ahead, [&](int64_t t0, int64_t n_tile) {
    float_tile_step<V>(p, kv, tile, t0, n_tile, ahead.rows(), b, partial, &ahead);
  });
}

}  // namespace
}  // namespace tokamak::kernels::detail
