#include "kv/kv_cache.h"

#include <string>

#include "core/error.h"

namespace tokamak::kv {

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
  BlockTable& t = mutable_table(seq);
  const int64_t bs = pool_.layout().block_size;
  const int64_t needed = (n_positions + bs - 1) / bs;
  while (static_cast<int64_t>(t.blocks.size()) < needed) t.blocks.push_back(pool_.allocate());
}

void KvCache::set_length(int32_t seq, int64_t n_tokens) {
  BlockTable& t = mutable_table(seq);
  const int64_t capacity = static_cast<int64_t>(t.blocks.size()) * pool_.layout().block_size;
  if (n_tokens > capacity) {
    throw Error("KV cache: sequence " + std::to_string(seq) + " length " + std::to_string(n_tokens) +
                " exceeds its reserved capacity " + std::to_string(capacity));
  }
  t.n_tokens = n_tokens;
}

void KvCache::free_sequence(int32_t seq) {
  BlockTable& t = mutable_table(seq);
  for (int32_t b : t.blocks) pool_.release(b);
  t.blocks.clear();
  t.n_tokens = 0;
}

}  // namespace tokamak::kv
