#include "jinja/pystr.h"

#include <utf8proc.h>

#include <algorithm>

#include "jinja/error.h"

namespace tokamak::jinja::pystr {

namespace {

inline bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

char32_t surrogate_escape(unsigned char b) { return 0xDC00 + b; }

// Python's str.splitlines boundaries.
bool is_line_break(char32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D || cp == 0x1E ||
         cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

utf8proc_category_t category(char32_t cp) {
  if (cp > 0x10FFFF) return UTF8PROC_CATEGORY_CN;
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

bool is_cased(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

char32_t to_upper(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}
char32_t to_lower(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}
char32_t to_title(char32_t cp) {
  if (cp < 0x80) return to_upper(cp);
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp)));
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

template <typename F>
std::string map_code_points(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Decoded d = decode(s, i);
    append_utf8(out, f(d.cp));
    i += d.len;
  }
  return out;
}

}  // namespace

Decoded decode(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  const size_t left = s.size() - i;
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  if (b0 >= 0xC2 && b0 <= 0xDF && left >= 2 && is_cont(byte(1))) {
    return {static_cast<char32_t>(((b0 & 0x1F) << 6) | (byte(1) & 0x3F)), 2};
  }
  if (b0 >= 0xE0 && b0 <= 0xEF && left >= 3 && is_cont(byte(1)) && is_cont(byte(2))) {
    const bool overlong = b0 == 0xE0 && byte(1) < 0xA0;
    const bool surrogate = b0 == 0xED && byte(1) >= 0xA0;
    if (!overlong && !surrogate) {
      return {static_cast<char32_t>(((b0 & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F)), 3};
    }
  }
  if (b0 >= 0xF0 && b0 <= 0xF4 && left >= 4 && is_cont(byte(1)) && is_cont(byte(2)) && is_cont(byte(3))) {
    const bool overlong = b0 == 0xF0 && byte(1) < 0x90;
    const bool too_big = b0 == 0xF4 && byte(1) >= 0x90;
    if (!overlong && !too_big) {
      return {static_cast<char32_t>(((b0 & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) |
                                    (byte(3) & 0x3F)),
              4};
    }
  }
  return {surrogate_escape(b0), 1};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out.push_back(static_cast<char>(cp - 0xDC00));  // an escaped invalid byte goes back as itself
  } else if (cp >= 0xD800 && cp <= 0xDFFF) {
    append_utf8(out, 0xFFFD);  // other lone surrogates have no UTF-8 form
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= 0x10FFFF) {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    append_utf8(out, 0xFFFD);
  }
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Decoded d = decode(s, i);
    out.push_back(d.cp);
    i += d.len;
  }
  return out;
}

std::string from_u32(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) append_utf8(out, cp);
  return out;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

size_t length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += decode(s, i).len) ++n;
  return n;
}

