// Unicode facts from utf8proc as the tokenizers use them, UTF-8 decoding with
// llama.cpp's per-byte U+FFFD rule, and GPT-2's byte <-> character mapping.
#include <gtest/gtest.h>

#include <set>

#include "tokenizer/unicode.h"

namespace tokamak {
namespace {

using namespace unicode;

TEST(Unicode, CategoriesAndWhiteSpace) {
  EXPECT_EQ(flags('a'), kLetter);
  EXPECT_EQ(flags(0x0416), kLetter);  // Ж
  EXPECT_EQ(flags(0x6211), kLetter);  // 我 (Lo)
  EXPECT_EQ(flags('7'), kNumber);
  EXPECT_EQ(flags(0x00BD), kNumber);  // ½ (No)
  EXPECT_EQ(flags(0x216B), kNumber);  // Ⅻ (Nl)
  EXPECT_EQ(flags('!'), kPunctuation);
  EXPECT_EQ(flags('_'), kPunctuation);  // Pc
  EXPECT_EQ(flags('$'), kSymbol);
  EXPECT_EQ(flags('~'), kSymbol);
  EXPECT_EQ(flags(0x1F999), kSymbol);  // 🦙 (So)
  EXPECT_EQ(flags(0x0301), kMark);     // combining acute
  EXPECT_EQ(flags(0x17B6), kMark);     // Khmer vowel sign (Mc)
  EXPECT_EQ(flags(' '), kSeparator | kWhitespace);
  EXPECT_EQ(flags(0x3000), kSeparator | kWhitespace);  // ideographic space
  EXPECT_EQ(flags(0x2029), kSeparator | kWhitespace);  // paragraph separator (Zp)
  for (const uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x85u}) EXPECT_EQ(flags(c), kControl | kWhitespace) << c;
  EXPECT_EQ(flags(0x1F), kControl);    // not White_Space although C isspace-like tables sometimes say so
  EXPECT_EQ(flags(0x200B), kControl);  // zero width space is Cf, not White_Space
  EXPECT_EQ(flags(0xFEFF), kControl);
  EXPECT_EQ(flags(0xE000), kControl);  // private use
  EXPECT_EQ(flags(0x0378), kUnassigned);
  EXPECT_EQ(flags(0x110000), kUnassigned);
}

TEST(Unicode, LowerCaseAndDecomposition) {
  EXPECT_EQ(to_lower('A'), 'a');
  EXPECT_EQ(to_lower(0x00C4), 0x00E4u);  // Ä
  EXPECT_EQ(to_lower(0x0416), 0x0436u);  // Ж
  EXPECT_EQ(to_lower('1'), '1');
  std::vector<uint32_t> out;
  append_nfd(0x00E9, out);  // é
  EXPECT_EQ(out, (std::vector<uint32_t>{'e', 0x0301}));
  out.clear();
  append_nfd(0x1EED, out);  // ử: u + horn + hook above
  EXPECT_EQ(out, (std::vector<uint32_t>{'u', 0x031B, 0x0309}));
  out.clear();
  append_nfd('x', out);
  EXPECT_EQ(out, (std::vector<uint32_t>{'x'}));
}

TEST(Unicode, DecodeUtf8) {
  EXPECT_EQ(decode_utf8("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{'a', 0xE9, 0x4F60, 0x1F999}));
  // Each byte that does not start a well-formed character is one U+FFFD.
  EXPECT_EQ(decode_utf8("\xC3"), (std::vector<uint32_t>{kReplacement}));
  EXPECT_EQ(decode_utf8("\xE4\xBD" "a"), (std::vector<uint32_t>{kReplacement, kReplacement, 'a'}));
  EXPECT_EQ(decode_utf8("\xC0\x80"), (std::vector<uint32_t>{kReplacement, kReplacement}));          // overlong
  EXPECT_EQ(decode_utf8("\xED\xA0\x80"), std::vector<uint32_t>(3, kReplacement));                    // surrogate
  EXPECT_EQ(decode_utf8("\xF4\x90\x80\x80"), std::vector<uint32_t>(4, kReplacement));                // > U+10FFFF
  EXPECT_EQ(decode_utf8("\x80\xFF"), std::vector<uint32_t>(2, kReplacement));
}

TEST(Unicode, EncodeUtf8RoundTripsEveryScalarValue) {
  std::string all;
  std::vector<uint32_t> cps;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    append_utf8(all, cp);
    cps.push_back(cp);
  }
  EXPECT_EQ(decode_utf8(all), cps);
}

// GPT-2's bytes_to_unicode(): printable Latin-1 maps to itself, the rest to
// U+0100.. in byte order ("Ġ" is the space, "Ċ" the newline).
TEST(Unicode, ByteLevelMapping) {
  EXPECT_EQ(kByteToChar[' '], 0x120);
  EXPECT_EQ(kByteToChar['\n'], 0x10A);
  EXPECT_EQ(kByteToChar[0], 0x100);
  EXPECT_EQ(kByteToChar[0x7F], 0x121);
  EXPECT_EQ(kByteToChar[0xAD], 0x143);
  EXPECT_EQ(kByteToChar['a'], 'a');
  EXPECT_EQ(kByteToChar[0xE9], 0xE9);
  std::set<uint16_t> seen;
  for (int b = 0; b < 256; ++b) {
    seen.insert(kByteToChar[b]);
    EXPECT_EQ(char_to_byte(kByteToChar[b]), b);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(char_to_byte(0x144), -1);
  EXPECT_EQ(char_to_byte(' '), -1);
  std::string s;
  append_byte_chars(s, "a b\n");
  EXPECT_EQ(s, "a\xC4\xA0" "b\xC4\x8A");
}

}  // namespace
}  // namespace tokamak
