#include "tokenizer/wpm.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tokamak::wpm {

namespace {

// BERT's _is_chinese_char: the CJK Unified Ideographs blocks and their
// extensions and compatibility blocks (as the Hugging Face code spells them).
bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

std::vector<std::string> split_words(std::string_view text, const Normalizer& normalizer) {
  std::vector<uint32_t> cps = unicode::decode_utf8(text);
  if (normalizer.strip_accents) {
    std::vector<uint32_t> nfd;
    nfd.reserve(cps.size());
    for (const uint32_t cp : cps) unicode::append_nfd(cp, nfd);
    cps.swap(nfd);
  }
  std::vector<std::string> words(1);
  for (const uint32_t cp : cps) {
    const uint16_t flags = unicode::flags(cp);
    if (flags & unicode::kWhitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == unicode::kReplacement || (flags & unicode::kControl)) continue;
    if (normalizer.strip_accents && (flags & unicode::kMark)) continue;
    const uint32_t c = normalizer.lowercase ? unicode::to_lower(cp) : cp;
    if ((flags & unicode::kPunctuation) || (cp < 0x7F && (flags & unicode::kSymbol)) || is_cjk_ideograph(cp)) {
      if (!words.back().empty()) words.emplace_back();
      unicode::append_utf8(words.back(), c);
      words.emplace_back();
    } else {
      unicode::append_utf8(words.back(), c);
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void encode(const Vocab& vocab, std::string_view text, const Normalizer& normalizer, size_t max_piece_bytes,
            std::vector<int32_t>& out) {
  std::string word = "\xE2\x96\x81";  // U+2581 marks the start of a word
  for (const std::string& w : split_words(text, normalizer)) {
    word.resize(3);
    word += w;
    const size_t n = word.size();
    const size_t start = out.size();
    bool spelled = true;
    for (size_t i = 0; i < n && spelled;) {
      spelled = false;
      for (size_t j = std::min(n, i + max_piece_bytes + 1); j > i; --j) {
        if (const int32_t id = vocab.find(std::string_view(word).substr(i, j - i)); id >= 0) {
          out.push_back(id);
          i = j;
          spelled = true;
          break;
        }
      }
    }
    if (!spelled) {
      out.resize(start);
      if (!vocab.valid(vocab.unk)) {
        throw Error("tokenizer: the word '" + w + "' has no pieces and the vocabulary has no unknown token");
      }
      out.push_back(vocab.unk);
    }
  }
}

}  // namespace tokamak::wpm
