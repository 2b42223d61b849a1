#include "kv/kv_cache.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace tokamak::kv {
namespace {

enum Op : int64_t { kStart = 0, kReserve, kPrepareWrite, kSetLength, kFork, kFree, kAdopt, kRegisterKey };

}  // namespace

void KvCache::log(std::initializer_list<int64_t> entry) {
  if (journaling_) journal_.insert(journal_.end(), entry);
}

void KvCache::start_journal() {
  journaling_ = true;
  journal_.assign(1, kStart);
}

std::vector<int64_t> KvCache::take_journal() {
  std::vector<int64_t> out;
  out.swap(journal_);
  return out;
}

void KvCache::replay(std::span<const int64_t> j) {
  size_t i = 0;
  const auto arg = [&]() {
    if (i >= j.size()) throw Error("KV journal: entry cut short at " + std::to_string(i) + " of " + std::to_string(j.size()));
    return j[i++];
  };
  while (i < j.size()) {
    const int64_t op = arg();
    if (op < kStart || op > kRegisterKey) throw Error("KV journal: unknown entry " + std::to_string(op));
    if (op == kStart) {  // the journaled cache was fresh here
      *this = KvCache(layout(), pool_.n_blocks());
      continue;
    }
    // Arguments are read before the call: the order of evaluation of a call's arguments is unspecified.
    const int64_t a = arg(), b = op == kFree ? 0 : arg(), c = op == kPrepareWrite ? arg() : 0;
    std::vector<int32_t> blocks;
    if (op == kAdopt) {
      const int64_t n = arg();
      if (n < 0 || n > static_cast<int64_t>(j.size() - i)) throw Error("KV journal: adopt of " + std::to_string(n) + " blocks");
      for (int64_t k = 0; k < n; ++k) blocks.push_back(static_cast<int32_t>(arg()));
    }
    const auto seq = static_cast<int32_t>(a);
    try {
      switch (op) {
        case kReserve: reserve(seq, b); break;
        case kPrepareWrite: prepare_write(seq, b, c); break;
        case kSetLength: set_length(seq, b); break;
        case kFork: fork(seq, static_cast<int32_t>(b)); break;
        case kFree: free_sequence(seq); break;
        case kAdopt: adopt(seq, blocks, b); break;
        case kRegisterKey: register_key(seq, static_cast<uint64_t>(b)); break;
        default: break;
      }
    } catch (const Error&) {
      // The journaled cache threw at this same call (see start_journal()).
    }
  }
}

bool KvCache::register_key(int32_t block, uint64_t key) {
  log({kRegisterKey, block, static_cast<int64_t>(key)});
  return pool_.register_key(block, key);
}

BlockTable& KvCache::mutable_table(int32_t seq) {
  if (seq < 0) throw Error("KV cache: negative sequence id " + std::to_string(seq));
  if (static_cast<size_t>(seq) >= tables_.size()) tables_.resize(static_cast<size_t>(seq) + 1);
  return tables_[static_cast<size_t>(seq)];
}

const BlockTable& KvCache::table(int32_t seq) const {
  static const BlockTable kEmpty;
  if (seq < 0 || static_cast<size_t>(seq) >= tables_.size()) return kEmpty;
  return tables_[static_cast<size_t>(seq)];
}

void KvCache::reserve(int32_t seq, int64_t n_positions) {
  log({kReserve, seq, n_positions});
  reserve_blocks(seq, n_positions);
}

void KvCache::reserve_blocks(int32_t seq, int64_t n_positions) {
  BlockTable& t = mutable_table(seq);
  const int64_t bs = layout().format.block_size;
  const int64_t needed = (n_positions + bs - 1) / bs;
  while (static_cast<int64_t>(t.blocks.size()) < needed) t.blocks.push_back(pool_.allocate());
}

void KvCache::make_private(int32_t& block) {
  if (pool_.refcount(block) == 1) return;
  const int32_t copy = pool_.copy(block);
  pool_.release(block);
  block = copy;
}

