#include "tools/bench.h"

#include <algorithm>
#include <chrono>

#include "core/bandwidth.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "model/paged_attention.h"

namespace tokamak::tools {
namespace {

int32_t blocks_for(const kv::KvLayout& layout, int32_t positions) {
  layout.validate();
  return (positions + layout.format.block_size - 1) / layout.format.block_size + layout.recent_blocks();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Units of work a second of `call` (work_per_call a call): the fastest of
// short windows over 0.1 s, not the mean over all of them. A roofline is what
// a kernel can reach, and on a shared host a busy neighbour takes whole
// windows away (one mean over 0.1 s put Q4_1's --isa avx2 decode roofline at
// 51 t/s, below the 64 t/s it decoded).
template <class Call>
double fastest_rate(double work_per_call, Call&& call) {
  constexpr double kSeconds = 0.1;
  constexpr double kWindow = 0.01;
  double best = 0.0;
  for (const auto start = std::chrono::steady_clock::now(); seconds_since(start) < kSeconds;) {
    const auto window = std::chrono::steady_clock::now();
    int64_t calls = 0;
    double elapsed = 0.0;
    do {
      call();
      ++calls;
      elapsed = seconds_since(window);
    } while (elapsed < kWindow);
    best = std::max(best, static_cast<double>(calls) * work_per_call / elapsed);
  }
  return best;
}

// Sequence 0 of `kv` gets random K and V rows at positions [0, n_positions)
// of every layer: uniform() for each element, K's and V's in turn. The cost
// of attention depends on how many keys there are, not on their values.
template <class Uniform>
void fill_random_kv(kv::KvCache& kv, int32_t n_positions, Uniform&& uniform) {
  const kv::KvLayout& layout = kv.layout();
  std::vector<float> k(static_cast<size_t>(layout.n_kv_heads) * layout.head_dim), v(k.size());
  kv.prepare_write(0, 0, n_positions);
  for (int32_t layer = 0; layer < layout.n_layers; ++layer) {
    for (int32_t pos = 0; pos < n_positions; ++pos) {
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = uniform();
        v[i] = uniform();
      }
      kv.write(0, layer, pos, k.data(), v.data());
    }
  }
  kv.set_length(0, n_positions);
}

}  // namespace

TimingStats stats_of(std::vector<double> s) {
  if (s.empty()) throw Error("stats_of: no samples");
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  const double median = n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  return {median, s.front(), s.back()};
}

std::vector<std::span<const std::byte>> weight_ranges(const Model& model) {
  std::vector<std::span<const std::byte>> out;
  for (const TensorView* t : model.pass_tensors()) out.emplace_back(t->data, t->n_bytes());
  return out;
}

double roofline_tokens_per_s(double bytes_per_s, double weight_bytes, double tokens_per_pass) {
  return tokens_per_pass * bytes_per_s / weight_bytes;
}

int64_t attention_keys(const ModelConfig& c, int64_t pos) {
  return c.sliding_window > 0 ? std::min<int64_t>(pos + 1, c.sliding_window) : pos + 1;
}

double kv_bytes_read(const ModelConfig& c, const kv::KvLayout& layout, int64_t pos) {
  const int64_t keys = attention_keys(c, pos);
  const int64_t f16_keys = layout.has_recent() ? std::min(keys, pos + 1 - layout.recent_begin(pos)) : 0;
  const int64_t f16_k = layout.k_recent() ? layout.recent_head_row_bytes() : layout.k_head_row_bytes();
  const int64_t f16_v = layout.v_recent() ? layout.recent_head_row_bytes() : layout.v_head_row_bytes();
  const int64_t per_head =
      (keys - f16_keys) * (layout.k_head_row_bytes() + layout.v_head_row_bytes()) + f16_keys * (f16_k + f16_v);
  return static_cast<double>(c.n_layers) * c.n_kv_heads * static_cast<double>(per_head);
}

double attention_macs(const ModelConfig& c, int64_t pos) {
  return 2.0 * c.n_layers * c.n_heads * c.head_dim * static_cast<double>(attention_keys(c, pos));
}

double with_attention(double weights_tokens_per_s, double macs, double attention_macs_per_s) {
  if (weights_tokens_per_s <= 0.0 || macs <= 0.0 || attention_macs_per_s <= 0.0) return weights_tokens_per_s;
  return 1.0 / (1.0 / weights_tokens_per_s + macs / attention_macs_per_s);
}

void summarize(BenchResult& r, const std::vector<Repetition>& reps, int32_t n_tokens, double tokens_per_pass) {
  if (reps.empty()) throw Error("bench: no repetitions to summarize");
  std::vector<double> seconds, tps, gbs, fraction;
  const double bytes_per_pass = static_cast<double>(r.weight_bytes) + r.kv_bytes;
  for (const Repetition& rep : reps) {
    seconds.push_back(rep.seconds);
    tps.push_back(n_tokens / rep.seconds);
    gbs.push_back(rep.bytes_per_s / 1e9);
    fraction.push_back(tps.back() / roofline_tokens_per_s(rep.bytes_per_s, bytes_per_pass, tokens_per_pass));
  }
  r.seconds = stats_of(seconds);
  r.tokens_per_s = stats_of(tps);
  r.bandwidth_gbs = stats_of(gbs).median;
  // Linear in the bandwidth, so this is the roofline of the median repetition's.
  r.roofline_tokens_per_s = roofline_tokens_per_s(r.bandwidth_gbs * 1e9, bytes_per_pass, tokens_per_pass);
  r.roofline_fraction = stats_of(fraction).median;
}

double forward_flops(const ModelConfig& c, int64_t n_tokens, int64_t n_past, int64_t n_logits) {
  const double layer_weights = static_cast<double>(c.n_embd) * (2.0 * c.q_dim() + 2.0 * c.kv_dim()) +
                               3.0 * static_cast<double>(c.n_embd) * c.n_ff;
  const double matmul = 2.0 * static_cast<double>(n_tokens) * layer_weights * c.n_layers +
                        2.0 * static_cast<double>(n_logits) * c.n_embd * c.n_vocab;
  // Token i attends to n_past + i + 1 keys: QK^T and AV cost 2 * q_dim flops per key each.
  const double keys = static_cast<double>(n_tokens) * static_cast<double>(n_past) +
                      0.5 * static_cast<double>(n_tokens) * static_cast<double>(n_tokens + 1);
  return matmul + 4.0 * c.q_dim() * keys * c.n_layers;
}

ForwardTimer::ForwardTimer(const Model& model, ThreadPool& pool, int32_t max_positions, uint64_t seed,
                           const kv::KvFormat& kv_format, kernels::MatmulOptions matmul)
    : model_(model),
      max_positions_(max_positions),
      kv_(kv_layout_for(model, kv_format), blocks_for(kv_layout_for(model, kv_format), std::max(max_positions, 1))),
      forward_(model, pool, matmul),
      rng_(seed == 0 ? 1 : seed) {  // xorshift never leaves 0
  if (model.parallel() != nullptr) kv_.start_journal();  // the other ranks' pools follow this one
}

int32_t ForwardTimer::next_token() {
  // xorshift64*: cheap, and the ids need no quality beyond covering the vocabulary.
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  const uint64_t r = (rng_ * 0x2545f4914f6cdd1dull) >> 32;
  return static_cast<int32_t>(r % static_cast<uint64_t>(model_.config().n_vocab));
}

void ForwardTimer::check(int32_t n_tokens) const {
  if (n_tokens < 1 || n_tokens > max_positions_) {
    throw Error("bench: " + std::to_string(n_tokens) + " tokens do not fit in 1.." + std::to_string(max_positions_));
  }
}

double ForwardTimer::prefill(int32_t n_tokens) {
  check(n_tokens);
  kv_.free_sequence(0);
  batch_.clear();
  for (int32_t i = 0; i < n_tokens; ++i) batch_.add(next_token(), i, 0, i + 1 == n_tokens);
  const auto start = std::chrono::steady_clock::now();
  forward_.run(batch_, kv_);
  return seconds_since(start);
}

void ForwardTimer::fill_context(int32_t ctx) {
  kv_.free_sequence(0);
  if (ctx == 0) return;
  // Uniform in [-1, 1).
  fill_random_kv(kv_, ctx, [&] { return static_cast<float>(next_token() % 2048) / 1024.0f - 1.0f; });
}

double ForwardTimer::decode(int32_t n_tokens, int32_t ctx) {
  check(n_tokens);
  if (ctx < 0 || ctx > max_positions_ - n_tokens) {
    throw Error("bench: a context of " + std::to_string(ctx) + " and " + std::to_string(n_tokens) +
                " tokens do not fit in " + std::to_string(max_positions_) + " positions");
  }
  fill_context(ctx);
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  for (int32_t& t : tokens) t = next_token();
  const auto start = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < n_tokens; ++i) {
    batch_.clear();
    batch_.add(tokens[static_cast<size_t>(i)], ctx + i, 0, true);
    forward_.run(batch_, kv_);
  }
  return seconds_since(start);
}

