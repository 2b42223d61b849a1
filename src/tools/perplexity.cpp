#include "tools/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/percentile.h"
#include "model/batch.h"
#include "model/forward.h"

namespace tokamak::tools {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t fnv1a(uint64_t hash, std::span<const std::byte> bytes) {
  for (const std::byte b : bytes) hash = (hash ^ static_cast<uint8_t>(b)) * kFnvPrime;
  return hash;
}

template <typename T>
std::span<const std::byte> bytes_of(std::span<const T> values) {
  return std::as_bytes(values);
}

uint32_t read_u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

ChunkPlan plan_chunks(int64_t n_tokens, int32_t n_ctx, int32_t max_chunks) {
  if (n_ctx < 4) throw Error("perplexity: a context of " + std::to_string(n_ctx) + " tokens scores nothing (-c must be at least 4)");
  if (n_tokens < 2 * static_cast<int64_t>(n_ctx)) {
    throw Error("perplexity: the text tokenizes to " + std::to_string(n_tokens) + " tokens; a context of " +
                std::to_string(n_ctx) + " needs at least " + std::to_string(2 * static_cast<int64_t>(n_ctx)) +
                " (two chunks)");
  }
  ChunkPlan plan;
  plan.n_ctx = n_ctx;
  plan.first = n_ctx / 2;
  const int64_t all = n_tokens / n_ctx;
  plan.n_chunks = static_cast<int32_t>(max_chunks > 0 ? std::min<int64_t>(all, max_chunks) : all);
  return plan;
}

void evaluate_chunks(const Model& model, ThreadPool& pool, std::span<const int32_t> tokens, int32_t bos,
                     const ChunkPlan& plan, const EvalOptions& options, const ChunkSink& sink) {
  const ModelConfig& c = model.config();
  const int32_t n_ctx = plan.n_ctx;
  if (static_cast<int64_t>(tokens.size()) < static_cast<int64_t>(plan.n_chunks) * n_ctx) {
    throw Error("perplexity: " + std::to_string(tokens.size()) + " tokens are fewer than " +
                std::to_string(plan.n_chunks) + " chunks of " + std::to_string(n_ctx));
  }
  if (options.n_batch < 1) throw Error("perplexity: n_batch " + std::to_string(options.n_batch) + " must be positive");
  // Chunks side by side when a batch holds whole chunks; else each chunk in
  // passes of n_batch positions (llama.cpp's two regimes).
  const int32_t n_seq = std::max(1, options.n_batch / n_ctx);
  const int32_t pass = std::min(options.n_batch, n_ctx);
  const kv::KvLayout layout = kv_layout_for(c, options.kv);
  layout.validate();
  const int32_t bs = layout.format.block_size;
  kv::KvCache kv(layout, n_seq * ((n_ctx + bs - 1) / bs + layout.recent_blocks()));
  Forward forward(model, pool, options.matmul);

  const int32_t n_scored = plan.n_scored();
  const size_t row = static_cast<size_t>(c.n_vocab);
  std::vector<float> logits(static_cast<size_t>(n_seq) * n_scored * row);  // [n_seq][n_scored][n_vocab]
  std::vector<int32_t> targets(static_cast<size_t>(n_scored));
  Batch batch;
  for (int32_t c0 = 0; c0 < plan.n_chunks; c0 += n_seq) {
    const int32_t n = std::min(n_seq, plan.n_chunks - c0);
    for (int32_t p0 = 0; p0 < n_ctx; p0 += pass) {
      const int32_t p1 = std::min(n_ctx, p0 + pass);
      batch.clear();
      for (int32_t s = 0; s < n; ++s) {
        const int32_t* chunk = tokens.data() + static_cast<size_t>(c0 + s) * n_ctx;
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t token = p == 0 && bos >= 0 ? bos : chunk[p];
          batch.add(token, p, s, p >= plan.first && p < n_ctx - 1);
        }
      }
      const std::span<const float> out = forward.run(batch, kv);
      // Rows come in batch order: per sequence, its wanted positions of this pass.
      const int32_t lo = std::max(p0, plan.first), hi = std::min(p1, n_ctx - 1);
      const int32_t per_seq = std::max(0, hi - lo);
      for (int32_t s = 0; s < n; ++s) {
        const size_t dst = (static_cast<size_t>(s) * n_scored + (lo - plan.first)) * row;
        std::copy_n(out.data() + static_cast<size_t>(s) * per_seq * row, static_cast<size_t>(per_seq) * row,
                    logits.data() + dst);
      }
    }
    for (int32_t s = 0; s < n; ++s) {
      kv.free_sequence(s);
      const int32_t* chunk = tokens.data() + static_cast<size_t>(c0 + s) * n_ctx;
      for (int32_t i = 0; i < n_scored; ++i) targets[i] = chunk[plan.first + 1 + i];
      sink(c0 + s, std::span<const float>(logits).subspan(static_cast<size_t>(s) * n_scored * row, n_scored * row),
           targets);
    }
  }
}

