// Errors of the Jinja interpreter. Every error says what went wrong and where in
// the template (line and column), so a user can find the construct in the
// model's tokenizer.chat_template.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace tokamak::jinja {

// A place in the template source: 1-based line, 1-based column in code points.
// line == 0 means "not known yet" (a helper raised the error; the node that
// called it fills the place in).
struct SourcePos {
  uint32_t line = 0;
  uint32_t column = 0;
};

enum class ErrorKind {
  Syntax,       // the template text does not parse
  Unsupported,  // valid Jinja, but a construct this interpreter does not implement
  Runtime,      // undefined value used, wrong operand type, bad argument (Jinja's UndefinedError/TypeError)
  Raised,       // the template called raise_exception(message)
  Limit,        // a resource limit (nesting, output size, work) was exceeded
};

class TemplateError : public Error {
 public:
  TemplateError(ErrorKind kind, std::string detail, SourcePos pos = {})
      : Error(format(kind, detail, pos)), kind_(kind), detail_(std::move(detail)), pos_(pos) {}

  ErrorKind kind() const { return kind_; }
  // The message without the "chat template ... at line L" prefix; for Raised,
  // exactly the template's text.
  const std::string& detail() const { return detail_; }
  SourcePos pos() const { return pos_; }
  bool has_pos() const { return pos_.line != 0; }
  TemplateError at(SourcePos pos) const { return TemplateError(kind_, detail_, pos); }

 private:
  static std::string format(ErrorKind kind, const std::string& detail, SourcePos pos) {
    std::string head;
    switch (kind) {
      case ErrorKind::Syntax: head = "chat template syntax error"; break;
      case ErrorKind::Unsupported: head = "chat template uses an unsupported construct"; break;
      case ErrorKind::Runtime: head = "chat template error"; break;
      case ErrorKind::Raised: head = "chat template raised an exception"; break;
      case ErrorKind::Limit: head = "chat template exceeded a limit"; break;
    }
    if (pos.line != 0) {
      head += " at line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column);
    }
    return head + ": " + detail;
  }

  ErrorKind kind_;
  std::string detail_;
  SourcePos pos_;
};

// Shorthands for helpers that do not know the position.
[[noreturn]] inline void runtime_error(std::string detail) {
  throw TemplateError(ErrorKind::Runtime, std::move(detail));
}
[[noreturn]] inline void unsupported(std::string detail) {
  throw TemplateError(ErrorKind::Unsupported, std::move(detail));
}
[[noreturn]] inline void limit_error(std::string detail) {
  throw TemplateError(ErrorKind::Limit, std::move(detail));
}

}  // namespace tokamak::jinja
