#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"

namespace tokamak {

namespace {

constexpr std::string_view kSpace = " ";
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";   // U+2581 LOWER ONE EIGHTH BLOCK
constexpr std::string_view kUnknownGlyph = "\xE2\x96\x85";  // U+2585, llama.cpp's text for <unk>

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos);
  s = std::move(out);
}

// C isspace in the "C" locale, which llama.cpp's strip rules use.
bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Texts that end a reply in the chat formats llama.cpp knows; the first one a
// vocabulary has is its EOT when the file names none.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",  // DeepSeek's <｜end▁of▁sentence｜>
    "<end_of_utterance>",
};
// More texts that end a reply without being the EOT.
constexpr std::string_view kEndOfGenerationTexts[] = {"<|eom_id|>"};

}  // namespace

// A piece of the input: a run of plain text, or a special token matched whole.
struct Tokenizer::Fragment {
  int32_t token = -1;  // -1: plain text [begin, begin + len)
  size_t begin = 0;
  size_t len = 0;
};

// Per-call memory for encode(): the BPE words and merge scratch (with its
// cache of words already merged).
struct Tokenizer::EncodeState {
  Words words;
  bpe::Merges::Scratch scratch;
};

Tokenizer::Tokenizer(Kind kind, Vocab vocab) : kind_(kind), vocab_(std::move(vocab)) {
  vocab_.build_index();
  for (int32_t id = 0; id < vocab_.n_vocab(); ++id) {
    const TokenType t = vocab_.types[id];
    const bool special = t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined;
    if (special && !vocab_.pieces[id].empty()) special_ids_.push_back(id);
    max_piece_bytes_ = std::max(max_piece_bytes_, vocab_.pieces[id].size());
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(), [this](int32_t a, int32_t b) {
    return vocab_.pieces[a].size() > vocab_.pieces[b].size();
  });
}

void Tokenizer::find_end_tokens() {
  if (!vocab_.valid(vocab_.eot)) {
    vocab_.eot = -1;
    for (const std::string_view text : kEndOfTurnTexts) {
      if (const int32_t id = vocab_.find(text); id >= 0) {
        vocab_.eot = id;
        break;
      }
    }
  }
  std::vector<int32_t>& eog = vocab_.eog;
  for (const int32_t id : {vocab_.eos, vocab_.eot}) {
    if (vocab_.valid(id)) eog.push_back(id);
  }
  for (const auto& texts : {std::span<const std::string_view>(kEndOfTurnTexts), std::span<const std::string_view>(kEndOfGenerationTexts)}) {
    for (const std::string_view text : texts) {
      if (const int32_t id = vocab_.find(text); id >= 0) eog.push_back(id);
    }
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
}

void Tokenizer::check_id(int32_t token) const {
  if (!vocab_.valid(token)) {
    throw Error("tokenizer: token id " + std::to_string(token) + " is out of range [0, " +
                std::to_string(vocab_.n_vocab()) + ")");
  }
}

std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text, bool parse_special) const {
  // Each special token, longest first, splits every plain run at each of its
  // occurrences, left to right (llama.cpp's tokenizer_st_partition).
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const int32_t id : special_ids_) {
    if (!parse_special && vocab_.types[id] != TokenType::UserDefined) continue;
    const std::string_view piece = vocab_.pieces[id];
    const uint8_t strip = vocab_.strip.empty() ? 0 : vocab_.strip[id];
    next.clear();
    for (const Fragment& f : fragments) {
      const std::string_view run = f.token >= 0 ? std::string_view() : text.substr(f.begin, f.len);
      size_t pos = 0;
      size_t hit = f.token >= 0 ? std::string_view::npos : run.find(piece);
      if (hit == std::string_view::npos) {
        next.push_back(f);
        continue;
      }
      for (; hit != std::string_view::npos; hit = run.find(piece, pos)) {
        size_t left_end = hit;
        if (strip & Vocab::kStripLeft) {
          while (left_end > pos && ascii_space(run[left_end - 1])) --left_end;
        }
        if (left_end > pos) next.push_back({-1, f.begin + pos, left_end - pos});
        next.push_back({id, 0, 0});
        pos = hit + piece.size();
        if (strip & Vocab::kStripRight) {
          while (pos < run.size() && ascii_space(run[pos])) ++pos;
        }
      }
      if (pos < run.size()) next.push_back({-1, f.begin + pos, run.size() - pos});
    }
    fragments.swap(next);
  }
  return fragments;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && vocab_.valid(vocab_.bos)) out.push_back(vocab_.bos);
  EncodeState state;
  // The dummy prefix goes before the first run and before each run that
  // follows a special token.
  bool after_special = true;
  for (const Fragment& f : partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    encode_text(text.substr(f.begin, f.len), vocab_.add_space_prefix && after_special, state, out);
    after_special = false;
  }
  if (kind_ == Kind::Wpm && add_bos && vocab_.valid(vocab_.sep)) out.push_back(vocab_.sep);
  return out;
}