namespace {

// The weight matrices of a pass (pass_tensors without the vectors).
std::vector<const TensorView*> matrices(const Model& model) {
  std::vector<const TensorView*> out;
  for (const TensorView* t : model.pass_tensors()) {
    if (t->n_dims >= 2 && t->n_rows() > 1) out.push_back(t);
  }
  return out;
}

}  // namespace

std::vector<KernelRate> measure_kernel_rates(const Model& model, ThreadPool& pool, const kernels::MatmulOptions& matmul,
                                             int32_t n_tokens) {
  // GEMV: ~512 KiB of weights per thread, in L2 (or a fast L3) with the
  // activations beside them. With 128 KiB a call's fixed cost (waking the
  // threads, converting the activations) was a large share of its time, and
  // on a Xeon with 2 MiB of L2 decode ran at 110-134% of that "roofline"
  // (F16, Q5_K_M); 512 KiB brought Q5_K_M to 76%. GEMM reuses each weight n_tokens times, so memory cannot bound it:
  // the whole tensor, which also keeps the activations' conversion (once a
  // call) at its real share.
  constexpr size_t kSliceBytesPerThread = size_t{512} << 10;
  std::vector<KernelRate> rates;
  kernels::Matmul mm(matmul);
  for (const TensorView* t : matrices(model)) {
    const auto known = std::find_if(rates.begin(), rates.end(), [&](const KernelRate& r) { return r.type == t->type; });
    if (known != rates.end()) continue;
    TensorView slice = *t;
    const size_t want = n_tokens > 1 ? t->n_bytes() : kSliceBytesPerThread * static_cast<size_t>(pool.size());
    // Whole groups of 16 rows (interleaved layouts start a group every 8).
    const int64_t rows = std::clamp<int64_t>(static_cast<int64_t>(want / t->row_stride()) / 16 * 16, 16, t->n_rows() / 16 * 16);
    if (rows < 16) continue;
    slice.ne = {t->ne[0], rows, 1, 1};
    std::vector<float> x(static_cast<size_t>(t->ne[0] * n_tokens), 0.5f), y(static_cast<size_t>(rows * n_tokens));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.1f - 0.8f;
    auto call = [&] { mm.run(slice, x.data(), n_tokens, y.data(), pool); };
    call();  // warm-up: the slice into the caches
    rates.push_back({t->type, fastest_rate(static_cast<double>(rows * t->ne[0] * n_tokens), call)});
  }
  return rates;
}

