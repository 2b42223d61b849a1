// Unicode facts the tokenizers need, all from utf8proc (Unicode 15 in Debian
// bookworm's 2.8): general categories, White_Space, lower case, canonical
// decomposition. Plus UTF-8 coding and GPT-2's byte <-> character mapping.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokamak::unicode {

constexpr uint32_t kReplacement = 0xFFFD;

// Major general category of a code point (regex \p{L}, \p{N}, ...), one bit
// each, plus the White_Space property (regex \s).
enum Flag : uint16_t {
  kLetter = 1 << 0,       // L*
  kNumber = 1 << 1,       // N*  (digits, but also ½ and Ⅻ)
  kPunctuation = 1 << 2,  // P*
  kSymbol = 1 << 3,       // S*
  kMark = 1 << 4,         // M*  (combining accents, vowel signs)
  kSeparator = 1 << 5,    // Z*
  kControl = 1 << 6,      // Cc, Cf, Cs, Co
  kUnassigned = 1 << 7,   // Cn
  kWhitespace = 1 << 8,   // White_Space: Z* and U+0009..000D, U+0085
};

uint16_t flags(uint32_t cp);
inline bool is_whitespace(uint32_t cp) { return (flags(cp) & kWhitespace) != 0; }

// Simple (one code point) lower-case mapping.
uint32_t to_lower(uint32_t cp);

// Appends the canonical decomposition (NFD) of `cp`: "é" -> "e" U+0301.
void append_nfd(uint32_t cp, std::vector<uint32_t>& out);

// The code points of `text`. Each byte that does not start a well-formed
// UTF-8 character (a stray continuation byte, a cut or overlong sequence, a
// surrogate) becomes one U+FFFD, as llama.cpp's tokenizers read text.
std::vector<uint32_t> decode_utf8(std::string_view text);
void append_utf8(std::string& out, uint32_t cp);  // cp must be <= 0x10FFFF

// The byte length of the UTF-8 character a lead byte starts, judged by its
// top four bits alone (continuation bytes count as 1), as llama.cpp cuts text
// into starting symbols.
inline size_t lead_byte_length(unsigned char c) {
  constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

// GPT-2's reversible byte -> printable character mapping for byte-level BPE:
// the printable Latin-1 bytes (! .. ~, ¡ .. ¬, ® .. ÿ) stand for themselves,
// the other 68 bytes map in order to U+0100, U+0101, ... (space -> "Ġ").
constexpr std::array<uint16_t, 256> kByteToChar = [] {
  std::array<uint16_t, 256> map{};
  uint16_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? static_cast<uint16_t>(b) : next++;
  }
  return map;
}();

// The byte a character of the mapping stands for; -1 for any other code point.
int char_to_byte(uint32_t cp);

// Appends the byte-level spelling of raw bytes (each byte one character).
void append_byte_chars(std::string& out, std::string_view bytes);

}  // namespace tokamak::unicode
