// `tojson` as Hugging Face defines it for chat templates: Python's
// json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...),
// byte for byte (", " and ": " separators, Python float repr, non-ASCII text
// kept as is, no HTML escaping).
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"

namespace tokamak::jinja {

struct JsonFormat {
  std::optional<std::string> indent;  // nullopt: everything on one line
  std::string item_separator = ", ";  // json.dumps default; "," when indenting
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Throws a Runtime error for values JSON cannot hold (Undefined, namespaces, functions).
std::string to_json(const Value& v, const JsonFormat& format);

}  // namespace tokamak::jinja
