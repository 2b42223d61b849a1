// The builtins a chat template can call: filters (`x | trim`), tests
// (`x is defined`), global functions (range, namespace, raise_exception,
// strftime_now, ...) and methods of strings, dicts and lists ('a'.split(',')).
// Tables are constant; lookups return null for names we do not implement.
#pragma once

#include <ctime>
#include <functional>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace tokamak::jinja {

class Interpreter;

using FilterFn = Value (*)(Interpreter& in, const Value& subject, CallArgs& args);
using TestFn = bool (*)(Interpreter& in, const Value& subject, CallArgs& args);

FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
NativeFn find_global(std::string_view name);

// Methods: `self.name(...)`. has_method says whether `self.name` is a method
// (Jinja looks attributes up before keys: `d.items` is the method, not d['items']).
bool has_method(const Value& self, std::string_view name);
Value call_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& args);

// Argument binding for builtins, Python style: positional then keyword.
// Unknown keywords and surplus positionals are Runtime errors naming `fn`.
struct Param {
  const char* name;
  Value default_value = Value();  // used when the caller leaves the parameter out
  bool required = false;
};
std::vector<Value> bind_args(std::string_view fn, const CallArgs& args, std::initializer_list<Param> params);

// Stable merge sort that stays in bounds whatever `less` answers (std::sort
// needs a strict weak order; Python comparisons of odd values need not be one).
void stable_sort_values(std::vector<Value>& v, const std::function<bool(const Value&, const Value&)>& less);
// strftime for strftime_now: %a %A %b %B %d %e %H %I %j %m %M %p %S %y %Y %Z %z %F %T %D %R %u %w %C %h
// %n %t %%, with glibc's '-' flag (%-d: no padding); other conversions are copied as written.
std::string format_time(const std::tm& t, std::string_view fmt);

}  // namespace tokamak::jinja
