#include "tokenizer/unicode.h"

#include <utf8proc.h>

namespace tokamak::unicode {

uint16_t flags(uint32_t cp) {
  if (cp > 0x10FFFF) return kUnassigned;
  uint16_t f = 0;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      f = kLetter;
      break;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      f = kMark;
      break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      f = kNumber;
      break;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      f = kPunctuation;
      break;
    case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC:
    case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
      f = kSymbol;
      break;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      // Every Z* code point has the White_Space property.
      f = kSeparator | kWhitespace;
      break;
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
      f = kControl;
      break;
    case UTF8PROC_CATEGORY_CN:
      f = kUnassigned;
      break;
  }
  // The controls that PropList.txt lists as White_Space: TAB, LF, VT, FF, CR, NEL.
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) f |= kWhitespace;
  return f;
}

uint32_t to_lower(uint32_t cp) {
  if (cp > 0x10FFFF) return cp;
  return static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

void append_nfd(uint32_t cp, std::vector<uint32_t>& out) {
  // Canonical decompositions are at most 4 code points long; 16 leaves room.
  utf8proc_int32_t buf[16];
  const utf8proc_ssize_t n =
      cp > 0x10FFFF ? -1 : utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 16, UTF8PROC_DECOMPOSE, nullptr);
  if (n <= 0 || n > 16) {
    out.push_back(cp);
    return;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i) out.push_back(static_cast<uint32_t>(buf[i]));
}

std::vector<uint32_t> decode_utf8(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(text[i])); };
  for (size_t i = 0; i < text.size();) {
    const uint32_t c = byte(i);
    if (c < 0x80) {
      cps.push_back(c);
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t cp = 0;
    uint32_t min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = n > 0 && i + n <= text.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const uint32_t cont = byte(i + k);
      ok = (cont & 0xC0) == 0x80;
      cp = (cp << 6) | (cont & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      cps.push_back(cp);
      i += n;
    } else {
      cps.push_back(kReplacement);
      ++i;
    }
  }
  return cps;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// kByteToChar maps into U+0000..U+0143; this is its inverse over that range.
constexpr std::array<int16_t, 0x144> kCharToByte = [] {
  std::array<int16_t, 0x144> map{};
  for (auto& m : map) m = -1;
  for (int b = 0; b < 256; ++b) map[kByteToChar[b]] = static_cast<int16_t>(b);
  return map;
}();

}  // namespace

int char_to_byte(uint32_t cp) { return cp < kCharToByte.size() ? kCharToByte[cp] : -1; }

void append_byte_chars(std::string& out, std::string_view bytes) {
  for (const char b : bytes) append_utf8(out, kByteToChar[static_cast<unsigned char>(b)]);
}

}  // namespace tokamak::unicode
