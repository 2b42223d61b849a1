#include "cli/args.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace tokamak::cli {
namespace {

bool spelled_as(const OptionSpec& spec, std::string_view name) {
  std::string_view rest = spec.names;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

const OptionSpec* ParsedArgs::find(std::string_view name) const {
  for (const OptionSpec& s : specs_) {
    if (spelled_as(s, name)) return &s;
  }
  return nullptr;
}

ParsedArgs ParsedArgs::parse(std::span<const OptionSpec> specs, int argc, char** argv) {
  ParsedArgs args;
  args.specs_ = specs;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.size() < 2 || a[0] != '-' || (a.size() > 1 && (std::isdigit(static_cast<unsigned char>(a[1])) != 0))) {
      args.positional_.emplace_back(a);
      continue;
    }
    std::optional<std::string> inline_value;
    if (const size_t eq = a.find('='); a.starts_with("--") && eq != std::string_view::npos) {
      inline_value = std::string(a.substr(eq + 1));
      a = a.substr(0, eq);
    }
    const OptionSpec* spec = args.find(a);
    if (spec == nullptr) throw UsageError("unknown option '" + std::string(a) + "' (see --help)");
    if (spec->value_name.empty()) {
      if (inline_value) throw UsageError("option " + std::string(a) + " takes no value");
      args.values_.emplace_back(spec, "");
      continue;
    }
    if (inline_value) {
      args.values_.emplace_back(spec, *inline_value);
    } else {
      if (i + 1 >= argc) throw UsageError("option " + std::string(a) + " needs a value (" + std::string(spec->value_name) + ")");
      args.values_.emplace_back(spec, argv[++i]);
    }
  }
  return args;
}

bool ParsedArgs::has(std::string_view name) const {
  const OptionSpec* spec = find(name);
  for (const auto& [s, v] : values_) {
    if (s == spec) return true;
  }
  return false;
}

std::optional<std::string> ParsedArgs::get(std::string_view name) const {
  const OptionSpec* spec = find(name);
  std::optional<std::string> last;
  for (const auto& [s, v] : values_) {
    if (s == spec) last = v;
  }
  return last;
}

std::vector<std::string> ParsedArgs::get_all(std::string_view name) const {
  const OptionSpec* spec = find(name);
  std::vector<std::string> all;
  for (const auto& [s, v] : values_) {
    if (s == spec) all.push_back(v);
  }
  return all;
}

std::string ParsedArgs::get_or(std::string_view name, std::string_view fallback) const {
  std::optional<std::string> v = get(name);
  return v ? *v : std::string(fallback);
}

int64_t ParsedArgs::get_int(std::string_view name, int64_t fallback, int64_t min, int64_t max) const {
  const std::optional<std::string> v = get(name);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError("option " + std::string(name) + ": '" + *v + "' is not an integer");
  }
  if (parsed < min || parsed > max) {
    throw UsageError("option " + std::string(name) + ": " + *v + " is outside [" + std::to_string(min) + ", " +
                std::to_string(max) + "]");
  }
  return parsed;
}

double ParsedArgs::get_float(std::string_view name, double fallback, double min, double max) const {
  const std::optional<std::string> v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  const double parsed = std::strtod(v->c_str(), &end);
  const auto range = [&] {
    char text[64];
    std::snprintf(text, sizeof text, "[%g, %g]", min, max);
    return std::string(text);
  };
  if (v->empty() || *end != '\0') {
    throw UsageError("option " + std::string(name) + ": '" + *v + "' is not a number (expected one in " + range() + ")");
  }
  if (!(parsed >= min && parsed <= max)) {  // NaN and infinities included
    throw UsageError("option " + std::string(name) + ": " + *v + " is outside " + range());
  }
  return parsed;
}

std::string usage_text(std::string_view command, std::string_view synopsis, std::span<const OptionSpec> specs) {
  std::string out = "usage: tokamak " + std::string(command) + " " + std::string(synopsis) + "\n\noptions:\n";
  for (const OptionSpec& s : specs) {
    std::string left = "  " + std::string(s.names);
    if (!s.value_name.empty()) left += " " + std::string(s.value_name);
    if (left.size() < 30) left.resize(30, ' ');
    else left += "  ";
    out += left + std::string(s.help) + "\n";
  }
  return out;
}

}  // namespace tokamak::cli
