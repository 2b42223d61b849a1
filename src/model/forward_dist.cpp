// The forward pass of a model split across processes (dist::Parallel).
//
// Each step, world rank 0 broadcasts a header and a message: the batch
// (tokens, positions, sequence ids, which rows want logits) and the KV
// journal since the last step, which ends with this step's prepare_write()s.
// Every rank replays the journal on its own pool, so block tables agree, then
// runs its stage over the step's micro-batches: stage 0 embeds, each stage
// runs its layers (tensor-parallel all-reduces inside) and sends the residual
// stream on to its tensor-parallel peer in the next stage; the last stage's
// ranks send their vocabulary slice of the wanted logits rows to rank 0.
// Sends do not block, so stage s works on micro-batch m + 1 while stage s + 1
// works on m.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"
#include "dist/communicator.h"
#include "model/forward.h"

namespace tokamak {
namespace {

// [kind, n_tokens, journal entries, pool blocks, k type, v type, recent,
// block size, matmul precision, matmul ISA]
using StepHeader = std::array<int64_t, 10>;
constexpr int64_t kStop = 0, kStep = 1;

kv::KvFormat format_of(const StepHeader& h) {
  kv::KvFormat f;
  f.k_type = static_cast<kernels::KvType>(h[4]);
  f.v_type = static_cast<kernels::KvType>(h[5]);
  f.recent = static_cast<int32_t>(h[6]);
  f.block_size = static_cast<int32_t>(h[7]);
  return f;
}

}  // namespace

void Forward::broadcast_step(const Batch& batch, kv::KvCache& kv) {
  const dist::Parallel& par = *model_.parallel();
  const std::vector<int64_t> journal = kv.take_journal();
  const kv::KvFormat& f = kv.layout().format;
  StepHeader h = {kStep,
                  batch.size(),
                  static_cast<int64_t>(journal.size()),
                  kv.pool().n_blocks(),
                  static_cast<int64_t>(f.k_type),
                  static_cast<int64_t>(f.v_type),
                  f.recent,
                  f.block_size,
                  static_cast<int64_t>(matmul_options_.precision),
                  static_cast<int64_t>(matmul_options_.isa)};
  par.world->broadcast(h.data(), sizeof h, 0);
  const size_t n = static_cast<size_t>(batch.size());
  message_.resize(4 * n + journal.size());
  for (size_t i = 0; i < n; ++i) {
    message_[i] = batch.tokens[i];
    message_[n + i] = batch.positions[i];
    message_[2 * n + i] = batch.seq_ids[i];
    message_[3 * n + i] = batch.want_logits[i];
  }
  std::copy(journal.begin(), journal.end(), message_.begin() + static_cast<std::ptrdiff_t>(4 * n));
  par.world->broadcast(message_.data(), static_cast<int64_t>(message_.size() * sizeof(int64_t)), 0);
}

void Forward::stop_steps(const Model& model) {
  StepHeader h{};
  h[0] = kStop;
  model.parallel()->world->broadcast(h.data(), sizeof h, 0);
}

void Forward::serve_steps(const Model& model, ThreadPool& pool) {
  const dist::Parallel& par = *model.parallel();
  std::unique_ptr<kv::KvCache> kv;
  std::unique_ptr<Forward> forward;
  StepHeader last{};
  std::vector<int64_t> message;
  Batch batch;
  try {
    for (;;) {
      StepHeader h{};
      par.world->broadcast(h.data(), sizeof h, 0);
      if (h[0] == kStop) return;
      const size_t n = static_cast<size_t>(h[1]);
      message.resize(4 * n + static_cast<size_t>(h[2]));
      par.world->broadcast(message.data(), static_cast<int64_t>(message.size() * sizeof(int64_t)), 0);
      // A pool like rank 0's: its blocks, its format, this rank's heads and layers.
      if (!kv || !std::equal(h.begin() + 3, h.begin() + 8, last.begin() + 3)) {
        kv = std::make_unique<kv::KvCache>(kv_layout_for(model, format_of(h)), static_cast<int32_t>(h[3]));
      }
      if (!forward || h[8] != last[8] || h[9] != last[9]) {
        kernels::MatmulOptions matmul;
        matmul.precision = static_cast<kernels::MatmulPrecision>(h[8]);
        matmul.isa = static_cast<kernels::Isa>(h[9]);
        forward = std::make_unique<Forward>(model, pool, matmul);
      }
      last = h;
      kv->replay(std::span<const int64_t>(message).subspan(4 * n));
      batch.clear();
      int64_t n_out = 0;
      for (size_t i = 0; i < n; ++i) {
        batch.add(static_cast<int32_t>(message[i]), static_cast<int32_t>(message[n + i]),
                  static_cast<int32_t>(message[2 * n + i]), message[3 * n + i] != 0);
        n_out += message[3 * n + i] != 0;
      }
      forward->grow(static_cast<int64_t>(n), n_out);
      forward->split_micro(batch);
      forward->run_stage(*kv);
    }
  } catch (const std::exception& e) {
    par.world->abort(std::string("forward step failed: ") + e.what());
  }
}

void Forward::split_micro(const Batch& batch) {
  const int parts = model_.parallel()->pp;
  const int64_t n = batch.size();
  // Sequences in order of first appearance, dealt to `parts` micro-batches of
  // about n / parts tokens each (a sequence's tokens stay together: its
  // attention needs them in one pass). The same on every rank.
  int32_t max_seq = 0;
  for (const int32_t s : batch.seq_ids) max_seq = std::max(max_seq, s);
  std::vector<int64_t> count(static_cast<size_t>(max_seq) + 1, 0);
  std::vector<int32_t> order;
  for (const int32_t s : batch.seq_ids) {
    if (count[static_cast<size_t>(s)]++ == 0) order.push_back(s);
  }
  std::vector<int32_t> part_of(count.size(), 0);
  int32_t part = 0;
  int64_t taken = 0;
  for (const int32_t s : order) {
    part_of[static_cast<size_t>(s)] = part;
    taken += count[static_cast<size_t>(s)];
    if (part + 1 < parts && taken * parts >= n * (part + 1)) ++part;
  }
  const int32_t n_parts = part_of[static_cast<size_t>(order.back())] + 1;
  micro_.resize(static_cast<size_t>(n_parts));
  for (Micro& m : micro_) {
    m.own.clear();
    m.out_rows.clear();
    m.batch = n_parts == 1 ? &batch : &m.own;
  }
  int32_t out = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t u = static_cast<size_t>(i);
    Micro& m = micro_[static_cast<size_t>(part_of[static_cast<size_t>(batch.seq_ids[u])])];
    if (n_parts > 1) m.own.add(batch.tokens[u], batch.positions[u], batch.seq_ids[u], batch.want_logits[u] != 0);
    if (batch.want_logits[u]) m.out_rows.push_back(out++);
  }
  int64_t row = 0, out0 = 0;
  for (Micro& m : micro_) {
    m.row0 = row;
    m.out0 = out0;
    m.n_out = static_cast<int64_t>(m.out_rows.size());
    row += m.batch->size();
    out0 += m.n_out;
  }
}

