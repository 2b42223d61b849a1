// tokamak: the command line front end. Each subcommand lives in its own file.
// Exit status: 0 done, 1 a runtime error, 2 a usage error (the command line).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/std_streams.h"
#include "cli/version.h"
#include "core/error.h"

namespace {

void print_usage(std::FILE* out) {
  std::fputs("usage: tokamak <command> [options]\n\ncommands:\n", out);
  for (const tokamak::cli::Command& c : tokamak::cli::commands()) {
    std::fprintf(out, "  %-12.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fputs("\nrun 'tokamak <command> --help' for a command's options; 'tokamak --version' for the build.\n", out);
}

int run_command(std::string_view command, int argc, char** argv) {
  for (const tokamak::cli::Command& c : tokamak::cli::commands()) {
    if (c.name == command) return c.main(argc, argv);
  }
  std::fprintf(stderr, "tokamak: unknown command '%.*s'\n\n", static_cast<int>(command.size()), command.data());
  print_usage(stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (!tokamak::cli::prepare_standard_streams()) {
    std::fputs("tokamak: error: cannot open /dev/null for a closed standard stream\n", stderr);
    return 1;
  }
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string_view command = argv[1];
  int status = 0;
  try {
    if (command == "-h" || command == "--help" || command == "help") {
      print_usage(stdout);
    } else if (command == "--version" || command == "version") {
      std::fputs(tokamak::cli::version_text().c_str(), stdout);
    } else {
      status = run_command(command, argc - 1, argv + 1);
    }
  } catch (const tokamak::cli::UsageError& e) {
    std::fprintf(stderr, "tokamak %s: error: %s\nrun 'tokamak %s --help' for its options.\n", argv[1], e.what(),
                 argv[1]);
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tokamak %s: error: out of memory\n", argv[1]);
    return 1;
  } catch (const std::exception& e) {  // tokamak::Error and the standard library's
    std::fprintf(stderr, "tokamak %s: error: %s\n", argv[1], e.what());
    return 1;
  }
  if (const std::string failed = tokamak::cli::finish_stdout(); !failed.empty()) {
    std::fprintf(stderr, "tokamak %s: error: %s\n", argv[1], failed.c_str());
    return 1;
  }
  return status;
}
