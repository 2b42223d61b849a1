// Jinja parser: tokens to a syntax tree, following the grammar and operator
// precedence of Jinja 3.1's parser (conditional expression < or < and < not <
// comparisons < + - < ~ < * / // % < ** < unary - + < filters, tests, calls,
// subscripts). Filter and test names are checked here, as Jinja checks them
// when it compiles a template.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace tokamak::jinja {

struct Program {
  explicit Program(std::string normalized_source) : map(std::move(normalized_source)) {}
  SourceMap map;
  Body body;
  std::vector<std::string> unbound_in_root;  // see scoping.h
};

// Parses template text (any bytes). Throws TemplateError: Syntax for malformed
// text, Unsupported for Jinja features outside the chat-template subset, Limit
// for nesting deeper than kMaxNesting.
// Also runs the scope analysis of scoping.h.
std::unique_ptr<Program> parse_template(std::string_view source);

}  // namespace tokamak::jinja
