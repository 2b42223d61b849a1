#include "model/model.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/memory_info.h"
#include "io/gguf.h"
#include "io/llama2c.h"
#include "kernels/interleave.h"
#include "kernels/quants.h"
#include "kernels/widen.h"

namespace tokamak {
namespace {

std::string shape_string(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[static_cast<size_t>(i)]);
  return s + "]";
}

// Checks that a weight has the expected 1-D or 2-D shape and a type the kernels read.
void check_weight(const std::string& source, const std::string& name, const TensorView& t, int64_t ne0, int64_t ne1,
                  bool norm) {
  const bool shape_ok = t.ne[0] == ne0 && t.ne[1] == ne1 && t.ne[2] == 1 && t.ne[3] == 1;
  if (!shape_ok) {
    throw Error(source + ": tensor '" + name + "' has shape " + shape_string(t) + ", expected [" +
                std::to_string(ne0) + (ne1 > 1 ? ", " + std::to_string(ne1) : "") + "]");
  }
  if (norm ? t.type != DType::F32 : !kernels::can_dequantize(t.type)) {
    throw Error(source + ": tensor '" + name + "' has type " + std::string(dtype_name(t.type)) +
                (norm ? ", norms must be f32" : ", which this build cannot compute with"));
  }
}

void check_weights(const std::string& source, const ModelConfig& c, const ModelWeights& w) {
  check_weight(source, "token_embd.weight", w.token_embd, c.n_embd, c.n_vocab, false);
  check_weight(source, "output_norm.weight", w.output_norm, c.n_embd, 1, true);
  check_weight(source, "output.weight", w.output, c.n_embd, c.n_vocab, false);
  if (c.rope_freq_factors) check_weight(source, "rope_freqs.weight", w.rope_freqs, c.rope_dim / 2, 1, true);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = "blk." + std::to_string(i) + ".";
    check_weight(source, p + "attn_norm.weight", l.attn_norm, c.n_embd, 1, true);
    check_weight(source, p + "attn_q.weight", l.wq, c.n_embd, c.q_dim(), false);
    check_weight(source, p + "attn_k.weight", l.wk, c.n_embd, c.kv_dim(), false);
    check_weight(source, p + "attn_v.weight", l.wv, c.n_embd, c.kv_dim(), false);
    check_weight(source, p + "attn_output.weight", l.wo, c.q_dim(), c.n_embd, false);
    if (c.qkv_bias) {
      check_weight(source, p + "attn_q.bias", l.bq, c.q_dim(), 1, true);
      check_weight(source, p + "attn_k.bias", l.bk, c.kv_dim(), 1, true);
      check_weight(source, p + "attn_v.bias", l.bv, c.kv_dim(), 1, true);
    }
    check_weight(source, p + "ffn_norm.weight", l.ffn_norm, c.n_embd, 1, true);
    check_weight(source, p + "ffn_gate.weight", l.ffn_gate, c.n_embd, c.n_ff, false);
    check_weight(source, p + "ffn_up.weight", l.ffn_up, c.n_embd, c.n_ff, false);
    check_weight(source, p + "ffn_down.weight", l.ffn_down, c.n_ff, c.n_embd, false);
  }
}

}  // namespace

Model Model::load(const std::filesystem::path& path, MapMode weights, RepackFor repack) {
  // The format is the file's first bytes' to say, never its name: "GGUF" is
  // GGUF; llama2.c checkpoints have no magic (their header is 7 int32s), so
  // anything else is tried as one, and an error says both were considered.
  std::array<char, 4> magic{};
  std::streamsize got = 0;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path.string() + ": cannot open model file: " + std::strerror(errno));
    in.read(magic.data(), 4);
    got = in.gcount();
  }
  if (got == 4 && std::memcmp(magic.data(), "GGUF", 4) == 0) {
    auto file = std::make_shared<io::GgufFile>(io::GgufFile::open(path, weights));
    Model m;
    file->rewrite([&](std::span<std::byte> writable) { m = from_gguf(file, writable, repack); });
    return m;
  }
  try {
    return from_llama2c(std::make_shared<const io::Llama2cCheckpoint>(io::Llama2cCheckpoint::open(path)));
  } catch (const Error& e) {
    std::string start;
    for (std::streamsize i = 0; i < got; ++i) {
      const auto c = static_cast<unsigned char>(magic[static_cast<size_t>(i)]);
      char shown[8];
      std::snprintf(shown, sizeof shown, c >= 0x20 && c < 0x7F ? "%c" : "\\x%02x", c);
      start += shown;
    }
    throw Error(path.string() + ": not GGUF (" +
                (got == 0 ? std::string("the file is empty") : "it starts with '" + start + "', not 'GGUF'") +
                "), and not a readable llama2.c checkpoint: " + e.what());
  }
}

