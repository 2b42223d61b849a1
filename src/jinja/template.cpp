#include "jinja/template.h"

#include <ctime>

#include "jinja/interpreter.h"
#include "jinja/parser.h"

namespace tokamak::jinja {

Template Template::parse(std::string_view source) { return Template(parse_template(source)); }

std::string Template::render(const Variables& variables, const RenderOptions& options) const {
  auto globals = std::make_shared<Scope>();
  for (const auto& [name, value] : variables) globals->set(name, value);
  std::tm now{};
  const std::time_t t = static_cast<std::time_t>(options.now_unix_seconds);
  gmtime_r(&t, &now);
  Interpreter interpreter(*program_, now, options.limits);
  return interpreter.render(globals);
}

}  // namespace tokamak::jinja
