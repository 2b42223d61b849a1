#include "jinja/lexer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "jinja/pystr.h"

namespace tokamak::jinja {

SourceMap::SourceMap(std::string source) : source_(std::move(source)) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < source_.size(); ++i) {
    if (source_[i] == '\n') line_starts_.push_back(i + 1);
  }
}

SourcePos SourceMap::pos(size_t offset) const {
  offset = std::min(offset, source_.size());
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  const size_t line = static_cast<size_t>(it - line_starts_.begin());  // >= 1
  const size_t start = line_starts_[line - 1];
  const size_t column = 1 + pystr::length(std::string_view(source_).substr(start, offset - start));
  return {static_cast<uint32_t>(line), static_cast<uint32_t>(column)};
}

std::string normalize_newlines(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      out.push_back(raw[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(const SourceMap& map) : map_(map), s_(map.source()) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string_view::npos) {
        emit_data(s_.substr(pos_));
        break;
      }
      std::string_view text = s_.substr(pos_, tag - pos_);
      const char kind = s_[tag + 1];
      size_t raw_body = 0;
      char raw_sign = 0;
      const bool raw = kind == '%' && match_raw_begin(tag, raw_body, raw_sign);
      const char sign = raw ? raw_sign : sign_at(tag + 2);
      emit_data(control_whitespace(text, sign, kind != '{'));
      if (raw) {
        lex_raw(tag, raw_body);
        continue;
      }
      line_starting_ = false;
      pos_ = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        lex_comment(tag);
      } else {
        lex_tag(tag, kind);
      }
    }
    push(TokenType::Eof, s_.size());
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& msg) const {
    throw TemplateError(ErrorKind::Syntax, msg, map_.pos(offset));
  }

  Token& push(TokenType type, size_t offset, std::string text = {}) {
    Token t;
    t.type = type;
    t.offset = static_cast<uint32_t>(offset);
    t.text = std::move(text);
    out_.push_back(std::move(t));
    return out_.back();
  }

  void emit_data(std::string_view text) {
    if (!text.empty()) push(TokenType::Data, static_cast<size_t>(text.data() - s_.data()), std::string(text));
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string_view::npos; i = s_.find('{', i + 1)) {
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return std::string_view::npos;
  }

  char sign_at(size_t i) const {
    return (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ? s_[i] : 0;
  }

  size_t skip_space(size_t i) const {
    while (i < s_.size()) {
      const pystr::Decoded d = pystr::decode(s_, i);
      if (!pystr::is_space(d.cp)) break;
      i += d.len;
    }
    return i;
  }

  // The OptionalLStrip rule of Jinja's lexer, applied to the text before a tag.
  std::string_view control_whitespace(std::string_view text, char sign, bool is_block_or_comment) const {
    if (sign == '-') {
      // Strip trailing whitespace code points (scan forward to stay on code point boundaries).
      size_t end = 0;
      for (size_t i = 0; i < text.size();) {
        const pystr::Decoded d = pystr::decode(text, i);
        i += d.len;
        if (!pystr::is_space(d.cp)) end = i;
      }
      return text.substr(0, end);
    }
    if (sign == '+' || !is_block_or_comment) return text;
    const size_t nl = text.rfind('\n');
    const size_t line_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if (line_pos == 0 && !line_starting_) return text;
    const std::string_view tail = text.substr(line_pos);
    if (tail.empty()) return text;
    for (size_t i = 0; i < tail.size();) {
      const pystr::Decoded d = pystr::decode(tail, i);
      if (!pystr::is_space(d.cp)) return text;
      i += d.len;
    }
    return text.substr(0, line_pos);
  }

  // Consumes a tag end (after the sign was checked) and the whitespace it eats.
  void finish_tag_end(size_t end_of_delim, bool strip_all, bool trim_newline) {
    size_t p = end_of_delim;
    if (strip_all) {
      p = skip_space(p);
    } else if (trim_newline && p < s_.size() && s_[p] == '\n') {
      ++p;
    }
    line_starting_ = p > 0 && s_[p - 1] == '\n';
    pos_ = p;
  }

  void lex_comment(size_t tag) {
    for (size_t i = pos_; i + 1 < s_.size(); ++i) {
      if (s_[i] == '+' && s_.compare(i + 1, 2, "#}") == 0) return finish_tag_end(i + 3, false, false);
      if (s_[i] == '-' && s_.compare(i + 1, 2, "#}") == 0) return finish_tag_end(i + 3, true, false);
      if (s_[i] == '#' && s_[i + 1] == '}') return finish_tag_end(i + 2, false, true);
    }
    fail(tag, "missing end of comment tag '#}'");
  }

  // `{%(-|+|)\s*raw\s*(-%}\s*|%})`; sets where the raw body starts.
  bool match_raw_begin(size_t tag, size_t& body, char& sign) {
    size_t p = tag + 2;
    sign = sign_at(p);
    if (sign) ++p;
    p = skip_space(p);
    if (s_.compare(p, 3, "raw") != 0) return false;
    p = skip_space(p + 3);
    if (s_.compare(p, 3, "-%}") == 0) {
      body = skip_space(p + 3);
      return true;
    }
    if (s_.compare(p, 2, "%}") == 0) {
      body = p + 2;
      return true;
    }
    return false;
  }

  void lex_raw(size_t tag, size_t body) {
    line_starting_ = body > 0 && s_[body - 1] == '\n';
    for (size_t i = s_.find("{%", body); i != std::string_view::npos; i = s_.find("{%", i + 1)) {
      size_t p = i + 2;
      const char sign = sign_at(p);
      if (sign) ++p;
      p = skip_space(p);
      if (s_.compare(p, 6, "endraw") != 0) continue;
      p = skip_space(p + 6);
      bool strip_all = false, trim = false;
      size_t end = 0;
      if (s_.compare(p, 3, "+%}") == 0) {
        end = p + 3;
      } else if (s_.compare(p, 3, "-%}") == 0) {
        end = p + 3;
        strip_all = true;
      } else if (s_.compare(p, 2, "%}") == 0) {
        end = p + 2;
        trim = true;
      } else {
        continue;
      }
      emit_data(control_whitespace(s_.substr(body, i - body), sign, true));
      return finish_tag_end(end, strip_all, trim);
    }
    fail(tag, "missing end of raw directive ({% endraw %})");
  }

  void lex_tag(size_t tag, char kind) {
    const bool block = kind == '%';
    push(block ? TokenType::BlockBegin : TokenType::VarBegin, tag);
    std::vector<char> balance;  // closers expected, innermost last
    while (true) {
      if (pos_ >= s_.size()) {
        fail(tag, std::string("unexpected end of template: the tag opened here has no '") + (block ? "%}" : "}}") +
                      "'");
      }
      if (balance.empty() && try_tag_end(block)) return;
      const char c = s_[pos_];
      const size_t start = pos_;
      const pystr::Decoded d = pystr::decode(s_, pos_);
      if (pystr::is_space(d.cp)) {
        pos_ = skip_space(pos_);
      } else if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        size_t e = pos_;
        while (e < s_.size() && is_name_char(s_[e])) ++e;
        push(TokenType::Name, start, std::string(s_.substr(start, e - start)));
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(balance);
      }
    }
  }

  bool try_tag_end(bool block) {
    const char* delim = block ? "%}" : "}}";
    if (block && s_.compare(pos_, 3, "+%}") == 0) {
      push(TokenType::BlockEnd, pos_);
      finish_tag_end(pos_ + 3, false, false);
      return true;
    }
    if (s_[pos_] == '-' && s_.compare(pos_ + 1, 2, delim) == 0) {
      push(block ? TokenType::BlockEnd : TokenType::VarEnd, pos_);
      finish_tag_end(pos_ + 3, true, false);
      return true;
    }
    if (s_.compare(pos_, 2, delim) == 0) {
      push(block ? TokenType::BlockEnd : TokenType::VarEnd, pos_);
      finish_tag_end(pos_ + 2, false, block);
      return true;
    }
    return false;
  }

  // `(\d+_)*\d+` from i; returns the end (i when no digit).
  size_t digits_with_underscores(size_t i) const {
    if (i >= s_.size() || !is_digit(s_[i])) return i;
    while (i < s_.size() && is_digit(s_[i])) ++i;
    while (i + 1 < s_.size() && s_[i] == '_' && is_digit(s_[i + 1])) {
      ++i;
      while (i < s_.size() && is_digit(s_[i])) ++i;
    }
    return i;
  }

  static std::string without_underscores(std::string_view t) {
    std::string out;
    for (char c : t) {
      if (c != '_') out.push_back(c);
    }
    return out;
  }

  void lex_number() {
    const size_t start = pos_;
    // Float first, as Jinja tries it before integers (not right after a '.': `x.0.1`).
    if (start == 0 || s_[start - 1] != '.') {
      const size_t int_end = digits_with_underscores(start);
      size_t frac_end = int_end;
      if (int_end + 1 < s_.size() && s_[int_end] == '.' && is_digit(s_[int_end + 1])) {
        frac_end = digits_with_underscores(int_end + 1);
      }
      size_t end = 0;
      if (frac_end < s_.size() && (s_[frac_end] == 'e' || s_[frac_end] == 'E')) {
        size_t k = frac_end + 1;
        if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
        const size_t exp_end = digits_with_underscores(k);
        if (exp_end > k) end = exp_end;
      }
      if (end == 0 && frac_end > int_end) end = frac_end;
      if (end != 0) {
        const std::string text = without_underscores(s_.substr(start, end - start));
        double v = 0;
        const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
        if (r.ec == std::errc::result_out_of_range) {
          // Python gives inf for huge literals and 0.0 for tiny ones.
          const size_t e = text.find_first_of("eE");
          v = (e != std::string::npos && text[e + 1] == '-') ? 0.0 : HUGE_VAL;
        }
        push(TokenType::Float, start).float_value = v;
        pos_ = end;
        return;
      }
    }
    // Integers: 0b.. 0o.. 0x.. (with optional '_' before each digit), decimals.
    int base = 10;
    size_t end = start;
    auto prefixed = [&](char letter, int b) {
      if (s_[start] != '0' || start + 1 >= s_.size() || (s_[start + 1] | 0x20) != letter) return false;
      size_t i = start + 2;
      size_t last = 0;
      while (true) {
        size_t j = i;
        if (j < s_.size() && s_[j] == '_') ++j;
        if (j >= s_.size()) break;
        const int h = hex_value(s_[j]);
        if (h < 0 || h >= b) break;
        i = j + 1;
        last = i;
      }
      if (last == 0) return false;
      end = last;
      base = b;
      return true;
    };
    if (!prefixed('b', 2) && !prefixed('o', 8) && !prefixed('x', 16)) {
      if (s_[start] == '0') {
        size_t i = start + 1;
        while (true) {
          size_t j = i;
          if (j < s_.size() && s_[j] == '_') ++j;
          if (j < s_.size() && s_[j] == '0') {
            i = j + 1;
          } else {
            break;
          }
        }
        end = i;
      } else {
        size_t i = start + 1;
        while (true) {
          size_t j = i;
          if (j < s_.size() && s_[j] == '_') ++j;
          if (j < s_.size() && is_digit(s_[j])) {
            i = j + 1;
          } else {
            break;
          }
        }
        end = i;
      }
    }
    std::string digits = without_underscores(s_.substr(start, end - start));
    if (base != 10) digits = digits.substr(2);
    int64_t v = 0;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
    if (r.ec != std::errc()) fail(start, "integer literal '" + std::string(s_.substr(start, end - start)) + "' is too large");
    push(TokenType::Int, start).int_value = v;
    pos_ = end;
  }

  void lex_string() {
    const size_t start = pos_;
    const char quote = s_[pos_];
    size_t i = pos_ + 1;
    while (i < s_.size() && s_[i] != quote) {
      i += (s_[i] == '\\' && i + 1 < s_.size()) ? 2 : 1;
    }
    if (i >= s_.size()) fail(start, "unterminated string literal");
    push(TokenType::String, start, unescape(start, s_.substr(start + 1, i - start - 1)));
    pos_ = i + 1;
  }

  // Python's unicode-escape decoding, as Jinja applies it to string literals.
  std::string unescape(size_t at, std::string_view body) const {
    std::string out;
    out.reserve(body.size());
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '\\' || i + 1 >= body.size()) {
        out.push_back(body[i]);
        continue;
      }
      const char e = body[++i];
      switch (e) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': case 'u': case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 1; k <= n; ++k) {
            const int h = i + k < body.size() ? hex_value(body[i + k]) : -1;
            if (h < 0) fail(at, std::string("truncated \\") + e + " escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF) fail(at, "illegal Unicode character in string literal escape");
          pystr::append_utf8(out, cp);
          i += n;
          break;
        }
        case 'N': fail(at, "\\N{...} escapes in string literals are not supported");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
            }
            pystr::append_utf8(out, cp);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  void lex_operator(std::vector<char>& balance) {
    static constexpr std::string_view kTwo[] = {"**", "//", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (s_.compare(pos_, 2, op) == 0) {
        push(TokenType::Op, pos_, std::string(op));
        pos_ += 2;
        return;
      }
    }
    const char c = s_[pos_];
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      const pystr::Decoded d = pystr::decode(s_, pos_);
      std::string ch;
      pystr::append_utf8(ch, d.cp);
      fail(pos_, "unexpected character " + pystr::repr(ch));
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(pos_, std::string("unexpected '") + c + "'");
      if (balance.back() != c) fail(pos_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    push(TokenType::Op, pos_, std::string(1, c));
    ++pos_;
  }

  const SourceMap& map_;
  std::string_view s_;
  std::vector<Token> out_;
  size_t pos_ = 0;
  bool line_starting_ = true;  // the text at pos_ begins a line (lstrip_blocks)
};

}  // namespace

std::vector<Token> tokenize(const SourceMap& map) { return Lexer(map).run(); }

}  // namespace tokamak::jinja