void Tokenizer::encode_text(std::string_view text, bool space_prefix, EncodeState& state,
                            std::vector<int32_t>& out) const {
  switch (kind_) {
    case Kind::Bpe:
      encode_bpe(text, state, out);
      return;
    case Kind::Wpm:
      wpm::encode(vocab_, text, normalizer_, max_piece_bytes_, out);
      return;
    case Kind::Spm:
    case Kind::Llama2c:
      break;
  }
  std::string work;
  work.reserve(text.size() + 1);
  if (space_prefix) work += kSpace;
  work += text;
  if (kind_ == Kind::Spm) {
    replace_all(work, kSpace, kSpmSpace);
    spm::encode(vocab_, work, spm::Rules::LlamaCpp, out);
  } else {
    spm::encode(vocab_, work, spm::Rules::Llama2c, out);
  }
}

void Tokenizer::encode_bpe(std::string_view text, EncodeState& state, std::vector<int32_t>& out) const {
  Words& words = state.words;
  words.bytes.clear();
  words.ends.clear();
  pre_->split(text, words);
  for (size_t i = 0; i < words.size(); ++i) {
    merges_.encode_word(vocab_, words[i], pre_->ignore_merges(), state.scratch, out);
  }
}

std::string Tokenizer::decode_piece(int32_t prev_token, int32_t token, bool render_special) const {
  check_id(token);
  const std::string& piece = vocab_.pieces[token];
  switch (vocab_.types[token]) {
    case TokenType::Byte:
      return std::string(1, static_cast<char>(parse_byte_piece(piece)));
    case TokenType::Control:
    case TokenType::Unused:
      return render_special ? piece : std::string();
    case TokenType::Unknown:
      if (render_special) return piece;
      return kind_ == Kind::Bpe || kind_ == Kind::Wpm ? std::string() : std::string(kUnknownGlyph);
    case TokenType::UserDefined:
      if (kind_ == Kind::Bpe) return piece;  // stored as raw text, not byte-level characters
      break;
    case TokenType::Normal:
      break;
  }
  if (kind_ == Kind::Bpe) {
    // Each character stands for one byte; a character outside the mapping
    // (not produced by any byte-level vocabulary) passes through as it is.
    std::string bytes;
    bytes.reserve(piece.size());
    for (const uint32_t cp : unicode::decode_utf8(piece)) {
      const int b = unicode::char_to_byte(cp);
      if (b >= 0) {
        bytes += static_cast<char>(b);
      } else {
        unicode::append_utf8(bytes, cp);
      }
    }
    return bytes;
  }
  std::string text = piece;
  if (kind_ == Kind::Spm || kind_ == Kind::Wpm) replace_all(text, kSpmSpace, kSpace);
  const bool first = prev_token < 0 || prev_token == vocab_.bos;
  if (first && vocab_.add_space_prefix && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

std::string Tokenizer::decode(std::span<const int32_t> tokens, int32_t prev_token, bool render_special) const {
  std::string out;
  for (const int32_t t : tokens) {
    out += decode_piece(prev_token, t, render_special);
    prev_token = t;
  }
  return out;
}

bool Tokenizer::is_end_of_generation(int32_t token) const {
  return token >= 0 && std::binary_search(vocab_.eog.begin(), vocab_.eog.end(), token);
}

const std::string& Tokenizer::token_text(int32_t token) const {
  check_id(token);
  return vocab_.pieces[token];
}

float Tokenizer::token_score(int32_t token) const {
  check_id(token);
  return vocab_.scores[token];
}

TokenType Tokenizer::token_type(int32_t token) const {
  check_id(token);
  return vocab_.types[token];
}

}  // namespace tokamak
