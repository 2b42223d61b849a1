#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "dist/communicator.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quants.h"
#include "kernels/rope.h"

namespace tokamak {
namespace {

// rows[t, i] += bias[i] for each of n rows of `width` values.
void add_bias(float* rows, const float* bias, int64_t n, int64_t width) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < width; ++i) rows[t * width + i] += bias[i];
  }
}

template <typename T>
void ensure_size(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

kv::KvLayout kv_layout_for(const ModelConfig& c, const kv::KvFormat& format) {
  kv::KvLayout l;
  l.n_layers = c.n_layers;
  l.n_kv_heads = c.n_kv_heads;
  l.head_dim = c.head_dim;
  l.format = format;
  return l;
}

kv::KvLayout kv_layout_for(const Model& model, const kv::KvFormat& format) {
  return kv_layout_for(model.local_config(), format);
}

void Forward::grow(int64_t n, int64_t n_out) {
  const ModelConfig& c = model_.local_config();
  ensure_size(x_, n * c.n_embd);
  ensure_size(xb_, n * c.n_embd);
  ensure_size(q_, n * c.q_dim());
  ensure_size(k_, n * c.kv_dim());
  ensure_size(v_, n * c.kv_dim());
  ensure_size(att_, n * c.q_dim());
  ensure_size(proj_, n * c.n_embd);
  ensure_size(gate_, n * c.n_ff);
  ensure_size(up_, n * c.n_ff);
  ensure_size(out_in_, n_out * c.n_embd);
  ensure_size(logits_, n_out * c.n_vocab);
  ensure_size(rope_cos_sin_, c.rope_dim);
  if (model_.parallel() != nullptr) {
    ensure_size(shard_logits_, n_out * (model_.shard().vocab_end - model_.shard().vocab_begin));
  }
}
void Forward::validate(const Batch& batch, const kv::KvCache& kv) {
  const int64_t n = batch.size();
  if (static_cast<int64_t>(batch.positions.size()) != n || static_cast<int64_t>(batch.seq_ids.size()) != n ||
      static_cast<int64_t>(batch.want_logits.size()) != n) {
    throw Error("batch: tokens, positions, seq_ids and want_logits differ in length");
  }
  const int32_t n_vocab = model_.config().n_vocab;
  new_lengths_.clear();
  first_writes_.clear();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t token = batch.tokens[static_cast<size_t>(i)];
    const int32_t pos = batch.positions[static_cast<size_t>(i)];
    const int32_t seq = batch.seq_ids[static_cast<size_t>(i)];
    if (token < 0 || token >= n_vocab) {
      throw Error("batch entry " + std::to_string(i) + ": token id " + std::to_string(token) + " outside [0, " +
                  std::to_string(n_vocab) + ")");
    }
    if (seq < 0 || seq > (1 << 20)) throw Error("batch entry " + std::to_string(i) + ": bad sequence id " + std::to_string(seq));
    if (static_cast<size_t>(seq) >= new_lengths_.size()) {
      new_lengths_.resize(static_cast<size_t>(seq) + 1, -1);
      first_writes_.resize(static_cast<size_t>(seq) + 1, INT64_MAX);
    }
    int64_t& len = new_lengths_[static_cast<size_t>(seq)];
    if (len < 0) len = kv.length(seq);
    if (pos < 0 || pos > len) {
      throw Error("batch entry " + std::to_string(i) + ": position " + std::to_string(pos) + " of sequence " +
                  std::to_string(seq) + " leaves a gap (the sequence holds " + std::to_string(len) + " positions)");
    }
    len = std::max<int64_t>(len, pos + 1);
    first_writes_[static_cast<size_t>(seq)] = std::min<int64_t>(first_writes_[static_cast<size_t>(seq)], pos);
  }
}

void Forward::reserve(kv::KvCache& kv) {
  for (size_t seq = 0; seq < new_lengths_.size(); ++seq) {
    if (new_lengths_[seq] >= 0) kv.prepare_write(static_cast<int32_t>(seq), first_writes_[seq], new_lengths_[seq]);
  }
}

