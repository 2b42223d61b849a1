#include "cli/commands.h"

#include <array>

namespace tokamak::cli {

int logits_command(int argc, char** argv);
int tokenize_command(int argc, char** argv);

std::span<const Command> commands() {
  static constexpr std::array<Command, 2> kCommands{{
      {"tokenize", "print the token ids of a text", tokenize_command},
      {"logits", "write the logits of a token sequence as raw float32", logits_command},
  }};
  return kCommands;
}

}  // namespace tokamak::cli