Model Model::from_gguf(std::shared_ptr<const io::GgufFile> file, std::span<std::byte> writable, RepackFor repack) {
  Model m;
  m.format_ = ModelFormat::Gguf;
  m.config_ = ModelConfig::from_gguf(*file);
  const io::GgufFile& f = *file;
  auto tensor = [&](const std::string& name) {
    const io::GgufTensorInfo* info = f.find_tensor(name);
    if (info == nullptr) throw Error(f.name() + ": missing tensor '" + name + "'");
    return f.view(*info);
  };
  ModelWeights& w = m.weights_;
  w.token_embd = tensor("token_embd.weight");
  w.output_norm = tensor("output_norm.weight");
  w.output = m.config_.tied_output ? w.token_embd : tensor("output.weight");
  if (m.config_.rope_freq_factors) w.rope_freqs = tensor("rope_freqs.weight");
  w.layers.resize(static_cast<size_t>(m.config_.n_layers));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    l.attn_norm = tensor(p + "attn_norm.weight");
    l.wq = tensor(p + "attn_q.weight");
    l.wk = tensor(p + "attn_k.weight");
    l.wv = tensor(p + "attn_v.weight");
    l.wo = tensor(p + "attn_output.weight");
    if (m.config_.qkv_bias) {
      l.bq = tensor(p + "attn_q.bias");
      l.bk = tensor(p + "attn_k.bias");
      l.bv = tensor(p + "attn_v.bias");
    }
    l.ffn_norm = tensor(p + "ffn_norm.weight");
    l.ffn_gate = tensor(p + "ffn_gate.weight");
    l.ffn_up = tensor(p + "ffn_up.weight");
    l.ffn_down = tensor(p + "ffn_down.weight");
  }
  check_weights(f.name(), m.config_, w);
  m.local_ = m.config_;
  m.shard_.vocab_end = m.config_.n_vocab;
  if (repack) m.prepare_weights(*repack, writable);
  m.gguf_ = std::move(file);
  return m;
}

namespace {

// t's bytes, writable, when they lie in `bytes` (memory the model owns);
// else null.
std::byte* within(std::span<std::byte> bytes, const TensorView& t) {
  if (bytes.empty() || t.data < bytes.data() || t.data + t.n_bytes() > bytes.data() + bytes.size()) return nullptr;
  return bytes.data() + (t.data - bytes.data());
}

// kernels::widen_rows of all of t into dst, its rows split between the
// machine's cores (a load widens every block of the model: ~0.3 s for a
// 1.1B IQ3_S on one core).
void widen_in_parallel(const TensorView& t, DType to, std::byte* dst) {
  const int64_t rows = t.n_rows();
  const int64_t parts = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(1, rows / 64));
  const size_t from_row = t.row_stride(), to_row = row_bytes(to, t.ne[0]);
  auto part = [&](int64_t p) {
    const int64_t begin = rows * p / parts, end = rows * (p + 1) / parts;
    kernels::widen_rows(t.type, t.data + static_cast<size_t>(begin) * from_row, to, dst + static_cast<size_t>(begin) * to_row,
                        end - begin, t.ne[0]);
  };
  std::vector<std::thread> helpers;
  for (int64_t p = 1; p < parts; ++p) helpers.emplace_back(part, p);
  part(0);
  for (std::thread& h : helpers) h.join();
}

}  // namespace

std::vector<TensorView*> Model::matmul_weights() {
  std::vector<TensorView*> out;
  for (LayerWeights& l : weights_.layers) {
    for (TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      if (t->data != nullptr) out.push_back(t);
    }
  }
  // A tied output is token_embd, whose rows the forward pass reads one by one.
  if (weights_.output.data != nullptr && weights_.output.data != weights_.token_embd.data) out.push_back(&weights_.output);
  return out;
}

