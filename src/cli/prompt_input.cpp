#include "cli/prompt_input.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"

namespace tokamak::cli {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string read_all(std::istream& in, const std::string& name) {
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(name + ": cannot read the prompt: " + std::strerror(errno));
  return text.str();
}

}  // namespace

std::string process_escapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char c = text[i + 1];
    const char simple = c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : (c == '\'' || c == '"' || c == '\\') ? c : 0;
    if (simple != 0) {
      out += simple;
      ++i;
    } else if (c == 'x' && i + 3 < text.size() && hex_digit(text[i + 2]) >= 0 && hex_digit(text[i + 3]) >= 0) {
      out += static_cast<char>(hex_digit(text[i + 2]) * 16 + hex_digit(text[i + 3]));
      i += 3;
    } else {
      out += '\\';
    }
  }
  return out;
}

std::string read_prompt(const ParsedArgs& args) {
  const std::optional<std::string> text = args.get("--prompt");
  const std::optional<std::string> file = args.get("--file");
  if (text && file) throw UsageError("give the prompt once: -p TEXT or -f FILE, not both");
  std::string prompt;
  if (file && *file != "-") {
    std::ifstream in(*file, std::ios::binary);
    if (!in) throw Error(*file + ": cannot open the prompt file: " + std::strerror(errno));
    prompt = read_all(in, *file);
  } else if ((file && *file == "-") || (text && *text == "-")) {
    prompt = read_all(std::cin, "stdin");
  } else if (text) {
    prompt = *text;
  }
  return args.has("--no-escape") ? prompt : process_escapes(prompt);
}

}  // namespace tokamak::cli
