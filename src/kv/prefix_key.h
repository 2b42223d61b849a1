// Prefix-cache keys: a full block of KV is named by what determines its
// contents, so equal keys mean reusable blocks. key = H(parent key, the block's
// token ids, salt); the parent chain makes a key stand for the whole prefix up
// to the block's end, and the salt (model shape and KV storage format) keeps
// blocks of one format from serving another. 64-bit keys: a collision between
// two different prefixes needs ~2^32 cached blocks to become likely.
#pragma once

#include <cstdint>
#include <span>

namespace tokamak::kv {

// splitmix64's finalizer: a bijection with full avalanche.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The key of the block after `parent` (0 for the first block) holding `tokens`.
inline uint64_t prefix_block_key(uint64_t parent, std::span<const int32_t> tokens, uint64_t salt) {
  uint64_t h = mix64(parent ^ 0x9E3779B97F4A7C15ull) ^ mix64(salt + tokens.size());
  for (int32_t t : tokens) h = mix64(h ^ static_cast<uint32_t>(t)) + 0x9E3779B97F4A7C15ull;
  return h == 0 ? 1 : h;  // 0 is the empty prefix
}

}  // namespace tokamak::kv