double compute_roofline_tokens_per_s(const Model& model, const std::vector<KernelRate>& rates) {
  double seconds = 0.0;
  for (const TensorView* t : matrices(model)) {
    const auto r = std::find_if(rates.begin(), rates.end(), [&](const KernelRate& k) { return k.type == t->type; });
    if (r == rates.end() || r->macs_per_s <= 0.0) throw Error("bench: no kernel rate for " + std::string(dtype_name(t->type)));
    seconds += static_cast<double>(t->n_elements()) / r->macs_per_s;
  }
  return seconds > 0.0 ? 1.0 / seconds : 0.0;
}

double measure_attention_rate(const Model& model, ThreadPool& pool, const kv::KvFormat& kv_format, kernels::Isa isa) {
  const ModelConfig& c = model.local_config();
  kv::KvLayout layout = kv_layout_for(model, kv_format);
  layout.n_layers = 1;
  // ~512 KiB of K and V a thread, as measure_kernel_rates' GEMV slices, in
  // whole tiles; the query at position `keys` reads keys + 1 of them.
  constexpr int64_t kBytesPerThread = int64_t{512} << 10;
  const int64_t row_bytes = layout.n_kv_heads * (layout.k_head_row_bytes() + layout.v_head_row_bytes());
  const int32_t keys = static_cast<int32_t>(
      std::clamp<int64_t>(kBytesPerThread * pool.size() / row_bytes / kernels::kKeyTile * kernels::kKeyTile,
                          kernels::kKeyTile, 16 * kernels::kKeyChunk));
  kv::KvCache kv(layout, blocks_for(layout, keys + 1));
  uint64_t state = 1;
  auto uniform = [&] {  // in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(state >> 40) / 8388608.0f - 1.0f;
  };
  fill_random_kv(kv, keys + 1, uniform);
  Batch batch;
  batch.add(0, keys, 0, true);
  std::vector<float> q(static_cast<size_t>(c.q_dim())), out(q.size()), k(static_cast<size_t>(c.kv_dim())), v(k.size());
  for (float& x : q) x = uniform();
  PagedAttention attention(isa);
  attention.plan(c, layout, batch, q.data(), out.data(), pool.size());
  auto step = [&] { attention.run(batch, kv, 0, k.data(), v.data(), pool); };
  step();  // warm-up: K and V into the caches
  return fastest_rate(attention_macs(c, keys) / c.n_layers, step);
}

