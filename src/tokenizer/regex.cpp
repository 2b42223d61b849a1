#include "tokenizer/regex.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tokamak::regex {

bool Regex::Class::contains(uint32_t cp, uint16_t flags) const {
  if (cp < 128) return ((ascii[cp >> 6] >> (cp & 63)) & 1) != 0;
  bool in = all_non_ascii || (flags & categories) != 0;
  for (size_t i = 0; !in && i < ranges.size(); ++i) in = cp >= ranges[i].first && cp <= ranges[i].second;
  return in != negated;
}

namespace {

constexpr int kUnbounded = -1;
constexpr int kMaxRepeat = 1000;  // {n,m} bounds; the body is copied that many times

// The syntax tree the parser builds and the compiler flattens.
struct Node {
  enum Kind { Alternation, Sequence, Repeat, Set, Look, Begin, End } kind = Sequence;
  std::vector<Node> kids;
  int min = 0, max = 0;   // Repeat
  uint32_t set = 0;       // Set: class index
  bool negate = false;    // Look
};

// A class under construction: members before negation.
struct ClassBuilder {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // any code points
  uint16_t categories = 0;
  bool ascii_space = false, not_space = false;  // \s, \S
  bool digit = false, not_digit = false;        // \d, \D
  bool word = false, not_word = false;          // \w, \W
  bool dot = false;                             // '.': all but line terminators