void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  out.resize(logits.size());
  double max = -std::numeric_limits<double>::infinity();
  for (const float l : logits) max = std::max(max, static_cast<double>(l));
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double shift = max + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - shift;
}

double NllStats::mean_error() const {
  if (count < 2) return 0.0;
  const double m = mean();
  const double var = sum2 / static_cast<double>(count) - m * m;
  return var > 0 ? std::sqrt(var / static_cast<double>(count - 1)) : 0.0;
}

double NllStats::ppl() const { return std::exp(mean()); }

KlBaseWriter::KlBaseWriter(const std::filesystem::path& path, const ChunkPlan& plan, int32_t n_vocab,
                           std::span<const int32_t> tokens)
    : out_(io::OutputFile::create(path)), plan_(plan), n_vocab_(n_vocab), hash_(kFnvOffset) {
  std::byte header[kKlBaseHeaderBytes] = {};
  std::memcpy(header, kKlBaseMagic, sizeof kKlBaseMagic);
  const uint32_t fields[6] = {kKlBaseVersion,
                              static_cast<uint32_t>(plan.n_ctx),
                              static_cast<uint32_t>(n_vocab),
                              static_cast<uint32_t>(plan.n_chunks),
                              static_cast<uint32_t>(plan.n_scored()),
                              0};
  std::memcpy(header + 8, fields, sizeof fields);
  write(header);
  write(bytes_of(tokens.first(static_cast<size_t>(plan.n_chunks) * plan.n_ctx)));
}

void KlBaseWriter::write(std::span<const std::byte> bytes) {
  hash_ = fnv1a(hash_, bytes);
  out_.write(bytes);
}

void KlBaseWriter::add_chunk(std::span<const float> log_probs) {
  if (log_probs.size() != static_cast<size_t>(plan_.n_scored()) * n_vocab_ || chunks_written_ >= plan_.n_chunks) {
    throw Error("kl-divergence base: chunk " + std::to_string(chunks_written_) + " of " + std::to_string(log_probs.size()) +
                " values does not fit the plan");
  }
  write(bytes_of(log_probs));
  ++chunks_written_;
}

void KlBaseWriter::commit() {
  if (chunks_written_ != plan_.n_chunks) {
    throw Error("kl-divergence base " + out_.name() + ": " + std::to_string(chunks_written_) + " of " +
                std::to_string(plan_.n_chunks) + " chunks written");
  }
  const uint64_t hash = hash_;
  out_.write(std::as_bytes(std::span<const uint64_t>(&hash, 1)));
  out_.commit();
}

