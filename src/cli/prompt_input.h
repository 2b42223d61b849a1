// The prompt of `tokamak run`, as llama.cpp takes it: -p TEXT, -f FILE, or
// `-p -` / `-f -` for stdin; escape sequences processed unless --no-escape.
#pragma once

#include <string>
#include <string_view>

#include "cli/args.h"

namespace tokamak::cli {

inline constexpr OptionSpec kPromptOptions[] = {
    {"-p,--prompt", "TEXT", "prompt; - reads it from stdin (default: empty, generation starts after BOS)"},
    {"-f,--file", "FILE", "read the prompt from FILE; - is stdin"},
    {"-e,--escape", "", "process escapes \\n \\r \\t \\' \\\" \\\\ \\xHH in the prompt (the default)"},
    {"--no-escape", "", "take the prompt's backslashes literally"},
};

// llama.cpp's escapes: \n \r \t \' \" \\ and \xHH (two hex digits). Any other
// backslash, and a trailing one, stays as it is.
std::string process_escapes(std::string_view text);

// The prompt text the flags ask for (escapes processed unless --no-escape),
// "" without -p or -f. Throws UsageError when both are given, Error when the
// file or stdin cannot be read.
std::string read_prompt(const ParsedArgs& args);

}  // namespace tokamak::cli
