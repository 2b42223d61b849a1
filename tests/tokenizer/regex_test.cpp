// The pre-tokenizer regex engine: ECMAScript match semantics on code points,
// linear-time search, the syntax it refuses, and the splits the
// pre-tokenizers make.
#include <gtest/gtest.h>

#include <chrono>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/test_cases.h"
#include "tokenizer/unicode.h"

namespace tokamak {
namespace {

using testing::error_of;

// Code points and flags of `s`, with other White_Space folded to VT as the
// pre-tokenizer does.
struct Input {
  std::vector<uint32_t> cps;
  std::vector<uint16_t> flags;
  explicit Input(std::string_view s) : cps(unicode::decode_utf8(s)) {
    for (uint32_t& c : cps) {
      flags.push_back(unicode::flags(c));
      if (c > 0x7F && (flags.back() & unicode::kWhitespace)) c = 0x0B;
    }
  }
  regex::Text text() const { return {cps, flags}; }
};

// The pieces `pattern` cuts `s` into, as UTF-8 (folded spaces shown as VT).
std::vector<std::string> split(const std::string& pattern, std::string_view s) {
  const Input in(s);
  std::vector<regex::Range> ranges;
  if (!in.cps.empty()) ranges.push_back({0, in.cps.size()});
  regex::Matcher m;
  m.split(regex::Regex::compile(pattern), in.text(), ranges);
  std::vector<std::string> out;
  for (const auto& r : ranges) {
    out.emplace_back();
    for (size_t i = r.begin; i < r.end; ++i) unicode::append_utf8(out.back(), in.cps[i]);
  }
  return out;
}

// The first match of `pattern` in `s` as text, or "<none>".
std::string first_match(const std::string& pattern, std::string_view s) {
  const Input in(s);
  regex::Matcher m;
  regex::Range r;
  if (!m.find(regex::Regex::compile(pattern), in.text(), 0, in.cps.size(), 0, r)) return "<none>";
  std::string out;
  for (size_t i = r.begin; i < r.end; ++i) unicode::append_utf8(out, in.cps[i]);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Regex, LeftmostFirstNotLongest) {
  EXPECT_EQ(first_match("a|ab", "xab"), "a");
  EXPECT_EQ(first_match("ab|a", "xab"), "ab");
  EXPECT_EQ(first_match("b+", "aabbb"), "bbb");
}

TEST(Regex, GreedyWithBacktrackingAndLookahead) {
  // \s+(?!\S) gives back one space so the next word can take it.
  EXPECT_EQ(first_match(R"(\s+(?!\S))", "   x"), "  ");
  EXPECT_EQ(first_match(R"(\s+(?!\S))", "   "), "   ");
  EXPECT_EQ(first_match(R"(\s*[\r\n]+)", "  \n \n  x"), "  \n \n");
  EXPECT_EQ(first_match(R"(x(?=y))", "xz xy"), "x");
  EXPECT_EQ(first_match(R"(\d{2,3})", "1 12345"), "123");
  EXPECT_EQ(first_match(R"(a{2,})", "a aaaa"), "aaaa");
  EXPECT_EQ(first_match(R"(\s+$)", "a  b  "), "  ");
  EXPECT_EQ(first_match(R"(^b)", "bb"), "b");
  EXPECT_EQ(first_match(R"(^b)", "ab"), "<none>");
}

TEST(Regex, ClassesAndCategories) {
  EXPECT_EQ(first_match(R"(\p{L}+)", "12 Führer!"), "Führer");
  EXPECT_EQ(first_match(R"(\p{N}+)", "ab ½3"), "½3");
  EXPECT_EQ(first_match(R"([^\s\p{L}\p{N}]+)", "ab 🦙!!c"), "🦙!!");
  EXPECT_EQ(first_match(R"(\p{P}+)", "a$+,.;b"), ",.;");  // $ and + are symbols
  EXPECT_EQ(first_match(R"([\p{P}\$\+]+)", "a$+,.;b"), "$+,.;");
  EXPECT_EQ(first_match("[\u4E00-\u9FA5]+", "apple工作1314"), "工作");
  EXPECT_EQ(first_match(R"([a-c\-]+)", "x-b-ay"), "-b-a");
  EXPECT_EQ(first_match(R"([^a-z]+)", "abCD1e"), "CD1");
  EXPECT_EQ(first_match(R"(\S+)", "  héllo "), "héllo");
  // Other White_Space arrives folded to VT, which \s matches and a literal does not.
  EXPECT_EQ(first_match(R"(\s+)", "a\u3000\u00A0b"), "\v\v");
  EXPECT_EQ(first_match(R"(.+)", "ab\ncd"), "ab");
}

TEST(Regex, SplitKeepsMatchesAndGaps) {
  EXPECT_EQ(split(R"(\p{N})", "ab12c"), (Pieces{"ab", "1", "2", "c"}));
  EXPECT_EQ(split(R"(\d{1,3})", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("x", ""), (Pieces{}));
  EXPECT_EQ(split("x", "abc"), (Pieces{"abc"}));
}

TEST(Regex, UnsupportedSyntaxIsAnErrorNamingThePattern) {
  for (const char* p : {"(?i:a)", "a*?", "a++", R"(\b)", R"(\1)", R"(\p{Lu})", "[a", "(a", "a)", "*", "a{3,2}",
                        "a{5000}", R"((?<=a)b)"}) {
    const std::string msg = error_of([&] { regex::Regex::compile(p); });
    EXPECT_NE(msg.find(std::string("'") + p + "'"), std::string::npos) << p << ": " << msg;
  }
}

// The visited set keeps searches linear where plain backtracking explodes.
TEST(Regex, NoCatastrophicBacktracking) {
  const std::string as(20000, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(first_match("(a*)*b", as), "<none>");
  EXPECT_EQ(split(R"(\s+$)", std::string(50000, ' ') + "x").size(), 1u);  // no match: every start fails
  EXPECT_EQ(split(R"(\s+$)", "x" + std::string(50000, ' ')).size(), 2u);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(testing::pre_tokenize("gpt-2", "Hello world's  test\n\n  x 123!?"),
            (Pieces{"Hello", " world", "'s", " ", " test", "\n\n ", " x", " 123", "!?"}));
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(testing::pre_tokenize("llama3", "I'VE 12345 .\n\n  ab\tcd"),
            (Pieces{"I", "'VE", " ", "123", "45", " .\n\n", " ", " ab", "\tcd"}));
}

TEST(PreTokenizer, EveryKnownNameCompilesAndSplitsLosslessly) {
  std::string text;
  for (const auto& c : testing::llama_cpp_vocab_cases("models/llama.cpp-vocab/ggml-vocab-gpt-2.gguf")) text += c.text;
  text += "<sentinel:12> IMGIMGABZ    \u3000\u00A0x";
  for (const std::string_view name : PreTokenizer::known_names()) {
    std::string joined;
    for (const std::string& w : testing::pre_tokenize(name, text)) {
      EXPECT_FALSE(w.empty()) << name;
      joined += w;
    }
    EXPECT_EQ(joined, text) << name;
  }
  EXPECT_EQ(error_of([] { PreTokenizer::from_name("nonesuch"); }), "unknown pre-tokenizer 'nonesuch'");
}

TEST(PreTokenizer, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(testing::pre_tokenize("gpt-2", "a\xFF" "b"), (Pieces{"a", "\xEF\xBF\xBD", "b"}));
}

}  // namespace
}  // namespace tokamak