void Forward::run_stage(kv::KvCache& kv) {
  const dist::Parallel& par = *model_.parallel();
  const ModelConfig& c = model_.local_config();
  const ShardRanges& r = model_.shard();
  const int64_t d = c.n_embd, vocab = r.vocab_end - r.vocab_begin;
  const int stage = par.stage(), t = par.tp_rank();
  for (const Micro& m : micro_) {
    const Batch& b = *m.batch;
    float* x = x_.data() + m.row0 * d;
    const int64_t x_bytes = b.size() * d * static_cast<int64_t>(sizeof(float));
    if (r.first_stage) {
      embed(b, x);
    } else {
      par.world->recv(x, x_bytes, par.world_rank(stage - 1, t));
    }
    attention_.plan(c, kv.layout(), b, q_.data(), att_.data(), pool_.size());
    layers(b, kv, x);
    if (!r.last_stage) {
      par.world->send(x, x_bytes, par.world_rank(stage + 1, t));
      continue;
    }
    float* logits = shard_logits_.data() + m.out0 * vocab;
    head(b, x, m.n_out, logits);
    if (par.world->rank() != 0 && m.n_out > 0) {
      par.world->send(logits, m.n_out * vocab * static_cast<int64_t>(sizeof(float)), 0);
    }
  }
  par.world->wait_sends();
}

void Forward::gather_logits(const Batch& batch) {
  const dist::Parallel& par = *model_.parallel();
  const int64_t n_vocab = model_.config().n_vocab;
  for (const Micro& m : micro_) {
    if (m.n_out == 0) continue;
    for (int t = 0; t < par.tp; ++t) {
      const int64_t vb = vocab_split(static_cast<int32_t>(n_vocab), t, par.tp);
      const int64_t vocab = vocab_split(static_cast<int32_t>(n_vocab), t + 1, par.tp) - vb;
      const int source = par.world_rank(par.pp - 1, t);
      const float* rows = shard_logits_.data() + m.out0 * vocab;
      if (source != 0) {
        if (static_cast<int64_t>(recv_logits_.size()) < m.n_out * vocab) recv_logits_.resize(static_cast<size_t>(m.n_out * vocab));
        par.world->recv(recv_logits_.data(), m.n_out * vocab * static_cast<int64_t>(sizeof(float)), source);
        rows = recv_logits_.data();
      }
      for (int64_t o = 0; o < m.n_out; ++o) {
        std::memcpy(logits_.data() + m.out_rows[static_cast<size_t>(o)] * n_vocab + vb, rows + o * vocab,
                    static_cast<size_t>(vocab) * sizeof(float));
      }
    }
  }
}

}  // namespace tokamak
