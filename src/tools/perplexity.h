// Perplexity and KL divergence of a model over a text, by llama.cpp's
// llama-perplexity method so that the figures compare with the community's:
//
// - the text is tokenized once, BOS first when the vocabulary asks for it
//   (the caller does that; this file takes the token ids);
// - the ids are cut into n_chunks = n_tokens / n_ctx chunks of n_ctx tokens
//   (the tail is dropped); each chunk runs from an empty cache at positions
//   0..n_ctx-1 with its first token replaced by BOS (when the vocabulary
//   adds one);
// - only the second half is scored: the logits at positions
//   first = n_ctx / 2 .. n_ctx - 2 predict the tokens at first+1 .. n_ctx-1,
//   n_ctx - 1 - first scores per chunk;
// - PPL = exp(mean NLL), its standard error PPL * sqrt(var(NLL) / (count - 1)).
//
// Chunks run as parallel sequences of one batch (n_batch / n_ctx of them);
// batch invariance makes the figures independent of that grouping.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/output_file.h"
#include "kernels/matmul.h"
#include "kv/kv_layout.h"
#include "model/model.h"

namespace tokamak::tools {

// Which positions of which chunks are scored.
struct ChunkPlan {
  int32_t n_ctx = 0;
  int32_t n_chunks = 0;
  int32_t first = 0;  // n_ctx / 2: the first position whose logits are scored
  int32_t n_scored() const { return n_ctx - 1 - first; }
};

// llama-perplexity's rule: at least 2 * n_ctx tokens (else a tokamak::Error
// naming the count and the need), n_tokens / n_ctx chunks, at most
// `max_chunks` of them when it is positive. n_ctx must be at least 4 (so
// that a chunk scores a token).
ChunkPlan plan_chunks(int64_t n_tokens, int32_t n_ctx, int32_t max_chunks);

struct EvalOptions {
  int32_t n_batch = 2048;  // tokens per forward pass: n_batch / n_ctx chunks side by side
  kv::KvFormat kv;
  kernels::MatmulOptions matmul;
};

// Receives one chunk's scored rows: logits [n_scored, n_vocab] row-major and
// the token each row predicts [n_scored]. Views valid during the call.
using ChunkSink = std::function<void(int32_t chunk, std::span<const float> logits, std::span<const int32_t> targets)>;

// Runs the plan's chunks of `tokens` through the model in chunk order.
// `bos` replaces each chunk's first token (-1: none). Throws tokamak::Error
// on a token outside the vocabulary or an n_ctx above the model's
// positions budget of the KV layout.
void evaluate_chunks(const Model& model, ThreadPool& pool, std::span<const int32_t> tokens, int32_t bos,
                     const ChunkPlan& plan, const EvalOptions& options, const ChunkSink& sink);

// log p of every token of one logits row, in f64: l_i - max - log(sum exp(l_j - max)).
void log_softmax(std::span<const float> logits, std::vector<double>& out);

// Running mean and standard error of per-token negative log-likelihoods.
struct NllStats {
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  void add(double nll) {
    sum += nll;
    sum2 += nll * nll;
    ++count;
  }
  double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
  // sqrt(var / (count - 1)), 0 below two samples.
  double mean_error() const;
  double ppl() const;
  double ppl_error() const { return ppl() * mean_error(); }
};

// The reference file of --kl-divergence-base, our own layout (little-endian):
//   0  char[8]  "TKKLBASE"
//   8  u32      version (1)
//  12  u32      n_ctx
//  16  u32      n_vocab
//  20  u32      n_chunks
//  24  u32      n_scored per chunk (n_ctx - 1 - n_ctx / 2)
//  28  u32      0 (reserved)
//  32  i32      tokens [n_chunks * n_ctx] (before BOS substitution)
//      f32      log-probabilities [n_chunks * n_scored, n_vocab]
//  end u64      FNV-1a 64 of every byte before it
// Size: 32 + 4 n_chunks n_ctx + 4 n_chunks n_scored n_vocab + 8 bytes.
inline constexpr char kKlBaseMagic[8] = {'T', 'K', 'K', 'L', 'B', 'A', 'S', 'E'};
inline constexpr uint32_t kKlBaseVersion = 1;
inline constexpr size_t kKlBaseHeaderBytes = 32;

// Writes a base file chunk by chunk; the file appears only at commit().
class KlBaseWriter {
 public:
  // Throws tokamak::Error when the folder is not writable.
  KlBaseWriter(const std::filesystem::path& path, const ChunkPlan& plan, int32_t n_vocab,
               std::span<const int32_t> tokens);
  // One chunk's log-probabilities [n_scored, n_vocab], in chunk order.
  void add_chunk(std::span<const float> log_probs);
  // Throws tokamak::Error when not every chunk was added, or the write fails.
  void commit();

 private:
  void write(std::span<const std::byte> bytes);
  io::OutputFile out_;
  ChunkPlan plan_;
  int32_t n_vocab_;
  int32_t chunks_written_ = 0;
  uint64_t hash_;
};

// A base file mapped and checked (magic, version, size against the header,
// checksum) before any of it is used.
class KlBase {
 public:
  // Throws tokamak::Error naming the path and what is wrong.
  static KlBase open(const std::filesystem::path& path);
  const ChunkPlan& plan() const { return plan_; }
  int32_t n_vocab() const { return n_vocab_; }
  std::span<const int32_t> tokens() const { return tokens_; }  // [n_chunks * n_ctx]
  // Row i of chunk c: [n_vocab] log-probabilities.
  std::span<const float> row(int32_t chunk, int32_t i) const;

 private:
  MappedFile file_;
  ChunkPlan plan_;
  int32_t n_vocab_ = 0;
  std::vector<int32_t> tokens_;  // copied out: the mapping's alignment is only the header's
  const std::byte* log_probs_ = nullptr;
};

// KL(base || model) and agreement, accumulated token by token.
class KlStats {
 public:
  // base: the reference's log-probabilities; logits: the model's row; target:
  // the token that follows.
  void add(std::span<const float> base_log_probs, std::span<const float> logits, int32_t target);

  struct Summary {
    double kl_mean = 0, kl_mean_error = 0, kl_max = 0;
    double kl_p999 = 0, kl_p99 = 0, kl_p90 = 0, kl_median = 0;
    double top_agreement = 0;  // share of positions whose argmax is the same
    double ppl = 0, ppl_error = 0, ppl_base = 0, ppl_base_error = 0;
    double ppl_ratio = 0, ppl_ratio_error = 0;  // exp(mean(nll - nll_base)) and its standard error
    int64_t count = 0;
  };
  Summary summary() const;
  const NllStats& nll() const { return nll_; }

 private:
  NllStats nll_, nll_base_, nll_diff_;
  std::vector<double> kl_;  // per position, for the percentiles
  int64_t same_top_ = 0;
  std::vector<double> log_p_;  // scratch [n_vocab]
};

}  // namespace tokamak::tools