void Forward::commit(kv::KvCache& kv) {
  for (size_t seq = 0; seq < new_lengths_.size(); ++seq) {
    if (new_lengths_[seq] >= 0) kv.set_length(static_cast<int32_t>(seq), new_lengths_[seq]);
  }
}

std::span<const float> Forward::run(const Batch& batch, kv::KvCache& kv) {
  validate(batch, kv);
  const ModelConfig& c = model_.local_config();
  const int64_t n = batch.size();
  int64_t n_out = 0;
  for (int64_t t = 0; t < n; ++t) n_out += batch.want_logits[static_cast<size_t>(t)] ? 1 : 0;
  grow(n, n_out);
  if (n == 0) return {};
  attention_.plan(c, kv.layout(), batch, q_.data(), att_.data(), pool_.size());  // throws before the cache changes
  if (const dist::Parallel* par = model_.parallel()) {
    if (!kv.journaling()) throw Error("forward: the KV cache of a model split across processes must journal (KvCache::start_journal)");
    reserve(kv);
    // From here the other ranks wait for this step: a failure must end them all.
    try {
      broadcast_step(batch, kv);
      split_micro(batch);
      run_stage(kv);
      gather_logits(batch);
    } catch (const std::exception& e) {
      par->world->abort(std::string("forward step failed: ") + e.what());
    }
  } else {
    reserve(kv);
    embed(batch, x_.data());
    layers(batch, kv, x_.data());
    head(batch, x_.data(), n_out, logits_.data());
  }
  commit(kv);
  return {logits_.data(), static_cast<size_t>(n_out * c.n_vocab)};
}

void Forward::embed(const Batch& batch, float* x) {
  const ModelConfig& c = model_.local_config();
  const TensorView& embd = model_.weights().token_embd;
  const int64_t d = c.n_embd, n = batch.size();
  // A shard holds the rows [vocab_begin, vocab_end): the others' tokens get
  // zeros, and the sum across ranks leaves each row exactly its owner's.
  const int32_t vb = model_.shard().vocab_begin, ve = model_.shard().vocab_end;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t token = batch.tokens[static_cast<size_t>(t)];
    if (token >= vb && token < ve) {
      kernels::dequantize_row(embd.type, embd.row(token - vb), x + t * d, d);
    } else {
      std::fill(x + t * d, x + (t + 1) * d, 0.0f);
    }
  }
  sum_across_ranks(x, n * d);
  if (c.embedding_scale != 1.0f) {
    for (int64_t i = 0; i < n * d; ++i) x[i] *= c.embedding_scale;
  }
}