KlBase KlBase::open(const std::filesystem::path& path) {
  KlBase base;
  base.file_ = MappedFile::open(path);
  const std::span<const std::byte> bytes = base.file_.bytes();
  const std::string name = "kl-divergence base " + path.string();
  if (bytes.size() < kKlBaseHeaderBytes + sizeof(uint64_t) ||
      std::memcmp(bytes.data(), kKlBaseMagic, sizeof kKlBaseMagic) != 0) {
    throw Error(name + ": not a tokamak KL base file (no TKKLBASE header; write one with --kl-divergence-base)");
  }
  const uint32_t version = read_u32(bytes.data() + 8);
  if (version != kKlBaseVersion) throw Error(name + ": version " + std::to_string(version) + " is not 1");
  const uint32_t n_ctx = read_u32(bytes.data() + 12), n_vocab = read_u32(bytes.data() + 16);
  const uint32_t n_chunks = read_u32(bytes.data() + 20), n_scored = read_u32(bytes.data() + 24);
  if (n_ctx < 4 || n_ctx > (1u << 24) || n_vocab == 0 || n_vocab > (1u << 24) || n_chunks == 0 ||
      n_chunks > (1u << 24) || n_scored != n_ctx - 1 - n_ctx / 2) {
    throw Error(name + ": header n_ctx " + std::to_string(n_ctx) + ", n_vocab " + std::to_string(n_vocab) +
                ", n_chunks " + std::to_string(n_chunks) + ", n_scored " + std::to_string(n_scored) +
                " is not a valid plan");
  }
  const uint64_t token_bytes = 4ull * n_chunks * n_ctx;
  const uint64_t prob_bytes = 4ull * n_chunks * n_scored * n_vocab;
  const uint64_t want = kKlBaseHeaderBytes + token_bytes + prob_bytes + sizeof(uint64_t);
  if (bytes.size() != want) {
    throw Error(name + ": " + std::to_string(bytes.size()) + " bytes, but its header describes " + std::to_string(want) +
                " (truncated or not written whole)");
  }
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, sizeof stored);
  if (fnv1a(kFnvOffset, bytes.first(body)) != stored) {
    throw Error(name + ": checksum mismatch: the file is corrupted");
  }
  base.plan_.n_ctx = static_cast<int32_t>(n_ctx);
  base.plan_.first = static_cast<int32_t>(n_ctx / 2);
  base.plan_.n_chunks = static_cast<int32_t>(n_chunks);
  base.n_vocab_ = static_cast<int32_t>(n_vocab);
  base.tokens_.resize(static_cast<size_t>(n_chunks) * n_ctx);
  std::memcpy(base.tokens_.data(), bytes.data() + kKlBaseHeaderBytes, token_bytes);
  base.log_probs_ = bytes.data() + kKlBaseHeaderBytes + token_bytes;
  return base;
}

std::span<const float> KlBase::row(int32_t chunk, int32_t i) const {
  const size_t index = static_cast<size_t>(chunk) * plan_.n_scored() + i;
  // The offset is 32 + 4 n: a multiple of 4 from a page-aligned mapping.
  return {reinterpret_cast<const float*>(log_probs_) + index * n_vocab_, static_cast<size_t>(n_vocab_)};
}

void KlStats::add(std::span<const float> base_log_probs, std::span<const float> logits, int32_t target) {
  log_softmax(logits, log_p_);
  double kl = 0;
  size_t top = 0, top_base = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double lb = base_log_probs[i];
    kl += std::exp(lb) * (lb - log_p_[i]);
    if (log_p_[i] > log_p_[top]) top = i;
    if (base_log_probs[i] > base_log_probs[top_base]) top_base = i;
  }
  kl_.push_back(kl);
  same_top_ += top == top_base ? 1 : 0;
  const double nll = -log_p_[static_cast<size_t>(target)], nll_base = -static_cast<double>(base_log_probs[target]);
  nll_.add(nll);
  nll_base_.add(nll_base);
  nll_diff_.add(nll - nll_base);
}

KlStats::Summary KlStats::summary() const {
  Summary s;
  s.count = nll_.count;
  if (s.count == 0) return s;
  double sum = 0, sum2 = 0;
  for (const double k : kl_) {
    sum += k;
    sum2 += k * k;
  }
  NllStats kl{sum, sum2, s.count};
  s.kl_mean = kl.mean();
  s.kl_mean_error = kl.mean_error();
  std::vector<double> sorted = kl_;
  std::sort(sorted.begin(), sorted.end());
  s.kl_max = sorted.back();
  s.kl_p999 = percentile(sorted, 99.9);
  s.kl_p99 = percentile(sorted, 99);
  s.kl_p90 = percentile(sorted, 90);
  s.kl_median = percentile(sorted, 50);
  s.top_agreement = static_cast<double>(same_top_) / static_cast<double>(s.count);
  s.ppl = nll_.ppl();
  s.ppl_error = nll_.ppl_error();
  s.ppl_base = nll_base_.ppl();
  s.ppl_base_error = nll_base_.ppl_error();
  s.ppl_ratio = nll_diff_.ppl();
  s.ppl_ratio_error = nll_diff_.ppl_error();
  return s;
}

}  // namespace tokamak::tools