void KvCache::prepare_write(int32_t seq, int64_t begin, int64_t end) {
  log({kPrepareWrite, seq, begin, end});
  if (begin < 0 || end < begin) {
    throw Error("KV cache: bad write range [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
  }
  reserve_blocks(seq, end);
  BlockTable& t = mutable_table(seq);
  const KvLayout& l = layout();
  const int64_t bs = l.format.block_size;
  for (int64_t b = begin / bs; b < (end + bs - 1) / bs; ++b) make_private(t.blocks[static_cast<size_t>(b)]);
  t.step_end = std::max(t.n_tokens, end);
  if (!l.has_recent() || begin == end) return check_table(seq);
  if (t.recent.empty()) {  // all of the ring or none of it
    std::vector<int32_t> ring;
    try {
      while (static_cast<int32_t>(ring.size()) < l.recent_blocks()) ring.push_back(pool_.allocate());
    } catch (const Error&) {
      for (int32_t b : ring) pool_.release(b);
      throw;
    }
    t.recent = std::move(ring);
  }
  // Only positions among the newest ring_rows of the step reach the ring.
  const int64_t ring = l.recent_ring_rows();
  const int64_t first = std::max(begin, t.step_end - ring);
  if (end - first >= ring) {
    for (int32_t& b : t.recent) make_private(b);
  } else {
    const int64_t rows = l.recent_block_rows();
    for (int64_t p = first; p < end; ++p) {
      const int64_t r = p % ring;
      if (p == first || r % rows == 0) make_private(t.recent[static_cast<size_t>(r / rows)]);
    }
  }
  check_table(seq);
}

void KvCache::check_write(int32_t seq, int32_t layer, int64_t pos) const {
  const int64_t bs = layout().format.block_size;
  if (layer < 0 || layer >= layout().n_layers || pos < 0 ||
      pos >= static_cast<int64_t>(table(seq).blocks.size()) * bs) {
    throw Error("KV cache: write of layer " + std::to_string(layer) + " position " + std::to_string(pos) +
                " outside sequence " + std::to_string(seq) + "'s table");
  }
}

void KvCache::write(int32_t seq, int32_t layer, int64_t pos, const float* k, const float* v) {
  write_stored(seq, layer, pos, k, v);
  write_recent(seq, layer, pos, k, v);
}

void KvCache::write_stored(int32_t seq, int32_t layer, int64_t pos, const float* k, const float* v) {
  check_write(seq, layer, pos);
  const BlockTable& t = table(seq);
  const KvLayout& l = layout();
  const int64_t bs = l.format.block_size;
  const int32_t block = t.blocks[static_cast<size_t>(pos / bs)];
  if (pool_.refcount(block) != 1) {
    throw Error("KV cache: write into shared block " + std::to_string(block) + " (position " + std::to_string(pos) +
                " of sequence " + std::to_string(seq) + " was not prepared)");
  }
  const int d = l.head_dim;
  const int64_t row = pos % bs;
  for (int h = 0; h < l.n_kv_heads; ++h) {
    kernels::quantize_kv_row(l.format.k_type, k + static_cast<int64_t>(h) * d, d,
                             pool_.chunk(block, layer, h, true) + row * l.k_head_row_bytes());
    kernels::quantize_kv_row(l.format.v_type, v + static_cast<int64_t>(h) * d, d,
                             pool_.chunk(block, layer, h, false) + row * l.v_head_row_bytes());
  }
}

void KvCache::write_recent(int32_t seq, int32_t layer, int64_t pos, const float* k, const float* v) {
  check_write(seq, layer, pos);
  const BlockTable& t = table(seq);
  const KvLayout& l = layout();
  const int d = l.head_dim;
  const int64_t ring = l.recent_ring_rows();
  if (!l.has_recent() || pos < t.step_end - ring) return;
  const int64_t rows = l.recent_block_rows();
  const int64_t r = pos % ring;
  const int32_t rb = t.recent.empty() ? -1 : t.recent[static_cast<size_t>(r / rows)];
  if (rb < 0 || pool_.refcount(rb) != 1) {
    throw Error("KV cache: write of position " + std::to_string(pos) + " of sequence " + std::to_string(seq) +
                " into an unprepared f16 ring block");
  }
  const int64_t at = r % rows * l.recent_head_row_bytes();
  for (int h = 0; h < l.n_kv_heads; ++h) {
    if (l.k_recent()) {
      kernels::quantize_kv_row(kernels::KvType::F16, k + static_cast<int64_t>(h) * d, d,
                               pool_.chunk(rb, layer, h, true) + at);
    }
    if (l.v_recent()) {
      kernels::quantize_kv_row(kernels::KvType::F16, v + static_cast<int64_t>(h) * d, d,
                               pool_.chunk(rb, layer, h, false) + at);
    }
  }
}

kernels::KvView KvCache::view(int32_t seq, int32_t layer, int64_t query) const {
  const BlockTable& t = table(seq);
  const KvLayout& l = layout();
  kernels::KvView v;
  const int32_t n_blocks = pool_.n_blocks();
  // Both the quantized blocks and the ring's: a chunk a block, the heads' planes n_blocks chunks apart.
  auto set_planes = [&](kernels::KvPages& pages, bool k_here, bool v_here) {
    pages.k_base = k_here ? pool_.data() + l.plane_offset(layer, 0, true, n_blocks) : nullptr;
    pages.v_base = v_here ? pool_.data() + l.plane_offset(layer, 0, false, n_blocks) : nullptr;
    pages.k_block_stride = l.k_chunk_bytes();
    pages.v_block_stride = l.v_chunk_bytes();
    pages.k_head_stride = n_blocks * l.k_chunk_bytes();
    pages.v_head_stride = n_blocks * l.v_chunk_bytes();
  };
  kernels::KvPages& m = v.main;
  set_planes(m, true, true);
  m.block_table = t.blocks.data();
  m.block_size = l.format.block_size;
  m.k_type = l.format.k_type;
  m.v_type = l.format.v_type;
  m.k_row_bytes = static_cast<int32_t>(l.k_head_row_bytes());
  m.v_row_bytes = static_cast<int32_t>(l.v_head_row_bytes());
  if (!l.has_recent() || t.recent.empty()) return v;
  kernels::KvPages& r = v.recent;
  set_planes(r, l.k_recent(), l.v_recent());
  r.block_table = t.recent.data();
  r.block_size = l.recent_block_rows();
  r.ring_rows = l.recent_ring_rows();
  r.k_type = r.v_type = kernels::KvType::F16;
  r.k_row_bytes = r.v_row_bytes = static_cast<int32_t>(l.recent_head_row_bytes());
  const int64_t begin = std::max(l.recent_begin(query), t.recent_from);
  if (l.k_recent()) v.k_recent_begin = begin;
  if (l.v_recent()) v.v_recent_begin = begin;
  return v;
}

void KvCache::set_length(int32_t seq, int64_t n_tokens) {
  log({kSetLength, seq, n_tokens});
  BlockTable& t = mutable_table(seq);
  const int64_t capacity = static_cast<int64_t>(t.blocks.size()) * layout().format.block_size;
  if (n_tokens < 0 || n_tokens > capacity) {
    throw Error("KV cache: sequence " + std::to_string(seq) + " length " + std::to_string(n_tokens) +
                " outside its reserved capacity " + std::to_string(capacity));
  }
  const int64_t written_end = std::max(t.n_tokens, t.step_end);
  if (n_tokens < written_end) {
    // Ring rows hold positions [written_end - ring, written_end); a position
    // below that kept its row only if nothing overwrote it, so after the cut
    // a row is current for positions >= n_tokens (rewritten from now on) or
    // >= max(recent_from, written_end - ring) (untouched since written).
    t.recent_from = std::min(n_tokens, std::max(t.recent_from, written_end - layout().recent_ring_rows()));
  }
  t.n_tokens = n_tokens;
  t.step_end = n_tokens;
  check_table(seq);
}

void KvCache::fork(int32_t src, int32_t dst) {
  log({kFork, src, dst});
  if (src == dst) throw Error("KV cache: fork of sequence " + std::to_string(src) + " into itself");
  if (!table(dst).blocks.empty() || !table(dst).recent.empty()) {
    throw Error("KV cache: fork into sequence " + std::to_string(dst) + ", which holds KV (free it first)");
  }
  const BlockTable source = table(src);  // copied: mutable_table(dst) may grow tables_
  for (int32_t b : source.blocks) pool_.retain(b);
  for (int32_t b : source.recent) pool_.retain(b);
  BlockTable& t = mutable_table(dst);
  t = source;
  t.step_end = t.n_tokens;
  check_table(dst);
}

void KvCache::free_sequence(int32_t seq) {
  log({kFree, seq});
  BlockTable& t = mutable_table(seq);
  for (auto b = t.recent.rbegin(); b != t.recent.rend(); ++b) pool_.release(*b);
  for (auto b = t.blocks.rbegin(); b != t.blocks.rend(); ++b) pool_.release(*b);
  t = BlockTable{};
}

void KvCache::adopt(int32_t seq, const std::vector<int32_t>& blocks, int64_t n_tokens) {
  if (journaling_) {
    journal_.insert(journal_.end(), {kAdopt, seq, n_tokens, static_cast<int64_t>(blocks.size())});
    journal_.insert(journal_.end(), blocks.begin(), blocks.end());
  }
  if (!table(seq).blocks.empty() || !table(seq).recent.empty()) {
    throw Error("KV cache: adopt into sequence " + std::to_string(seq) + ", which holds KV (free it first)");
  }
  if (n_tokens < 0 || n_tokens > static_cast<int64_t>(blocks.size()) * layout().format.block_size) {
    throw Error("KV cache: adopt of " + std::to_string(n_tokens) + " positions in " + std::to_string(blocks.size()) +
                " blocks");
  }
  BlockTable& t = mutable_table(seq);
  for (int32_t b : blocks) {
    pool_.retain(b);
    t.blocks.push_back(b);
  }
  t.n_tokens = t.step_end = t.recent_from = n_tokens;
  check_table(seq);
}

int32_t KvCache::blocks_needed(int32_t seq, int64_t begin, int64_t end) const {
  if (end <= begin) return 0;
  const BlockTable& t = table(seq);
  const int64_t bs = layout().format.block_size;
  const int64_t have = static_cast<int64_t>(t.blocks.size());
  const int64_t last = (end + bs - 1) / bs;
  int64_t n = std::max<int64_t>(0, last - have);
  for (int64_t b = begin / bs; b < std::min(last, have); ++b) n += pool_.refcount(t.blocks[static_cast<size_t>(b)]) > 1;
  if (layout().has_recent()) {
    if (t.recent.empty()) {
      n += layout().recent_blocks();
    } else {
      for (int32_t b : t.recent) n += pool_.refcount(b) > 1;
    }
  }
  return static_cast<int32_t>(n);
}

void KvCache::check_table(int32_t seq) const {
  const BlockTable& t = table(seq);
  // Built only when an invariant fails: this runs every decode step, which allocates nothing.
  const auto who = [seq] { return "KV cache invariant broken: sequence " + std::to_string(seq); };
  if (t.n_tokens < 0 || t.n_tokens > static_cast<int64_t>(t.blocks.size()) * layout().format.block_size) {
    throw Error(who() + " holds " + std::to_string(t.n_tokens) + " positions in " + std::to_string(t.blocks.size()) +
                " blocks");
  }
  if (!t.recent.empty() && static_cast<int32_t>(t.recent.size()) != layout().recent_blocks()) {
    throw Error(who() + " has a ring of " + std::to_string(t.recent.size()) + " blocks");
  }
  for (const auto* list : {&t.blocks, &t.recent}) {
    for (int32_t b : *list) {
      if (pool_.refcount(b) < 1) throw Error(who() + " names free block " + std::to_string(b));
    }
  }
}

void KvCache::check_invariants() const {
  pool_.check_invariants();
  std::vector<int32_t> refs(static_cast<size_t>(pool_.n_blocks()), 0);
  for (size_t s = 0; s < tables_.size(); ++s) {
    const BlockTable& t = tables_[s];
    check_table(static_cast<int32_t>(s));
    for (const auto* list : {&t.blocks, &t.recent}) {
      for (int32_t b : *list) {
        if (b < 0 || b >= pool_.n_blocks())
          throw Error("KV cache invariant broken: sequence " + std::to_string(s) + " names block " + std::to_string(b));
        ++refs[static_cast<size_t>(b)];
      }
    }
  }
  for (int32_t b = 0; b < pool_.n_blocks(); ++b) {
    if (refs[static_cast<size_t>(b)] != pool_.refcount(b)) {
      throw Error("KV cache invariant broken: block " + std::to_string(b) + " has refcount " +
                  std::to_string(pool_.refcount(b)) + " but " + std::to_string(refs[static_cast<size_t>(b)]) +
                  " table entries");
    }
  }
}

}  // namespace tokamak::kv
