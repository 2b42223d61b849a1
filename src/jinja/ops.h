// Python/Jinja semantics of the operators and of attribute and item access:
// what `a + b`, `a in b`, `x.y`, `x[i]`, `x[1:-1]` and `for x in y` do for each
// kind of value, including Jinja's Undefined (printing and iterating it is
// fine; computing with it is an error naming what was undefined).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace tokamak::jinja {

// What one render may spend. Work units: one per node evaluated, plus the size
// of every string and list produced, so a template cannot loop or grow values
// beyond these bounds.
struct RenderLimits {
  size_t max_string_bytes = size_t{32} << 20;  // the output, and any one string built on the way
  uint64_t max_work = 10'000'000;              // at most a few seconds; a string costs 1 unit per 16 bytes
  // Nested evaluation frames (macro recursion included). A frame takes ~0.7 KiB
  // of stack in a release build (~3 KiB under ASan): 500 fit a 1 MiB stack.
  int max_depth = 500;
};

class Budget {
 public:
  explicit Budget(const RenderLimits& limits) : limits_(limits), work_left_(limits.max_work) {}
  void charge(uint64_t units) {
    if (units > work_left_) limit_error("the template did more work than allowed (" + std::to_string(limits_.max_work) + " units)");
    work_left_ -= units;
  }
  // Charges for a value of `bytes` bytes and checks it against max_string_bytes.
  void charge_string(size_t bytes);
  // Only the size check, for a string still growing (charge it once it is done).
  void check_size(size_t bytes) const;
  const RenderLimits& limits() const { return limits_; }

 private:
  RenderLimits limits_;
  uint64_t work_left_;
};

// `for x in v`: Undefined iterates as empty; dicts give their keys; strings
// their characters. Iterating a generator consumes it, as in Python.
std::vector<Value> iterate(const Value& v);
// next(iter(v)) for the `first` filter: consumes one item of a generator.
std::optional<Value> first_item(const Value& v);
// len(v); Undefined has length 0.
int64_t length(const Value& v);

// obj.name: methods first (as Jinja's getattr does), then keys; missing is Undefined.
Value get_attr(const Value& obj, std::string_view name);
// obj[key]: keys and indices first, then attributes; missing is Undefined.
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

Value binary_op(BinOp op, const Value& a, const Value& b, Budget& budget);
Value negate(const Value& v);
Value unary_plus(const Value& v);
bool compare(CmpOp op, const Value& a, const Value& b);
// `item in container`.
bool contains(const Value& container, const Value& item);
// Python's `fmt % args` for the conversions templates use (%s %r %d %i %f %x %%).
// With escape_args (Markup % args), string arguments are HTML-escaped; with
// allow_unused, leftover arguments are no error (Python's mapping case).
std::string percent_format(const std::string& fmt, const std::vector<Value>& args, bool escape_args = false,
                           bool allow_unused = false);

// markupsafe.escape: & < > " ' as HTML entities.
std::string escape_html(std::string_view s);
// A string result derived from `like`: Markup stays Markup (as str methods on Markup do).
Value same_string_kind(const Value& like, std::string s);

// An integer argument (int or bool); Runtime error naming `what` otherwise.
int64_t to_int_arg(const Value& v, std::string_view what);

}  // namespace tokamak::jinja