void Forward::layers(const Batch& batch, kv::KvCache& kv, float* x) {
  const ModelConfig& c = model_.local_config();
  const ModelWeights& w = model_.weights();
  const int64_t d = c.n_embd, n = batch.size();
  kernels::RopeParams rope = c.rope_params();
  if (c.rope_freq_factors) rope.freq_factors = w.rope_freqs.f32();
  // Below ~16K elements a job is not worth a second thread's wake-up (a
  // decode step's vectors stay on the caller).
  constexpr int64_t kElementGrain = 16384;
  const int64_t token_grain = std::max<int64_t>(1, kElementGrain / d);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    // Attention sub-block. The element-wise steps between the matmuls go
    // over the pool too: on one thread, a 512-token prefill's swiglu alone
    // held the other thread idle for ~4% of the pass. Each token's values do
    // not depend on the split.
    pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) kernels::rms_norm(x + t * d, lw.attn_norm.f32(), xb_.data() + t * d, d, c.rms_eps);
    }, token_grain);
    matmul_.run({{&lw.wq, q_.data()}, {&lw.wk, k_.data()}, {&lw.wv, v_.data()}}, xb_.data(), n, pool_);
    if (c.qkv_bias) {
      add_bias(q_.data(), lw.bq.f32(), n, c.q_dim());
      add_bias(k_.data(), lw.bk.f32(), n, c.kv_dim());
      add_bias(v_.data(), lw.bv.f32(), n, c.kv_dim());
    }
    for (int64_t t = 0; t < n; ++t) {
      kernels::rope_cache(rope, batch.positions[static_cast<size_t>(t)], rope_cos_sin_.data());
      kernels::rope_apply(rope, rope_cos_sin_.data(), q_.data() + t * c.q_dim(), c.n_heads, c.head_dim);
      kernels::rope_apply(rope, rope_cos_sin_.data(), k_.data() + t * c.kv_dim(), c.n_kv_heads, c.head_dim);
    }
    attention_.run(batch, kv, l, k_.data(), v_.data(), pool_);
    // Tensor parallel: each rank's wo columns give a partial sum of the projection.
    project_across_ranks(lw.wo, att_.data(), n, proj_.data());
    // Feed-forward sub-block (SwiGLU); ffn_down's rows, like wo's, give a partial sum.
    pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b * d; i < e * d; ++i) x[i] += proj_[static_cast<size_t>(i)];
      for (int64_t t = b; t < e; ++t) kernels::rms_norm(x + t * d, lw.ffn_norm.f32(), xb_.data() + t * d, d, c.rms_eps);
    }, token_grain);
    matmul_.run({{&lw.ffn_gate, gate_.data()}, {&lw.ffn_up, up_.data()}}, xb_.data(), n, pool_);
    pool_.parallel_for(n * c.n_ff, [&](int64_t b, int64_t e, int) {
      kernels::swiglu(matmul_options_.isa, gate_.data() + b, up_.data() + b, e - b);
    }, kElementGrain);
    project_across_ranks(lw.ffn_down, gate_.data(), n, proj_.data());
    pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b * d; i < e * d; ++i) x[i] += proj_[static_cast<size_t>(i)];
    }, token_grain);
  }
}

void Forward::head(const Batch& batch, const float* x, int64_t n_out, float* logits) {
  const ModelConfig& c = model_.local_config();
  const ModelWeights& w = model_.weights();
  const int64_t d = c.n_embd;
  // Only the rows that want logits go through the final norm and LM head.
  int64_t o = 0;
  for (int64_t t = 0; t < batch.size(); ++t) {
    if (!batch.want_logits[static_cast<size_t>(t)]) continue;
    kernels::rms_norm(x + t * d, w.output_norm.f32(), out_in_.data() + o * d, d, c.rms_eps);
    ++o;
  }
  matmul_.run(w.output, out_in_.data(), n_out, logits, pool_);
  if (c.final_logit_softcap > 0.0f) {
    const float cap = c.final_logit_softcap;
    for (int64_t i = 0; i < n_out * w.output.ne[1]; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
}

void Forward::project_across_ranks(const TensorView& w, const float* x, int64_t n, float* y) {
  const dist::Parallel* par = model_.parallel();
  const int64_t count = n * w.ne[1];
  if (par == nullptr || par->tp == 1 || matmul_.options().precision != kernels::MatmulPrecision::kF32) {
    matmul_.run(w, x, n, y, pool_);
    sum_across_ranks(y, count);
    return;
  }
  // The f32 reference: rank r holds the columns after rank r - 1's, so it
  // continues rank r - 1's sums (one sequential sum in element order, the
  // bits of one process), and the last rank's results go to every rank.
  // The ranks take turns: this mode is for checking, not for speed.
  dist::Communicator& comm = *par->tensor;
  const int rank = comm.rank(), size = comm.size();
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  if (rank == 0) {
    std::fill(y, y + count, 0.0f);
  } else {
    comm.recv(y, bytes, rank - 1);
  }
  matmul_.run_continuing(w, x, n, y, pool_);
  if (rank + 1 < size) {
    comm.send(y, bytes, rank + 1);
    comm.wait_sends();
  }
  comm.broadcast(y, bytes, size - 1);
}

void Forward::sum_across_ranks(float* data, int64_t n) {
  const dist::Parallel* par = model_.parallel();
  if (par != nullptr && par->tp > 1) dist::all_reduce_sum(*par->tensor, data, n, reduce_scratch_);
}

}  // namespace tokamak
