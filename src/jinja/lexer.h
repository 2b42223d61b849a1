// Jinja lexer with Hugging Face's settings: trim_blocks and lstrip_blocks on,
// `{%- -%}` / `{{- -}}` / `{#- -#}` whitespace control, `{%+` to keep
// leading whitespace, `{% raw %}` blocks, comments dropped.
//
// Whitespace rules, as Jinja 3.1 applies them to the text before a tag:
//   `{%-`, `{{-`, `{#-`  strip all whitespace (newlines too) before the tag;
//   `{%`, `{#` (lstrip_blocks) strip spaces/tabs between the start of the line
//                and the tag when nothing else is on that part of the line;
// and after a tag: `-%}` `-}}` `-#}` strip all following whitespace,
//   `%}` `#}` (trim_blocks) eat one newline right after the tag.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/error.h"

namespace tokamak::jinja {

enum class TokenType : uint8_t {
  Data,        // template text between tags
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifiers and keywords (if, for, and, not, ...)
  String,      // text holds the decoded value
  Int,
  Float,
  Op,          // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
  Eof,
};

struct Token {
  TokenType type = TokenType::Eof;
  uint32_t offset = 0;  // byte offset in the normalized source
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
};

// Byte offsets to line/column (column in code points, both 1-based).
class SourceMap {
 public:
  explicit SourceMap(std::string source);
  SourcePos pos(size_t offset) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<size_t> line_starts_;
};

// Jinja's newline handling: "\r\n" and "\r" become "\n", and one trailing
// newline is dropped (keep_trailing_newline is off).
std::string normalize_newlines(std::string_view raw);

// Throws TemplateError(Syntax) with the position of the offending character.
std::vector<Token> tokenize(const SourceMap& map);

}  // namespace tokamak::jinja
