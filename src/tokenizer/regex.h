// A small regex engine over code points, for the pre-tokenizer patterns of
// byte-level BPE vocabularies ("'s|'t| ?\p{L}+| ?\p{N}+|\s+(?!\S)|..."). It
// gives the matches ECMAScript (std::regex) gives: leftmost start, then the
// first alternative in pattern order, greedy quantifiers.
//
// Syntax: literals (UTF-8), escapes \r \n \t \f \v \\ and any escaped
// punctuation, classes [...] [^...] with ranges, \s \S \d \D \w \W, \p{L}
// \p{N} \p{P} \p{S} \p{M} (major general categories from utf8proc), '.',
// groups (...) (?:...), lookahead (?=...) (?!...), anchors ^ $, quantifiers
// ? * + {n} {n,} {n,m}. Anything else (backreferences, lazy or possessive
// quantifiers, \b, case-insensitive groups, subcategories such as \p{Lu}) is
// rejected at compile time.
//
// \s means U+0009..U+000D and U+0020 only: callers fold every other
// White_Space code point to U+000B first, exactly as llama.cpp feeds its
// std::regex (which knows ASCII spaces only). Category tests read the flags
// of the original code point.
//
// Cost: a backtracking search with a visited set of (instruction, position)
// states, so one find() explores each state at most once: O(pattern x span)
// for the span of text it looks at, never exponential. Lookahead bodies are
// run without that set; keep them to a few characters.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tokamak::regex {

struct Text {
  std::span<const uint32_t> cps;    // [n] code points, White_Space above ASCII folded to U+000B
  std::span<const uint16_t> flags;  // [n] unicode::flags of the original code points
};

struct Range {
  size_t begin = 0;
  size_t end = 0;  // exclusive
};

class Regex {
 public:
  // Throws tokamak::Error naming the pattern and the offending offset.
  static Regex compile(std::string_view pattern);

  const std::string& pattern() const { return pattern_; }

  enum class Op : uint8_t { Class, Split, Jump, Match, Begin, End, Look, LookEnd };
  struct Inst {
    Op op = Op::Match;
    bool negate = false;  // Look: (?! rather than (?=
    uint32_t x = 0;       // Class: class index; Split: preferred target; Jump: target; Look: continuation
    uint32_t y = 0;       // Split: the other target
  };
  // A character class: ASCII membership is a bitmap, the rest is ranges and
  // categories; `negated` applies to the non-ASCII part (the bitmap has it already).
  struct Class {
    uint64_t ascii[2] = {0, 0};
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive, code points >= 0x80
    uint16_t categories = 0;                             // unicode::Flag bits
    bool all_non_ascii = false;                          // from \S, \D, \W, '.'
    bool negated = false;
    bool contains(uint32_t cp, uint16_t flags) const;
  };

  const std::vector<Inst>& program() const { return program_; }
  const std::vector<Class>& classes() const { return classes_; }

 private:
  std::string pattern_;
  std::vector<Inst> program_;
  std::vector<Class> classes_;
};

// Reusable memory for searches (the visited set and the backtracking stack).
// One per thread; find() reuses it without reallocating once warm.
class Matcher {
 public:
  // The leftmost match of `re` in text[begin, end) that starts at or after
  // `from`; ^ and $ match at begin and end, lookahead sees nothing past end.
  bool find(const Regex& re, const Text& text, size_t begin, size_t end, size_t from, Range& match);

  // Cuts every range in `ranges` at the matches of `re`: each match and each
  // stretch between matches becomes its own range, in text order (empty ones
  // are dropped). `ranges` is replaced by the result.
  void split(const Regex& re, const Text& text, std::vector<Range>& ranges);

 private:
  struct State {
    uint32_t pc;
    size_t pos;
  };
  bool run(const Regex& re, const Text& text, uint32_t pc, size_t pos, size_t* match_end);
  bool run_look(const Regex& re, const Text& text, uint32_t pc, size_t pos);
  bool visit(uint32_t pc, size_t pos);  // false if (pc, pos) was explored already in this find()

  size_t begin_ = 0, end_ = 0, base_ = 0, n_inst_ = 0, max_pos_ = 0;
  std::vector<uint64_t> visited_;  // bit (pos - base_) * n_inst_ + pc
  std::vector<State> stack_;
  std::vector<Range> scratch_;
};

}  // namespace tokamak::regex
