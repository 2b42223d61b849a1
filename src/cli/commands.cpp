#include "cli/commands.h"

#include <array>

namespace tokamak::cli {

std::span<const Command> commands() {
  static const std::array<Command, 0> kCommands{};
  return kCommands;
}

}  // namespace tokamak::cli