std::vector<BenchResult> run_bench(const Model& model, ThreadPool& pool, const BenchOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || (o.n_prompt == 0 && o.n_gen == 0)) {
    throw Error("bench: need a positive prompt or generation length (got " + std::to_string(o.n_prompt) + " and " +
                std::to_string(o.n_gen) + ")");
  }
  if (o.repetitions < 1) throw Error("bench: repetitions must be >= 1, got " + std::to_string(o.repetitions));
  const std::vector<std::span<const std::byte>> ranges = weight_ranges(model);
  const size_t bytes = model.weight_bytes();
  if (o.contexts.empty()) throw Error("bench: no context lengths given");
  int32_t max_ctx = 0;
  for (int32_t ctx : o.contexts) {
    if (ctx < 0) throw Error("bench: context length " + std::to_string(ctx) + " is negative");
    max_ctx = std::max(max_ctx, ctx);
  }
  ForwardTimer timer(model, pool, std::max(o.n_prompt, o.n_gen + max_ctx), o.seed, o.kv_format, o.matmul);

  std::vector<BenchResult> results;
  // Prefill's products run as GEMMs of many tokens, decode's as GEMVs.
  const double compute_decode = compute_roofline_tokens_per_s(model, measure_kernel_rates(model, pool, o.matmul, 1));
  const double compute_prefill =
      o.n_prompt > 0 ? compute_roofline_tokens_per_s(model, measure_kernel_rates(model, pool, o.matmul, 64)) : 0.0;
  const double attention_rate = o.n_gen > 0 ? measure_attention_rate(model, pool, o.kv_format, o.matmul.isa) : 0.0;
  const kv::KvLayout layout = kv_layout_for(model, o.kv_format);
  auto measure = [&](bool prefill, int32_t n, int32_t ctx) {
    BenchResult r;
    r.test = (prefill ? "pp" : "tg") + std::to_string(n);
    r.n_prompt = prefill ? n : 0;
    r.n_gen = prefill ? 0 : n;
    r.ctx = ctx;
    r.threads = pool.size();
    r.weight_bytes = bytes;
    // Decode step i attends ctx + i + 1 keys: its KV reads and attention
    // products grow with them, so the test's rooflines take their means.
    double attention_macs_per_token = 0.0;
    if (!prefill) {
      for (int32_t i = 0; i < n; ++i) {
        r.kv_bytes += kv_bytes_read(model.local_config(), layout, ctx + i) / n;
        attention_macs_per_token += attention_macs(model.local_config(), ctx + i) / n;
      }
    }
    auto run = [&] { return prefill ? timer.prefill(n) : timer.decode(n, ctx); };
    run();  // warm-up: first-touch of buffers and pages
    // The bandwidth is measured right before each repetition, so that each
    // speed meets the bandwidth of its own moment on a shared machine.
    std::vector<Repetition> reps;
    double comm_seconds = 0.0;
    for (int i = 0; i < o.repetitions; ++i) {
      const double bw = measure_read_bandwidth(ranges, pool, o.bandwidth_passes).bytes_per_s;
      const double comm_before = model.parallel() != nullptr ? model.parallel()->comm_seconds() : 0.0;
      reps.push_back({run(), bw});
      if (model.parallel() != nullptr) comm_seconds += model.parallel()->comm_seconds() - comm_before;
    }
    r.comm_ms_per_pass = 1e3 * comm_seconds / (o.repetitions * (prefill ? 1.0 : n));
    // A pass reads the weights once: one token of decode, n of prefill.
    summarize(r, reps, n, prefill ? n : 1);
    const double flops = prefill ? forward_flops(model.config(), n, 0, 1)
                                 : [&] {
                                     double f = 0.0;
                                     for (int32_t i = 0; i < n; ++i) f += forward_flops(model.config(), 1, ctx + i, 1);
                                     return f;
                                   }();
    r.gflops = flops / r.seconds.median / 1e9;
    r.compute_roofline_tokens_per_s =
        prefill ? compute_prefill : with_attention(compute_decode, attention_macs_per_token, attention_rate);
    const double binding = std::min(r.roofline_tokens_per_s, r.compute_roofline_tokens_per_s);
    r.binding_fraction = binding > 0.0 ? r.tokens_per_s.median / binding : 0.0;
    results.push_back(r);
  };
  if (o.n_prompt > 0) measure(true, o.n_prompt, 0);
  if (o.n_gen > 0) {
    for (int32_t ctx : o.contexts) measure(false, o.n_gen, ctx);
  }
  return results;
}

}  // namespace tokamak::tools
