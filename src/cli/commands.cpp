#include "cli/commands.h"

#include <array>

namespace tokamak::cli {

int logits_command(int argc, char** argv);
int run_command(int argc, char** argv);
int tokenize_command(int argc, char** argv);

std::span<const Command> commands() {
  static constexpr std::array<Command, 3> kCommands{{
      {"run", "generate text from a prompt", run_command},
      {"tokenize", "print the token ids of a text", tokenize_command},
      {"logits", "write the logits of a token sequence as raw float32", logits_command},
  }};
  return kCommands;
}

}  // namespace tokamak::cli