bool is_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// The code point that ends at byte `end` (end > 0): a valid sequence ending
// there, else the single invalid byte before `end` (what forward decoding gives).
Decoded decode_before(std::string_view s, size_t end) {
  size_t k = end - 1;
  while (k > 0 && end - k < 4 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  const Decoded d = decode(s, k);
  if (k + d.len == end) return d;
  return {static_cast<char32_t>(0xDC00 + static_cast<unsigned char>(s[end - 1])), 1};
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string set = chars ? to_u32(*chars) : std::u32string();
  auto strippable = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : is_space(cp); };
  // Only the stripped ends are decoded: cost is the whitespace, not the text.
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      const Decoded d = decode(s, b);
      if (!strippable(d.cp)) break;
      b += d.len;
    }
  }
  if (right) {
    while (e > b) {
      const Decoded d = decode_before(s, e);
      if (!strippable(d.cp)) break;
      e -= d.len;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) runtime_error("split(): empty separator");
    size_t start = 0;
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  const std::u32string u = to_u32(s);
  size_t i = 0;
  const size_t n = u.size();
  while (true) {
    while (i < n && is_space(u[i])) ++i;
    if (i == n) break;
    if (static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(from_u32(std::u32string_view(u).substr(i)));
      break;
    }
    size_t j = i;
    while (j < n && !is_space(u[j])) ++j;
    out.push_back(from_u32(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) return split(s, sep, -1);  // without a limit, both directions agree
  if (sep) {
    if (sep->empty()) runtime_error("rsplit(): empty separator");
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit && end >= sep->size()) {
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const std::u32string u = to_u32(s);
    size_t e = u.size();
    while (true) {
      while (e > 0 && is_space(u[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(from_u32(std::u32string_view(u).substr(0, e)));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(u[b - 1])) --b;
      out.push_back(from_u32(std::u32string_view(u).substr(b, e - b)));
      e = b;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t line_start = 0;
  for (size_t i = 0; i < s.size();) {
    const Decoded d = decode(s, i);
    if (!is_line_break(d.cp)) {
      i += d.len;
      continue;
    }
    size_t end_of_break = i + d.len;
    if (d.cp == '\r' && end_of_break < s.size() && s[end_of_break] == '\n') ++end_of_break;
    out.emplace_back(s.substr(line_start, (keepends ? end_of_break : i) - line_start));
    line_start = i = end_of_break;
  }
  if (line_start < s.size()) out.emplace_back(s.substr(line_start));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    int64_t done = 0;
    for (size_t i = 0; i < s.size();) {
      if (done < count) {
        out += repl;
        ++done;
      }
      const size_t len = decode(s, i).len;
      out += s.substr(i, len);
      i += len;
    }
    if (done < count) out += repl;
    return out;
  }
  size_t start = 0;
  for (int64_t done = 0; done < count; ++done) {
    const size_t hit = s.find(old, start);
    if (hit == std::string_view::npos) break;
    out += s.substr(start, hit - start);
    out += repl;
    start = hit + old.size();
  }
  out += s.substr(start);
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
  const size_t at = reverse ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(length(s.substr(0, at)));
}

std::string upper(std::string_view s) { return map_code_points(s, to_upper); }
std::string lower(std::string_view s) { return map_code_points(s, to_lower); }

std::string title(std::string_view s) {
  bool previous_cased = false;
  return map_code_points(s, [&](char32_t cp) {
    const char32_t mapped = previous_cased ? to_lower(cp) : to_title(cp);
    previous_cased = is_cased(cp);
    return mapped;
  });
}

std::string capitalize(std::string_view s) {
  bool first = true;
  return map_code_points(s, [&](char32_t cp) {
    const char32_t mapped = first ? to_title(cp) : to_lower(cp);
    first = false;
    return mapped;
  });
}

bool is_cased_upper(std::string_view s) {
  bool any = false;
  for (char32_t cp : to_u32(s)) {
    const auto c = category(cp);
    if (c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT) return false;
    any = any || c == UTF8PROC_CATEGORY_LU;
  }
  return any;
}

bool is_cased_lower(std::string_view s) {
  bool any = false;
  for (char32_t cp : to_u32(s)) {
    const auto c = category(cp);
    if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT) return false;
    any = any || c == UTF8PROC_CATEGORY_LL;
  }
  return any;
}

bool all_of_class(std::string_view s, int cls) {
  if (s.empty()) return false;
  for (char32_t cp : to_u32(s)) {
    const auto c = category(cp);
    const bool digit = c == UTF8PROC_CATEGORY_ND;
    const bool alpha = c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
                       c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
    const bool numeric = digit || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
    bool ok = false;
    switch (cls) {
      case 0: ok = digit; break;
      case 1: ok = alpha; break;
      case 2: ok = alpha || numeric; break;
      default: ok = is_space(cp); break;
    }
    if (!ok) return false;
  }
  return true;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const Decoded d = decode(s, i);
    i += d.len;
    const char32_t cp = d.cp;
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += "\\x";
      out.push_back(kHex[cp >> 4]);
      out.push_back(kHex[cp & 15]);
    } else if (cp < 0x7F || is_printable(cp)) {
      append_utf8(out, cp);
    } else {
      const int digits = cp <= 0xFF ? 2 : cp <= 0xFFFF ? 4 : 8;
      out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
      for (int k = digits - 1; k >= 0; --k) out.push_back(kHex[(cp >> (4 * k)) & 15]);
    }
  }
  out.push_back(quote);
  return out;
}

std::vector<int64_t> slice_indices(int64_t len, std::optional<int64_t> start_in, std::optional<int64_t> stop_in,
                                   int64_t step) {
  auto clamp = [&](std::optional<int64_t> v, int64_t if_none) {
    if (!v) return if_none;
    int64_t x = *v;
    if (x < 0) {
      x = x < -len ? (step < 0 ? -1 : 0) : x + len;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  const int64_t start = clamp(start_in, step < 0 ? len - 1 : 0);
  const int64_t stop = clamp(stop_in, step < 0 ? -1 : len);
  std::vector<int64_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    out.push_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return out;
}

}  // namespace tokamak::jinja::pystr
