// Model::load_shard: one rank's slices of a GGUF model (Megatron layout).
//
// Row slices (the output rows of wq/wk/wv, ffn_gate/ffn_up, the vocabulary
// rows of token_embd/output) are one run of bytes each; column slices (the
// input columns of wo and ffn_down) are a run per row, so they must start and
// end on the type's block boundaries. Bytes are read with pread into one
// huge-page buffer: the file's mapping serves the header only, so no page of
// another rank's slices ever counts in this process's memory.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "io/gguf.h"
#include "model/model.h"

namespace tokamak {
namespace {

// One tensor of the shard: rows [row_begin, row_end) of the source, and of
// each row the values [col_begin, col_end).
struct Slice {
  TensorView* dest = nullptr;
  const io::GgufTensorInfo* info = nullptr;
  int64_t row_begin = 0, row_end = 0;
  int64_t col_begin = 0, col_end = 0;
  size_t offset = 0;  // in the shard's buffer
};

class ShardReader {
 public:
  ShardReader(const io::GgufFile& file, const std::filesystem::path& path) : file_(file), path_(path) {}
  ~ShardReader() {
    if (fd_ >= 0) ::close(fd_);
  }

  // Plans dest <- a slice of tensor `name`: rows and columns as Slice says
  // (a negative end: the whole dimension). 1-D tensors slice their values as columns.
  void add(TensorView& dest, const std::string& name, int64_t row_begin = 0, int64_t row_end = -1,
           int64_t col_begin = 0, int64_t col_end = -1) {
    const io::GgufTensorInfo* info = file_.find_tensor(name);
    if (info == nullptr) throw Error(file_.name() + ": missing tensor '" + name + "'");
    Slice s{&dest, info, row_begin, row_end < 0 ? info->ne[1] : row_end, col_begin, col_end < 0 ? info->ne[0] : col_end};
    const int64_t block = dtype_traits(info->type).block_size;
    if (s.col_begin % block != 0 || s.col_end % block != 0) {
      throw Error(file_.name() + ": tensor '" + name + "' is " + std::string(dtype_name(info->type)) +
                  ", whose blocks hold " + std::to_string(block) + " values: this rank's columns [" +
                  std::to_string(s.col_begin) + ", " + std::to_string(s.col_end) + ") do not start and end on a block");
    }
    s.offset = total_;
    total_ += (row_bytes(info->type, s.col_end - s.col_begin) * static_cast<size_t>(s.row_end - s.row_begin) + 63) / 64 * 64;
    slices_.push_back(s);
  }

  // Reads every planned slice; the views point into the returned buffer (writable).
  HugePageBuffer read() {
    HugePageBuffer buf(std::max<size_t>(total_, 1), "the weights of " + path_.string() + "'s shard");
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(path_.string() + ": cannot open: " + std::strerror(errno));
    for (const Slice& s : slices_) {
      const io::GgufTensorInfo& info = *s.info;
      const size_t src_row = row_bytes(info.type, info.ne[0]);
      const size_t col_off = row_bytes(info.type, s.col_begin);
      const size_t run = row_bytes(info.type, s.col_end - s.col_begin);
      const size_t base = file_.data_offset() + info.offset;
      std::byte* out = buf.data() + s.offset;
      if (run == src_row) {  // whole rows: one read
        read_at(out, run * static_cast<size_t>(s.row_end - s.row_begin), base + static_cast<size_t>(s.row_begin) * src_row);
      } else {
        for (int64_t r = s.row_begin; r < s.row_end; ++r) {
          read_at(out + static_cast<size_t>(r - s.row_begin) * run, run, base + static_cast<size_t>(r) * src_row + col_off);
        }
      }
      TensorView& v = *s.dest;
      v.type = info.type;
      v.n_dims = info.n_dims;
      v.ne = {s.col_end - s.col_begin, info.n_dims > 1 ? s.row_end - s.row_begin : 1, 1, 1};
      v.data = out;
    }
    return buf;
  }

