// Byte-level BPE merges (GPT-2 style): a word's bytes become their byte-level
// characters (see unicode::kByteToChar), then the adjacent pair with the
// lowest merge rank is merged, leftmost first among equal ranks, until no
// pair has a rank.
//
// Symbols are token ids. A text that merges name but the vocabulary lacks
// gets an id past the vocabulary, so the merge table is keyed by a pair of
// ints, never by strings.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak::bpe {

class Merges {
 public:
  // `merges[rank]` is "left right" (split at the first space after the
  // first byte); an entry without such a space can never apply and is
  // skipped; for a repeated pair the lowest rank counts. `vocab` must have
  // its index built. Cost: O(merges) hash inserts.
  static Merges build(const Vocab& vocab, std::span<const std::string> merges);

  size_t size() const { return n_merges_; }

  // Reusable memory for encode_word(), and a cache of the words it has
  // merged (running text repeats its words); one per thread or call.
  class Scratch {
   public:
    // Words up to this many bytes merge by scanning an array of pair ranks,
    // longer ones through a heap; both make the same merges (tests vary it).
    size_t short_word_bytes = 32;

   private:
    friend class Merges;
    struct Symbol {
      int32_t id;
      int32_t prev, next;
      uint32_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
    };
    struct Candidate {
      uint64_t order;                // rank << 32 | left: the heap pops the lowest
      int32_t right;
      int32_t result;                // the merged symbol
      uint32_t left_len, right_len;  // stale when either side has grown or died since
    };
    struct CacheSlot {
      uint64_t hash = 0;
      uint32_t key_offset = 0, key_len = 0;  // in cache_keys
      uint32_t ids_offset = 0, ids_len = 0;  // in cache_ids
      bool used = false;
    };
    std::vector<int32_t> ids, ranks, results;  // short words: symbols and their right pairs
    std::vector<Symbol> symbols;               // long words
    std::vector<Candidate> heap;
    std::string spelled;
    std::vector<CacheSlot> cache;  // open addressing, power-of-two size, at most half full
    size_t cache_entries = 0;
    std::string cache_keys;
    std::vector<int32_t> cache_ids;
  };

  // Appends the tokens of one pre-tokenized word (raw UTF-8 bytes). With
  // `ignore_merges`, a word whose byte-level spelling is a token is that token.
  // A symbol left over that is not a token becomes the tokens of its
  // single bytes, where such tokens exist (llama.cpp's fallback).
  // Cost: O(n^2) hash lookups for a word of n <= short_word_bytes (cheaper
  // than a heap at that size), O(n log n) above; a cached word is one lookup.
  void encode_word(const Vocab& vocab, std::string_view word, bool ignore_merges, Scratch& scratch,
                   std::vector<int32_t>& out) const;

 private:
  struct Slot {
    uint64_t key = kEmpty;  // left << 32 | right
    int32_t rank = 0;
    int32_t result = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    return k ^ (k >> 33);
  }
  const Slot* find(int32_t left, int32_t right) const;
  void insert(int32_t left, int32_t right, int32_t rank, int32_t result);

  static void heap_push(Scratch& scratch, const Scratch::Candidate& c);
  static Scratch::Candidate heap_pop(Scratch& scratch);
  void merge_short(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const;
  void merge_long(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const;
  void emit(const Vocab& vocab, int32_t symbol, std::vector<int32_t>& out) const;

  std::vector<Slot> slots_;  // (left, right) -> rank and merged symbol; linear probing
  uint64_t mask_ = 0;
  size_t n_merges_ = 0;
  std::array<int32_t, 256> byte_symbol_{};  // byte -> symbol of its byte-level character
  int32_t n_vocab_ = 0;
  std::vector<std::string> extra_text_;     // symbol n_vocab_ + i: a text that is not a token
};

}  // namespace tokamak::bpe
