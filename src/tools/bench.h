// End-to-end speed of a model, as `tokamak bench` reports it (llama-bench's
// tests): prefill "ppN" runs one batch of N tokens; decode "tgN" runs N
// single-token steps from an empty cache. Both go through Forward and a
// KvCache, the path `tokamak run` takes. Beside each speed: the machine's read
// bandwidth over the mapped weights and the roofline it implies.
//
// Roofline: a forward pass reads every weight once (Model::weight_bytes()), so
// tokens/s <= bandwidth / weight_bytes per decode step, and a prefill batch of
// N tokens shares one read: N x bandwidth / weight_bytes. Decode is bound by
// that; prefill is compute bound, so its GFLOP/s says more.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/model.h"

namespace tokamak::tools {

struct TimingStats {
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};
// Of a non-empty sample; the median of an even count is the mean of the middle two.
TimingStats stats_of(std::vector<double> samples);

// The byte ranges one decode step reads, in the file mapping: those of
// Model::pass_tensors(), which add up to Model::weight_bytes().
std::vector<std::span<const std::byte>> weight_ranges(const Model& model);

// Floating-point operations of a forward pass of n_tokens after n_past cached
// positions, with n_logits rows of logits: 2 per weight per token in the
// matrix products plus QK^T and AV of attention. Norms and activations are left out.
double forward_flops(const ModelConfig& c, int64_t n_tokens, int64_t n_past, int64_t n_logits);

// One model's Forward context and a KV cache for `max_positions` (stored as
// `kv_format` says), reused across timings so that only the first run
// allocates. Tokens are random ids drawn from `seed`.
class ForwardTimer {
 public:
  ForwardTimer(const Model& model, ThreadPool& pool, int32_t max_positions, uint64_t seed,
               const kv::KvFormat& kv_format = {}, kernels::MatmulOptions matmul = {});
  // Seconds for one batch of n_tokens at positions 0..n-1, logits of the last.
  double prefill(int32_t n_tokens);
  // Seconds for n_tokens steps of one token each at positions ctx..ctx+n-1,
  // logits of each. Positions [0, ctx) first get random K/V, untimed: the
  // cost of attention depends on how many keys there are, not on their
  // values, and a real prefill of a long context would take far longer.
  double decode(int32_t n_tokens, int32_t ctx = 0);

 private:
  void fill_context(int32_t ctx);
  int32_t next_token();
  void check(int32_t n_tokens) const;

  const Model& model_;
  int32_t max_positions_;
  kv::KvCache kv_;
  Forward forward_;
  Batch batch_;
  uint64_t rng_;
};

struct BenchOptions {
  int32_t n_prompt = 512;  // 0: no prefill test
  int32_t n_gen = 128;     // 0: no decode test
  std::vector<int32_t> contexts = {0};  // a decode test after each of these context lengths
  kv::KvFormat kv_format;
  kernels::MatmulOptions matmul;  // the kernel variant (--isa)
  int repetitions = 5;
  int bandwidth_passes = 2;  // per repetition, the fastest counts
  uint64_t seed = 1234;
};

struct BenchResult {
  std::string test;  // "pp512", "tg128"
  int32_t n_prompt = 0;
  int32_t n_gen = 0;
  int32_t ctx = 0;  // positions in the cache before the decode test
  int threads = 0;
  TimingStats tokens_per_s;
  TimingStats seconds;
  double gflops = 0.0;                 // at the median speed
  double bandwidth_gbs = 0.0;          // 1e9 bytes/s, median over the repetitions
  size_t weight_bytes = 0;             // read per forward pass
  // Decode: the KV cache bytes a step reads, the mean over the test's steps
  // (kv_bytes_read); the bandwidth roofline counts them beside the weights.
  double kv_bytes = 0.0;
  double roofline_tokens_per_s = 0.0;  // see the top of this file; median over the repetitions
  double roofline_fraction = 0.0;      // median over the repetitions of (their speed / their roofline)
  // The compute ceiling (compute_roofline_tokens_per_s) and the speed as a
  // fraction of the lower of the two rooflines: the one that binds.
  double compute_roofline_tokens_per_s = 0.0;
  double binding_fraction = 0.0;
  double comm_ms_per_pass = 0.0;       // a model split across processes: this rank's communication per pass (mean)
};

// Tokens/s if a pass did nothing but read weight_bytes at bytes_per_s, with
// tokens_per_pass tokens sharing each read (a prefill's n; 1 for decode).
double roofline_tokens_per_s(double bytes_per_s, double weight_bytes, double tokens_per_pass);

// What one decode step's attention costs for the query at position `pos`,
// summed over the layers: the keys it reads (a sliding window caps them).
// KV bytes: each KV head's K and V rows, those in the f16 ring of mixed
// precision at f16's size. Multiply-adds: for each query head, head_dim for
// its score and head_dim for the weighted V row, per key.
int64_t attention_keys(const ModelConfig& c, int64_t pos);
double kv_bytes_read(const ModelConfig& c, const kv::KvLayout& layout, int64_t pos);
double attention_macs(const ModelConfig& c, int64_t pos);

// One measured run of a test: its wall time and the read bandwidth measured right before it.
struct Repetition {
  double seconds = 0.0;
  double bytes_per_s = 0.0;
};
// Fills r's timings, bandwidth, roofline and roofline fraction from the
// repetitions of a test of n_tokens tokens, against r.weight_bytes + r.kv_bytes.
void summarize(BenchResult& r, const std::vector<Repetition>& reps, int32_t n_tokens, double tokens_per_pass);

// The compute roofline: the matmul kernel of each weight type timed on this
// machine on a slice of one of the model's own tensors small enough to stay
// in L2 (so that memory cannot bound it), in multiply-adds per second, at
// n_tokens tokens a call (1: the decode GEMV; more: the prefill GEMM).
struct KernelRate {
  DType type = DType::F32;
  double macs_per_s = 0.0;
};
std::vector<KernelRate> measure_kernel_rates(const Model& model, ThreadPool& pool, const kernels::MatmulOptions& matmul,
                                             int32_t n_tokens);
// Tokens/s if a pass did nothing but its weight products at those rates:
// 1 / sum over the matrices of (elements / rate of their type). Norms and
// the rest are left out, so this is an upper bound; run_bench adds decode's
// attention (below).
double compute_roofline_tokens_per_s(const Model& model, const std::vector<KernelRate>& rates);

// The attention kernels' rate in the same sense: PagedAttention (the path a
// decode step takes, on `isa`, over the pool's threads) for one query token
// over one layer of keys stored as `kv_format` says, few enough to stay in
// L2 (~512 KiB of K and V a thread), in multiply-adds (attention_macs) per
// second. At long contexts attention's products, not the weights', bound a
// decode step on a CPU whose memory outruns its multipliers.
double measure_attention_rate(const Model& model, ThreadPool& pool, const kv::KvFormat& kv_format, kernels::Isa isa);
// The compute roofline of decode steps that each also run attention_macs
// multiply-adds at attention_macs_per_s: 1 / (1 / weights_tokens_per_s +
// macs / rate). Unchanged when macs or the rate is 0.
double with_attention(double weights_tokens_per_s, double macs, double attention_macs_per_s);

// Runs one unmeasured warm-up and `repetitions` measured runs of each test,
// measuring the bandwidth right before each run: on a shared machine the
// bandwidth moves by 1.5x within a minute, and a ratio of two measures taken
// together moves far less. Throws tokamak::Error on bad options.
std::vector<BenchResult> run_bench(const Model& model, ThreadPool& pool, const BenchOptions& options);

}  // namespace tokamak::tools