 private:
  void read_at(std::byte* out, size_t n, size_t offset) const {
    while (n > 0) {
      const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
      if (got <= 0) {
        throw Error(path_.string() + ": read of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                    " failed: " + (got == 0 ? std::string("end of file") : std::strerror(errno)));
      }
      out += got;
      n -= static_cast<size_t>(got);
      offset += static_cast<size_t>(got);
    }
  }

  const io::GgufFile& file_;
  std::filesystem::path path_;
  std::vector<Slice> slices_;
  size_t total_ = 0;
  int fd_ = -1;
};

// [part * n / parts, (part + 1) * n / parts): near-equal contiguous parts.
int64_t part_begin(int64_t n, int part, int parts) { return n * part / parts; }

}  // namespace

Model Model::load_shard(const std::filesystem::path& path, const dist::Parallel& par, RepackFor repack) {
  // Header and shapes only: from_gguf checks every weight without reading it,
  // and keeps the file's layout (repacking would read every page); the
  // slices below are this rank's own and are what gets repacked.
  Model m = from_gguf(std::make_shared<const io::GgufFile>(io::GgufFile::open(path, MapMode::kMapped)), {}, kKeepLayout);
  const io::GgufFile& f = *m.gguf_;
  const ModelConfig& c = m.config_;
  const int tp = par.tp, pp = par.pp, t = par.tp_rank(), s = par.stage();
  if (c.n_kv_heads % tp != 0) {
    throw Error(f.name() + ": --tp " + std::to_string(tp) + " does not divide the model's " +
                std::to_string(c.n_kv_heads) + " KV heads (each rank holds whole KV heads and their " +
                std::to_string(c.n_heads / c.n_kv_heads) + " query heads each)");
  }
  if (pp > c.n_layers) {
    throw Error(f.name() + ": --pp " + std::to_string(pp) + " stages exceed the model's " +
                std::to_string(c.n_layers) + " layers");
  }
  ModelConfig& l = m.local_;
  ShardRanges& r = m.shard_;
  l.n_kv_heads = c.n_kv_heads / tp;
  l.n_heads = c.n_heads / tp;
  r.kv_head_begin = t * l.n_kv_heads;
  r.head_begin = t * l.n_heads;
  r.layer_begin = static_cast<int32_t>(part_begin(c.n_layers, s, pp));
  l.n_layers = static_cast<int32_t>(part_begin(c.n_layers, s + 1, pp)) - r.layer_begin;
  r.first_stage = s == 0;
  r.last_stage = s == pp - 1;
  r.vocab_begin = vocab_split(c.n_vocab, t, tp);
  r.vocab_end = vocab_split(c.n_vocab, t + 1, tp);
  // FFN columns go in units of ffn_down's block, so that its column slices
  // start on block boundaries (an uneven split when the blocks do not share out).
  int64_t unit = 1;
  for (int32_t i = r.layer_begin; i < r.layer_begin + l.n_layers; ++i) {
    const std::string name = "blk." + std::to_string(i) + ".ffn_down.weight";
    unit = std::max(unit, dtype_traits(f.find_tensor(name)->type).block_size);
  }
  const int64_t units = c.n_ff / unit;
  r.ff_begin = static_cast<int32_t>(part_begin(units, t, tp) * unit);
  l.n_ff = static_cast<int32_t>(part_begin(units, t + 1, tp) * unit) - r.ff_begin;
  if (l.n_ff <= 0 || units * unit != c.n_ff) {
    throw Error(f.name() + ": the FFN's " + std::to_string(c.n_ff) + " columns in blocks of " + std::to_string(unit) +
                " do not split across --tp " + std::to_string(tp) + " ranks");
  }

  ModelWeights w;
  ShardReader reader(f, path);
  const int64_t vb = r.vocab_begin, ve = r.vocab_end;
  if (r.first_stage) reader.add(w.token_embd, "token_embd.weight", vb, ve);
  // A tied LM head is the embedding's rows: read once when one stage holds both.
  const bool output_is_embd = c.tied_output && r.first_stage;
  if (r.last_stage) {
    reader.add(w.output_norm, "output_norm.weight");
    if (!output_is_embd) reader.add(w.output, c.tied_output ? "token_embd.weight" : "output.weight", vb, ve);
  }
  if (c.rope_freq_factors) reader.add(w.rope_freqs, "rope_freqs.weight");
  const int64_t hd = c.head_dim;
  const int64_t q0 = r.head_begin * hd, q1 = q0 + l.q_dim(), k0 = r.kv_head_begin * hd, k1 = k0 + l.kv_dim();
  const int64_t f0 = r.ff_begin, f1 = f0 + l.n_ff;
  w.layers.resize(static_cast<size_t>(l.n_layers));
  for (int32_t i = 0; i < l.n_layers; ++i) {
    LayerWeights& lw = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(r.layer_begin + i) + ".";
    reader.add(lw.attn_norm, p + "attn_norm.weight");
    reader.add(lw.wq, p + "attn_q.weight", q0, q1);
    reader.add(lw.wk, p + "attn_k.weight", k0, k1);
    reader.add(lw.wv, p + "attn_v.weight", k0, k1);
    reader.add(lw.wo, p + "attn_output.weight", 0, -1, q0, q1);
    if (c.qkv_bias) {
      reader.add(lw.bq, p + "attn_q.bias", 0, -1, q0, q1);
      reader.add(lw.bk, p + "attn_k.bias", 0, -1, k0, k1);
      reader.add(lw.bv, p + "attn_v.bias", 0, -1, k0, k1);
    }
    reader.add(lw.ffn_norm, p + "ffn_norm.weight");
    reader.add(lw.ffn_gate, p + "ffn_gate.weight", f0, f1);
    reader.add(lw.ffn_up, p + "ffn_up.weight", f0, f1);
    reader.add(lw.ffn_down, p + "ffn_down.weight", 0, -1, f0, f1);
  }
  HugePageBuffer slices = reader.read();
  if (output_is_embd && r.last_stage) w.output = w.token_embd;
  m.weights_ = std::move(w);
  // The slices are the model's own: repacked in place, then read-only.
  if (repack) m.prepare_weights(*repack, {slices.data(), slices.size()});
  slices.make_read_only();
  m.slices_ = std::make_shared<const HugePageBuffer>(std::move(slices));
  m.parallel_ = &par;
  return m;
}

}  // namespace tokamak
