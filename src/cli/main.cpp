// tokamak: the command line front end. Each subcommand lives in its own file.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "cli/commands.h"
#include "core/error.h"

namespace {

void print_usage(std::FILE* out) {
  std::fputs("usage: tokamak <command> [options]\n\ncommands:\n", out);
  for (const tokamak::cli::Command& c : tokamak::cli::commands()) {
    std::fprintf(out, "  %-12.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fputs("\nrun 'tokamak <command> --help' for a command's options.\n", out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string_view command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    print_usage(stdout);
    return 0;
  }
  try {
    for (const tokamak::cli::Command& c : tokamak::cli::commands()) {
      if (c.name == command) return c.main(argc - 1, argv + 1);
    }
    std::fprintf(stderr, "tokamak: unknown command '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
  } catch (const tokamak::Error& e) {
    std::fprintf(stderr, "tokamak %s: error: %s\n", argv[1], e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tokamak %s: error: out of memory\n", argv[1]);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokamak %s: error: %s\n", argv[1], e.what());
    return 1;
  }
}
