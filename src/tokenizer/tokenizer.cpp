#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "tokenizer/spm.h"

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

// A piece of the input: a run of plain text, or a special token matched whole.
struct Fragment {
  int32_t token = -1;  // -1: plain text [begin, begin + len)
  size_t begin = 0;
  size_t len = 0;
};

}  // namespace

Tokenizer::Tokenizer(Kind kind, Vocab vocab) : kind_(kind), vocab_(std::move(vocab)) {
  vocab_.build_index();
  for (int32_t id = 0; id < vocab_.n_vocab(); ++id) {
    const TokenType t = vocab_.types[id];
    const bool special = t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined;
    if (special && !vocab_.pieces[id].empty()) special_ids_.push_back(id);
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(), [this](int32_t a, int32_t b) {
    return vocab_.pieces[a].size() > vocab_.pieces[b].size();
  });
}

void Tokenizer::check_id(int32_t token) const {
  if (!vocab_.valid(token)) {
    throw Error("tokenizer: token id " + std::to_string(token) + " is out of range [0, " +
                std::to_string(vocab_.n_vocab()) + ")");
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 2 + 2);
  if (add_bos && vocab_.valid(vocab_.bos)) out.push_back(vocab_.bos);

  // Split out special tokens, longest first; each one splits every plain run
  // at each of its occurrences, left to right (llama.cpp's st_partition).
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const int32_t id : special_ids_) {
    const TokenType type = vocab_.types[id];
    if (!parse_special && type != TokenType::UserDefined) continue;
    const std::string_view piece = vocab_.pieces[id];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view run = text.substr(f.begin, f.len);
      size_t pos = 0;
      for (size_t hit; (hit = run.find(piece, pos)) != std::string_view::npos; pos = hit + piece.size()) {
        if (hit > pos) next.push_back({-1, f.begin + pos, hit - pos});
        next.push_back({id, 0, 0});
      }
      if (pos < run.size()) next.push_back({-1, f.begin + pos, run.size() - pos});
    }
    fragments.swap(next);
  }

  // The dummy prefix goes before the first run and before each run that
  // follows a special token.
  bool after_special = true;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    encode_text(text.substr(f.begin, f.len), vocab_.add_space_prefix && after_special, out);
    after_special = false;
  }
  return out;
}

void Tokenizer::encode_text(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const {
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

std::string Tokenizer::decode_piece(int32_t prev_token, int32_t token) const {
  check_id(token);
  const std::string& piece = vocab_.pieces[token];
  switch (vocab_.types[token]) {
    case TokenType::Byte:
      return std::string(1, static_cast<char>(parse_byte_piece(piece)));
    case TokenType::Control:
    case TokenType::Unused:
      return {};
    case TokenType::Unknown:
      return std::string(kUnknownGlyph);
    case TokenType::Normal:
    case TokenType::UserDefined:
      break;
  }
  std::string text = piece;
  if (kind_ == Kind::Spm) replace_all(text, kSpmSpace, kSpace);
  const bool first = prev_token < 0 || prev_token == vocab_.bos;
  if (first && vocab_.add_space_prefix && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

std::string Tokenizer::decode(std::span<const int32_t> tokens, int32_t prev_token) const {
  std::string out;
  for (const int32_t t : tokens) {
    out += decode_piece(prev_token, t);
    prev_token = t;
  }
  return out;
}

bool Tokenizer::is_end_of_generation(int32_t token) const {
  return token >= 0 && (token == vocab_.eos || token == vocab_.eot);
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
