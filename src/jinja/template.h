// A Jinja template for chat prompts: the subset of Jinja 3.1 that real chat
// templates use, with the semantics Hugging Face transformers renders them with
// (sandboxed, trim_blocks and lstrip_blocks, loop controls, tojson without
// ASCII escaping, raise_exception, strftime_now).
//
//   auto t = jinja::Template::parse(source);           // TemplateError on bad text
//   std::string s = t.render({{"messages", jinja::from_json(msgs)}}, options);
//
// Parsing and rendering accept arbitrary bytes and are bounded: nesting depth,
// output size and total work are capped (RenderLimits), so a hostile template
// fails with a TemplateError instead of exhausting the stack or memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/error.h"
#include "jinja/ops.h"
#include "jinja/value.h"

namespace tokamak::jinja {

struct Program;

struct RenderOptions {
  int64_t now_unix_seconds = 0;  // the clock strftime_now() reads, as UTC
  RenderLimits limits;
};

using Variables = std::vector<std::pair<std::string, Value>>;

class Template {
 public:
  static Template parse(std::string_view source);

  // Renders with `variables` as the template's context (names not given are
  // Undefined). Throws TemplateError.
  std::string render(const Variables& variables, const RenderOptions& options) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;  // immutable once parsed: renders may share it
};

}  // namespace tokamak::jinja
