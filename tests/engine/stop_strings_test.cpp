#include "engine/stop_strings.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace tokamak::engine {
namespace {

// Pushes the pieces; returns what each push emitted, and "|STOP<i>" after a stop.
std::vector<std::string> feed(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const std::string& p : pieces) {
    const auto r = m.push(p);
    out.push_back(r.stopped ? r.text + "|STOP" + std::to_string(r.stop_index) : r.text);
  }
  return out;
}

using Strings = std::vector<std::string>;

TEST(StopStrings, SplitAcrossTokens) {
  StopStringMatcher m({"STOP"});
  EXPECT_EQ(feed(m, {"Hello ", "wor", "ld ST", "O", "P and more", "ignored"}),
            (Strings{"Hello ", "wor", "ld ", "", "|STOP0", "|STOP0"}));
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, StopInsideOnePiece) {
  StopStringMatcher m({"</s>"});
  EXPECT_EQ(feed(m, {"abc</s>def"}), (Strings{"abc|STOP0"}));
}

TEST(StopStrings, PartialMatchIsReleasedWhenItFails) {
  StopStringMatcher m({"abc"});
  EXPECT_EQ(feed(m, {"xa", "b", "x", "ab", "d"}), (Strings{"x", "", "abx", "", "abd"}));
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.held_bytes(), 0u);
}

TEST(StopStrings, OverlappingPrefixes) {
  // "aa" + "a": the held "aa" fails as a start, but its second 'a' may still begin "aab".
  StopStringMatcher m({"aab"});
  EXPECT_EQ(feed(m, {"a", "a", "a", "b"}), (Strings{"", "", "a", "|STOP0"}));
}

TEST(StopStrings, TheStopThatEndsFirstWins) {
  StopStringMatcher m({"world", "lo w", "xyz"});
  EXPECT_EQ(feed(m, {"hel", "lo", " wor", "ld"}), (Strings{"he", "l", "|STOP1", "|STOP1"}));
  // "bc" ends before "abcd" does, whether or not they complete in the same piece.
  StopStringMatcher n({"abcd", "bc"});
  EXPECT_EQ(feed(n, {"xab", "cd"}), (Strings{"x", "a|STOP1"}));
  StopStringMatcher o({"abcd", "bc"});
  EXPECT_EQ(feed(o, {"xabc", "d"}), (Strings{"xa|STOP1", "|STOP1"}));
  // Same end: the longer (earlier) one.
  StopStringMatcher p({"cd", "abcd"});
  EXPECT_EQ(feed(p, {"xabcd"}), (Strings{"x|STOP1"}));
}

TEST(StopStrings, MultiByteStopSplitInsideACharacter) {
  // "é" is C3 A9; the pieces end inside it.
  StopStringMatcher m({"é!"});
  EXPECT_EQ(feed(m, {"caf\xC3", "\xA9", "!"}), (Strings{"caf", "", "|STOP0"}));
  // The same bytes with another ending are released whole.
  StopStringMatcher n({"é!"});
  EXPECT_EQ(feed(n, {"caf\xC3", "\xA9", "s"}), (Strings{"caf", "", "és"}));
}

TEST(StopStrings, EmojiStopOverThreePieces) {
  // U+1F642 is F0 9F 99 82.
  StopStringMatcher m({"\xF0\x9F\x99\x82 end"});
  EXPECT_EQ(feed(m, {"ok\xF0\x9F", "\x99\x82 e", "nd!"}), (Strings{"ok", "", "|STOP0"}));
}

TEST(StopStrings, NeverEmitsHalfACharacter) {
  StopStringMatcher m({"zzz"});
  // "€" is E2 82 AC.
  EXPECT_EQ(feed(m, {"a\xE2", "\x82", "\xAC b"}), (Strings{"a", "", "\xE2\x82\xAC b"}));
  StopStringMatcher none({});
  EXPECT_EQ(feed(none, {"x\xF0\x9F\x99", "\x82"}), (Strings{"x", "\xF0\x9F\x99\x82"}));
}

TEST(StopStrings, InvalidBytesAreNotHeldForever) {
  StopStringMatcher m({"zzz"});
  // A stray continuation byte, and a lead byte followed by ASCII, pass through.
  EXPECT_EQ(feed(m, {"a\x80", "\xC3x", "\xFF"}), (Strings{"a\x80", "\xC3x", "\xFF"}));
}

TEST(StopStrings, FlushReleasesWhatIsHeld) {
  StopStringMatcher m({"abc"});
  EXPECT_EQ(m.push("xab").text, "x");
  EXPECT_EQ(m.flush(), "ab");
  EXPECT_EQ(m.push("q\xE2\x82").text, "q");
  EXPECT_EQ(m.flush(), "\xE2\x82");
  m.reset();
  EXPECT_EQ(feed(m, {"ab", "c"}), (Strings{"", "|STOP0"}));
  m.reset();
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("abd").text, "abd");
}

TEST(StopStrings, EmptyStopStringIsAnError) { EXPECT_THROW(StopStringMatcher({"ok", ""}), Error); }

// Random texts over a small alphabet (with multi-byte characters) cut at random
// byte positions: what is emitted is always a prefix of the final answer, never
// ends in half a character, and the total is the text up to the stop string
// that ends first (ties: the longer).
TEST(StopStrings, RandomSplitsMatchAWholeTextSearch) {
  const std::vector<std::string> alphabet = {"a", "b", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x99\x82"};
  std::mt19937 gen(1234);
  const auto pick = [&](size_t n) { return static_cast<size_t>(gen() % n); };
  const auto random_text = [&](size_t chars) {
    std::string s;
    for (size_t i = 0; i < chars; ++i) s += alphabet[pick(alphabet.size())];
    return s;
  };
  const auto complete_utf8 = [](const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
      const auto c = static_cast<unsigned char>(s[i]);
      const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      if (i + len > s.size()) return false;
      i += len;
    }
    return true;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops = {random_text(1 + pick(3)), random_text(1 + pick(4))};
    const std::string text = random_text(pick(40));
    size_t first = std::string::npos, first_end = std::string::npos;
    for (const auto& s : stops) {
      const size_t pos = text.find(s);
      if (pos == std::string::npos) continue;
      if (pos + s.size() < first_end || (pos + s.size() == first_end && pos < first)) {
        first = pos;
        first_end = pos + s.size();
      }
    }
    const std::string expected = first == std::string::npos ? text : text.substr(0, first);

    StopStringMatcher m(stops);
    std::string emitted;
    bool stopped = false;
    for (size_t pos = 0; pos < text.size() && !stopped;) {
      const size_t len = std::min(text.size() - pos, 1 + pick(5));
      const auto r = m.push(std::string_view(text).substr(pos, len));
      pos += len;
      ASSERT_TRUE(complete_utf8(r.text)) << "trial " << trial;
      emitted += r.text;
      stopped = r.stopped;
      ASSERT_EQ(expected.compare(0, emitted.size(), emitted), 0) << "trial " << trial << ": emitted too much";
    }
    if (!stopped) emitted += m.flush();
    ASSERT_EQ(stopped, first != std::string::npos) << "trial " << trial;
    ASSERT_EQ(emitted, expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace tokamak::engine
