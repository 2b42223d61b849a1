// Python `str` semantics over UTF-8 bytes, for the Jinja interpreter: lengths,
// indices and slices count code points; strip/split/splitlines use Python's
// notion of whitespace and line breaks; case mapping uses utf8proc.
//
// Decoding is total over arbitrary bytes: an invalid byte b decodes to the lone
// surrogate U+DC00+b (Python's "surrogateescape") and encodes back to the same
// byte, so no function here can fail or read out of bounds on bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokamak::jinja::pystr {

struct Decoded {
  char32_t cp;   // code point (U+DC80..U+DCFF for an invalid byte)
  uint32_t len;  // bytes consumed, 1..4
};
// Decodes the code point starting at byte i (requires i < s.size()).
Decoded decode(std::string_view s, size_t i);
// Decodes the code point that ends at byte `end` (requires 0 < end <= s.size()),
// agreeing with forward decoding.
Decoded decode_before(std::string_view s, size_t end);
void append_utf8(std::string& out, char32_t cp);
std::u32string to_u32(std::string_view s);
std::string from_u32(std::u32string_view s);

bool is_ascii(std::string_view s);
size_t length(std::string_view s);  // in code points
bool is_space(char32_t cp);         // str.isspace()

// str.strip / lstrip / rstrip; chars == nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit); sep == nullopt splits on whitespace runs. Throws on an empty sep.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
int64_t count(std::string_view s, std::string_view sub);
// str.find / rfind: code point index, or -1.
int64_t find(std::string_view s, std::string_view sub, bool reverse);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
bool is_cased_upper(std::string_view s);     // str.isupper()
bool is_cased_lower(std::string_view s);     // str.islower()
bool all_of_class(std::string_view s, int cls);  // 0 digit, 1 alpha, 2 alnum, 3 space (str.isdigit etc.)

// repr(s): quoted with ' (or " when s has ' but no "), escapes as Python does.
std::string repr(std::string_view s);

// Python's slice index arithmetic: normalizes (start, stop, step) for a
// sequence of `len` items and returns the selected indices.
std::vector<int64_t> slice_indices(int64_t len, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   int64_t step);

}  // namespace tokamak::jinja::pystr
