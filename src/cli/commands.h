// The table of `tokamak` subcommands. Each command's main takes argv with
// argv[0] = the command name and returns the process exit code.
#pragma once

#include <span>
#include <string_view>

namespace tokamak::cli {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*main)(int argc, char** argv);
};

std::span<const Command> commands();

}  // namespace tokamak::cli
