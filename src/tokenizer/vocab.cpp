#include "tokenizer/vocab.h"

namespace tokamak {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = hex_digit(piece[3]);
  const int lo = hex_digit(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

int32_t Vocab::find(std::string_view piece) const {
  const auto it = index_.find(piece);
  return it == index_.end() ? -1 : it->second;
}

void Vocab::build_index() {
  index_.clear();
  index_.reserve(pieces.size());
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (!pieces[id].empty()) index_.insert_or_assign(pieces[id], id);
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char spelled[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = find(std::string_view(spelled, 6));
    const char raw = static_cast<char>(b);
    if (id < 0) id = find(std::string_view(&raw, 1));
    byte_token[b] = id >= 0 ? id : (valid(unk) ? unk : -1);
  }
}

}  // namespace tokamak