  Regex::Class build(bool negated) const {
    Regex::Class c;
    c.negated = negated;
    c.categories = categories;
    c.all_non_ascii = not_space || not_digit || not_word;
    for (const auto& [lo, hi] : ranges) {
      if (hi >= 0x80) c.ranges.emplace_back(std::max<uint32_t>(lo, 0x80), hi);
    }
    if (dot) {
      // ECMAScript '.': everything except \n, \r, U+2028, U+2029.
      c.ranges.emplace_back(0x80, 0x2027);
      c.ranges.emplace_back(0x202A, 0x10FFFF);
    }
    for (uint32_t cp = 0; cp < 128; ++cp) {
      const bool space = (cp >= 9 && cp <= 13) || cp == ' ';
      const bool is_digit = cp >= '0' && cp <= '9';
      const bool is_word = is_digit || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
      bool in = (unicode::flags(cp) & categories) != 0 || (ascii_space && space) || (not_space && !space) ||
                (digit && is_digit) || (not_digit && !is_digit) || (word && is_word) || (not_word && !is_word) ||
                (dot && cp != '\n' && cp != '\r');
      for (size_t i = 0; !in && i < ranges.size(); ++i) in = cp >= ranges[i].first && cp <= ranges[i].second;
      if (in != negated) c.ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
    }
    return c;
  }
};

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<Regex::Class>& classes)
      : pattern_(pattern), cps_(unicode::decode_utf8(pattern)), classes_(classes) {}

  Node parse() {
    Node n = alternation();
    if (pos_ < cps_.size()) fail("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("regex '" + std::string(pattern_) + "': " + what + " at code point " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= cps_.size(); }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0; }
  uint32_t next() {
    if (at_end()) fail("unexpected end");
    return cps_[pos_++];
  }
  bool eat(uint32_t c) {
    if (at_end() || cps_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  uint32_t add_class(const ClassBuilder& b, bool negated) {
    classes_.push_back(b.build(negated));
    return static_cast<uint32_t>(classes_.size() - 1);
  }
  Node set_node(const ClassBuilder& b, bool negated) {
    Node n;
    n.kind = Node::Set;
    n.set = add_class(b, negated);
    return n;
  }

  Node alternation() {
    Node alt;
    alt.kind = Node::Alternation;
    alt.kids.push_back(sequence());
    while (eat('|')) alt.kids.push_back(sequence());
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Node sequence() {
    Node seq;
    seq.kind = Node::Sequence;
    while (!at_end() && peek() != '|' && peek() != ')') seq.kids.push_back(repeat());
    return seq;
  }

  Node repeat() {
    Node atom_node = atom();
    int min = 1, max = 1;
    if (eat('?')) {
      min = 0, max = 1;
    } else if (eat('*')) {
      min = 0, max = kUnbounded;
    } else if (eat('+')) {
      min = 1, max = kUnbounded;
    } else if (peek() == '{' && peek(1) >= '0' && peek(1) <= '9') {
      ++pos_;
      min = max = number();
      if (eat(',')) max = peek() == '}' ? kUnbounded : number();
      if (!eat('}')) fail("expected '}'");
      if (max != kUnbounded && max < min) fail("{n,m} with m < n");
    } else {
      return atom_node;
    }
    if (peek() == '?' || peek() == '+') fail("lazy and possessive quantifiers are not supported");
    if (atom_node.kind == Node::Begin || atom_node.kind == Node::End || atom_node.kind == Node::Look) {
      fail("quantified assertion");
    }
    Node r;
    r.kind = Node::Repeat;
    r.min = min, r.max = max;
    r.kids.push_back(std::move(atom_node));
    return r;
  }

  int number() {
    int n = 0;
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a number");
    while (peek() >= '0' && peek() <= '9') {
      n = n * 10 + static_cast<int>(next() - '0');
      if (n > kMaxRepeat) fail("repeat count above " + std::to_string(kMaxRepeat));
    }
    return n;
  }

  Node atom() {
    const uint32_t c = next();
    switch (c) {
      case '(': {
        Node inner;
        if (eat('?')) {
          const uint32_t kind = next();
          if (kind == ':') {
            inner = alternation();
          } else if (kind == '=' || kind == '!') {
            inner.kind = Node::Look;
            inner.negate = kind == '!';
            inner.kids.push_back(alternation());
          } else {
            fail("unsupported group (?" + std::string(1, static_cast<char>(kind < 128 ? kind : '?')));
          }
        } else {
          inner = alternation();  // capturing groups capture nothing here
        }
        if (!eat(')')) fail("expected ')'");
        return inner;
      }
      case '[':
        return bracket();
      case '.': {
        ClassBuilder b;
        b.dot = true;
        return set_node(b, false);
      }
      case '^': {
        Node n;
        n.kind = Node::Begin;
        return n;
      }
      case '$': {
        Node n;
        n.kind = Node::End;
        return n;
      }
      case '\\': {
        ClassBuilder b;
        escape(b);
        return set_node(b, false);
      }
      case '*':
      case '+':
      case '?':
      case '{':
        fail("nothing to repeat");
      case ')':
      case ']':
      case '}':
        fail("unbalanced '" + std::string(1, static_cast<char>(c)) + "'");
      default: {
        ClassBuilder b;
        b.ranges.emplace_back(c, c);
        return set_node(b, false);
      }
    }
  }

  // After a backslash: adds the escaped item to `b`. Returns the code point
  // for a literal (so that a class can use it as a range end), else -1.
  int64_t escape(ClassBuilder& b) {
    const uint32_t c = next();
    uint32_t literal = c;
    switch (c) {
      case 's': b.ascii_space = true; return -1;
      case 'S': b.not_space = true; return -1;
      case 'd': b.digit = true; return -1;
      case 'D': b.not_digit = true; return -1;
      case 'w': b.word = true; return -1;
      case 'W': b.not_word = true; return -1;
      case 'p': b.categories |= category(); return -1;
      case 'r': literal = '\r'; break;
      case 'n': literal = '\n'; break;
      case 't': literal = '\t'; break;
      case 'f': literal = '\f'; break;
      case 'v': literal = '\v'; break;
      default:
        // Escaped punctuation stands for itself; letters and digits would be
        // escapes this engine does not know (\b, \1, \u...).
        if (c < 128 && (unicode::flags(c) & (unicode::kLetter | unicode::kNumber)) != 0) {
          fail("unsupported escape \\" + std::string(1, static_cast<char>(c)));
        }
    }
    b.ranges.emplace_back(literal, literal);
    return literal;
  }

  uint16_t category() {
    if (!eat('{')) fail("expected '{' after \\p");
    std::string name;
    while (!at_end() && peek() != '}') name += static_cast<char>(next() & 0x7F);
    if (!eat('}')) fail("expected '}'");
    if (name == "L") return unicode::kLetter;
    if (name == "N") return unicode::kNumber;
    if (name == "P") return unicode::kPunctuation;
    if (name == "S") return unicode::kSymbol;
    if (name == "M") return unicode::kMark;
    fail("unsupported category \\p{" + name + "}");
  }

  Node bracket() {
    ClassBuilder b;
    const bool negated = eat('^');
    bool first = true;
    while (true) {
      if (at_end()) fail("unterminated '['");
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      int64_t lo;
      if (eat('\\')) {
        lo = escape(b);
      } else {
        lo = next();
        b.ranges.emplace_back(static_cast<uint32_t>(lo), static_cast<uint32_t>(lo));
      }
      // A range "a-z"; a '-' before ']' is literal.
      if (lo >= 0 && peek() == '-' && peek(1) != ']' && pos_ + 1 < cps_.size()) {
        ++pos_;
        int64_t hi;
        if (eat('\\')) {
          ClassBuilder ignored;
          hi = escape(ignored);
          if (hi < 0) fail("class escape as a range end");
        } else {
          hi = next();
        }
        if (hi < lo) fail("range out of order");
        b.ranges.back() = {static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)};
      }
    }
    return set_node(b, negated);
  }

  std::string_view pattern_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
  std::vector<Regex::Class>& classes_;
};

class Compiler {
 public:
  explicit Compiler(std::vector<Regex::Inst>& program) : program_(program) {}

  void emit(const Node& n) {
    switch (n.kind) {
      case Node::Set:
        add(Regex::Op::Class, n.set);
        break;
      case Node::Begin:
        add(Regex::Op::Begin);
        break;
      case Node::End:
        add(Regex::Op::End);
        break;
      case Node::Sequence:
        for (const Node& k : n.kids) emit(k);
        break;
      case Node::Alternation: {
        std::vector<uint32_t> jumps;
        for (size_t i = 0; i + 1 < n.kids.size(); ++i) {
          const uint32_t split = add(Regex::Op::Split, pc() + 1);
          emit(n.kids[i]);
          jumps.push_back(add(Regex::Op::Jump));
          program_[split].y = pc();
        }
        emit(n.kids.back());
        for (const uint32_t j : jumps) program_[j].x = pc();
        break;
      }
      case Node::Repeat: {
        for (int i = 0; i < n.min; ++i) emit(n.kids[0]);
        if (n.max == kUnbounded) {
          const uint32_t loop = add(Regex::Op::Split, pc() + 1);
          emit(n.kids[0]);
          add(Regex::Op::Jump, loop);
          program_[loop].y = pc();
        } else {
          std::vector<uint32_t> splits;
          for (int i = n.min; i < n.max; ++i) {
            splits.push_back(add(Regex::Op::Split, pc() + 1));
            emit(n.kids[0]);
          }
          for (const uint32_t s : splits) program_[s].y = pc();
        }
        break;
      }
      case Node::Look: {
        const uint32_t look = add(Regex::Op::Look);
        program_[look].negate = n.negate;
        emit(n.kids[0]);
        add(Regex::Op::LookEnd);
        program_[look].x = pc();
        break;
      }
    }
    if (program_.size() > (1u << 20)) throw Error("regex: program too large");
  }

  uint32_t add(Regex::Op op, uint32_t x = 0) {
    program_.push_back({op, false, x, 0});
    return pc() - 1;
  }
  uint32_t pc() const { return static_cast<uint32_t>(program_.size()); }

 private:
  std::vector<Regex::Inst>& program_;
};

}  // namespace

Regex Regex::compile(std::string_view pattern) {
  Regex re;
  re.pattern_ = pattern;
  const Node root = Parser(pattern, re.classes_).parse();
  Compiler compiler(re.program_);
  compiler.emit(root);
  compiler.add(Op::Match);
  return re;
}

bool Matcher::visit(uint32_t pc, size_t pos) {
  // Positions far beyond the search start are not remembered: the set would
  // grow with the text. Only a pathological pattern needs them.
  constexpr size_t kMaxSpan = size_t{1} << 20;
  const size_t rel = pos - base_;
  if (rel >= kMaxSpan) return true;
  const size_t bit = rel * n_inst_ + pc;
  const size_t word = bit >> 6;
  if (word >= visited_.size()) visited_.resize(std::max(word + 1, visited_.size() * 2), 0);
  const uint64_t mask = uint64_t{1} << (bit & 63);
  if (visited_[word] & mask) return false;
  visited_[word] |= mask;
  max_pos_ = std::max(max_pos_, pos);
  return true;
}

bool Matcher::run(const Regex& re, const Text& text, uint32_t start_pc, size_t start_pos, size_t* match_end) {
  const auto& prog = re.program();
  const auto& classes = re.classes();
  const size_t floor = stack_.size();
  stack_.push_back({start_pc, start_pos});
  while (stack_.size() > floor) {
    uint32_t pc = stack_.back().pc;
    size_t pos = stack_.back().pos;
    stack_.pop_back();
    while (visit(pc, pos)) {
      const Regex::Inst& in = prog[pc];
      if (in.op == Regex::Op::Class) {
        if (pos >= end_ || !classes[in.x].contains(text.cps[pos], text.flags[pos])) break;
        ++pc, ++pos;
      } else if (in.op == Regex::Op::Split) {
        stack_.push_back({in.y, pos});
        pc = in.x;
      } else if (in.op == Regex::Op::Jump) {
        pc = in.x;
      } else if (in.op == Regex::Op::Match) {
        *match_end = pos;
        stack_.resize(floor);
        return true;
      } else if (in.op == Regex::Op::Begin) {
        if (pos != begin_) break;
        ++pc;
      } else if (in.op == Regex::Op::End) {
        if (pos != end_) break;
        ++pc;
      } else if (in.op == Regex::Op::Look) {
        if (run_look(re, text, pc + 1, pos) == in.negate) break;
        pc = in.x;
      } else {
        break;  // LookEnd is reached only inside run_look
      }
    }
  }
  return false;
}

bool Matcher::run_look(const Regex& re, const Text& text, uint32_t start_pc, size_t start_pos) {
  // Plain backtracking: lookahead bodies are a character or two.
  const auto& prog = re.program();
  const auto& classes = re.classes();
  std::vector<State> stack{{start_pc, start_pos}};
  while (!stack.empty()) {
    uint32_t pc = stack.back().pc;
    size_t pos = stack.back().pos;
    stack.pop_back();
    for (bool alive = true; alive;) {
      const Regex::Inst& in = prog[pc];
      switch (in.op) {
        case Regex::Op::Class:
          alive = pos < end_ && classes[in.x].contains(text.cps[pos], text.flags[pos]);
          ++pc, ++pos;
          break;
        case Regex::Op::Split:
          stack.push_back({in.y, pos});
          pc = in.x;
          break;
        case Regex::Op::Jump:
          pc = in.x;
          break;
        case Regex::Op::Begin:
          alive = pos == begin_;
          ++pc;
          break;
        case Regex::Op::End:
          alive = pos == end_;
          ++pc;
          break;
        case Regex::Op::Look:
          alive = run_look(re, text, pc + 1, pos) != in.negate;
          pc = in.x;
          break;
        case Regex::Op::LookEnd:
          return true;
        case Regex::Op::Match:
          alive = false;
          break;
      }
    }
  }
  return false;
}

bool Matcher::find(const Regex& re, const Text& text, size_t begin, size_t end, size_t from, Range& match) {
  begin_ = begin, end_ = end, base_ = from, max_pos_ = from;
  n_inst_ = re.program().size();
  bool found = false;
  for (size_t start = from; start <= end && !found; ++start) {
    size_t match_end = 0;
    if (run(re, text, 0, start, &match_end)) {
      match = {start, match_end};
      found = true;
    }
  }
  // Clear exactly the words this search may have set.
  const size_t used = ((std::min(max_pos_ - base_, (size_t{1} << 20)) + 1) * n_inst_ + 63) >> 6;
  std::fill(visited_.begin(), visited_.begin() + static_cast<std::ptrdiff_t>(std::min(used, visited_.size())), 0);
  return found;
}

void Matcher::split(const Regex& re, const Text& text, std::vector<Range>& ranges) {
  scratch_.clear();
  for (const Range& r : ranges) {
    size_t gap = r.begin;  // start of the text not yet covered by a match
    for (size_t from = r.begin; from <= r.end;) {
      Range m;
      if (!find(re, text, r.begin, r.end, from, m)) break;
      if (m.begin > gap) scratch_.push_back({gap, m.begin});
      if (m.end > m.begin) scratch_.push_back(m);
      gap = m.end;
      from = m.end > m.begin ? m.end : m.end + 1;  // an empty match only cuts
    }
    if (gap < r.end) scratch_.push_back({gap, r.end});
  }
  ranges.swap(scratch_);
}

}  // namespace tokamak::regex
