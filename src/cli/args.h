// A small command line parser shared by the subcommands: options are declared
// in a table, values are checked with errors that name the flag and the value.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tokamak::cli {

// A command line the command cannot run with (an unknown option, a missing or
// malformed value): main exits with status 2 for it, 1 for any other error.
class UsageError : public Error {
 public:
  using Error::Error;
};

struct OptionSpec {
  std::string_view names;       // comma-separated spellings, long one last: "-m,--model"
  std::string_view value_name;  // empty for a flag without a value
  std::string_view help;
};

class ParsedArgs {
 public:
  // Throws UsageError for an unknown option or a missing value.
  static ParsedArgs parse(std::span<const OptionSpec> specs, int argc, char** argv);

  // `name` is any spelling of the option as declared ("--model" or "-m").
  bool has(std::string_view name) const;
  std::optional<std::string> get(std::string_view name) const;  // the last occurrence
  std::vector<std::string> get_all(std::string_view name) const;
  std::string get_or(std::string_view name, std::string_view fallback) const;
  // Typed values; UsageErrors name the flag, the value and the allowed range.
  int64_t get_int(std::string_view name, int64_t fallback, int64_t min, int64_t max) const;
  double get_float(std::string_view name, double fallback, double min, double max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  const OptionSpec* find(std::string_view name) const;
  std::span<const OptionSpec> specs_;
  std::vector<std::pair<const OptionSpec*, std::string>> values_;
  std::vector<std::string> positional_;
};

// "usage: tokamak <command> ..." followed by one line per option.
std::string usage_text(std::string_view command, std::string_view synopsis, std::span<const OptionSpec> specs);

}  // namespace tokamak::cli