void Model::widen_weights(kernels::Isa isa, std::span<std::byte> writable) {
  std::vector<std::pair<TensorView*, DType>> targets;
  size_t widened_bytes = 0;
  for (TensorView* t : matmul_weights()) {
    if (const std::optional<DType> to = kernels::widened_type(t->type, isa)) {
      targets.emplace_back(t, *to);
      widened_bytes += row_bytes(*to, t->ne[0]) * static_cast<size_t>(t->n_rows());
    }
  }
  // The rule of MapMode::kAuto's copy: the new bytes may take up to half of
  // the memory available now; a model close to the machine's size keeps its
  // compact format (and the speed of its kernels).
  const std::optional<int64_t> available = memory_available_bytes();
  if (targets.empty() || !available || widened_bytes > static_cast<uint64_t>(*available) / 2) return;
  auto buffer = std::make_shared<HugePageBuffer>(widened_bytes, "widened weights");
  size_t used = 0;
  for (auto [t, to] : targets) {
    std::byte* dst = buffer->data() + used;
    used += row_bytes(to, t->ne[0]) * static_cast<size_t>(t->n_rows());
    widen_in_parallel(*t, to, dst);
    // Nothing reads the compact bytes again. In the model's own copy of the
    // file they would stay resident, so they go back to the system; pages of
    // a mapped file are the page cache's to evict.
    if (std::byte* own = within(writable, *t)) release_pages(own, t->n_bytes());
    t->data = dst;
    t->type = to;
  }
  widened_ = std::move(buffer);
}

void Model::interleave_weights(kernels::Isa isa, std::span<std::byte> writable) {
  std::vector<TensorView*> targets;
  for (TensorView* t : matmul_weights()) {
    if (kernels::prefers_interleaved(t->type, isa) && t->n_rows() >= kernels::kInterleaveRows) targets.push_back(t);
  }
  if (targets.empty()) return;

  // Repacked in place where the bytes are this model's own: its copy of the
  // file, or the widened weights.
  const std::span<std::byte> widened =
      widened_ ? std::span<std::byte>(widened_->data(), widened_->size()) : std::span<std::byte>{};
  auto own = [&](const TensorView& t) {
    std::byte* p = within(writable, t);
    return p != nullptr ? p : within(widened, t);
  };
  size_t owned_bytes = 0;
  for (const TensorView* t : targets) {
    if (own(*t) == nullptr) owned_bytes += t->n_bytes();
  }
  std::shared_ptr<HugePageBuffer> owned;
  if (owned_bytes > 0) owned = std::make_shared<HugePageBuffer>(owned_bytes, "interleaved weights");
  size_t used = 0;
  for (TensorView* t : targets) {
    std::byte* dst = own(*t);
    if (dst != nullptr) {
      kernels::interleave_rows_in_place(t->type, dst, t->n_rows(), t->ne[0]);
    } else {
      dst = owned->data() + used;
      used += t->n_bytes();
      kernels::interleave_rows(t->type, t->data, dst, t->n_rows(), t->ne[0]);
    }
    t->data = dst;
    t->layout = RowLayout::kInterleaved8;
  }
  if (owned) owned->make_read_only();
  interleaved_ = std::move(owned);
}

Model Model::from_llama2c(std::shared_ptr<const io::Llama2cCheckpoint> ck) {
  Model m;
  m.format_ = ModelFormat::Llama2c;
  m.config_ = ModelConfig::from_llama2c(ck->config());
  ModelWeights& w = m.weights_;
  w.token_embd = ck->token_embedding;
  w.output_norm = ck->rms_final;
  w.output = ck->wcls;
  for (const io::Llama2cLayer& src : ck->layers) {
    LayerWeights l;
    l.attn_norm = src.rms_att;
    l.wq = src.wq;
    l.wk = src.wk;
    l.wv = src.wv;
    l.wo = src.wo;
    l.ffn_norm = src.rms_ffn;
    l.ffn_gate = src.w1;
    l.ffn_up = src.w3;
    l.ffn_down = src.w2;
    w.layers.push_back(l);
  }
  check_weights("llama2.c checkpoint", m.config_, w);
  m.local_ = m.config_;
  m.shard_.vocab_end = m.config_.n_vocab;
  m.llama2c_ = std::move(ck);
  return m;
}

std::vector<const TensorView*> Model::pass_tensors() const {
  std::vector<const TensorView*> out;
  auto add = [&](const TensorView& t) {
    if (t.data != nullptr) out.push_back(&t);  // absent optional tensors (biases, rope_freqs) have no data
  };
  for (const LayerWeights& l : weights_.layers) {
    for (const TensorView* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.ffn_norm, &l.ffn_gate,
                                &l.ffn_up, &l.ffn_down}) {
      add(*t);
    }
  }
  add(weights_.output_norm);
  add(weights_.output);
  add(weights_.rope_freqs);
  return out;
}

size_t Model::weight_bytes() const {
  size_t total = 0;
  for (const TensorView* t : pass_tensors()) total += t->n_bytes();
  return total;
}

}  // namespace tokamak
