// The value model of the Jinja interpreter: the Python objects a chat template
// sees (None, bool, int, float, str, list, tuple, dict, Jinja's Undefined and
// namespace, callables), with Python's semantics for truth, str(), repr(),
// equality and ordering.
//
// Lists, tuples and dicts are immutable and shared (copying a Value is a
// refcount increment): the sandbox Hugging Face renders with forbids mutating
// them. Only a namespace is mutable, through `{% set ns.attr = ... %}`.
// Containers record their nesting depth so that no value can be nested deeper
// than kMaxDepth, which bounds every recursion over values (repr, equality,
// JSON, destruction).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "jinja/error.h"

namespace tokamak::jinja {

class Value;
struct Function;

inline constexpr uint32_t kMaxDepth = 256;  // deepest nesting of lists/dicts/tuples

struct ListData {
  std::vector<Value> items;
  uint32_t depth = 1;
  // For a generator or iterator: how many items were consumed already (Python
  // iterators are single-use; the only state a render mutates outside namespaces).
  mutable size_t consumed = 0;
  // For a generator: the error computing it raised, which Python raises only
  // when the generator is consumed (an unused one never fails).
  std::shared_ptr<const TemplateError> deferred_error;
};

// Insertion-ordered like a Python dict. Lookup is linear: template dicts are small.
struct DictData {
  std::vector<std::pair<Value, Value>> items;
  uint32_t depth = 1;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts or overwrites (Python dict assignment).
  void set(Value key, Value value);
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Namespace, Function, Iterator };
  // What an Iterator stands for: the lazy results of filters (map, select, ...),
  // reversed(), and the views of dict.items()/keys()/values().
  enum class IterKind : uint8_t { Generator, ReverseIterator, DictItems, DictKeys, DictValues };

  Value() = default;  // Undefined
  Value(bool b) : kind_(Kind::Bool), data_(b) {}
  Value(int v) : kind_(Kind::Int), data_(int64_t{v}) {}
  Value(int64_t v) : kind_(Kind::Int), data_(v) {}
  Value(double v) : kind_(Kind::Float), data_(v) {}
  Value(std::string s) : kind_(Kind::String), data_(std::make_shared<const std::string>(std::move(s))) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}

  // An undefined value; `hint` is what an operation on it reports
  // (e.g. "'tools' is undefined").
  static Value undefined(std::string hint);
  static Value none();
  // Throws a Limit error when the items nest deeper than kMaxDepth.
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict(DictData d);
  static Value make_namespace(DictData d);
  // markupsafe.Markup: a string marked safe (`|safe`, `|escape`); adding a plain
  // string to it HTML-escapes that string, as in Jinja.
  static Value markup(std::string s);
  static Value iterator(std::vector<Value> items, IterKind kind);
  static Value failed_generator(const TemplateError& error);
  static Value function(std::shared_ptr<const Function> f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }  // Python: bool is an int
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::Tuple; }
  bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }  // list or tuple
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_function() const { return kind_ == Kind::Function; }
  bool is_markup() const { return kind_ == Kind::String && sub_ != 0; }
  bool is_iterator() const { return kind_ == Kind::Iterator; }
  IterKind iter_kind() const { return static_cast<IterKind>(sub_); }
  // dict views have a length and are re-iterable; generators and iterators are not.
  bool is_view() const { return kind_ == Kind::Iterator && iter_kind() >= IterKind::DictItems; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;     // Int or Bool
  double as_double() const;   // Int, Bool or Float
  const std::string& str() const { return *std::get<StrPtr>(data_); }
  const std::vector<Value>& items() const { return std::get<ListPtr>(data_)->items; }  // List, Tuple, Iterator
  const ListData& list_data() const { return *std::get<ListPtr>(data_); }
  const DictData& dict() const { return *std::get<DictPtr>(data_); }
  DictData& ns() const { return *std::get<NsPtr>(data_); }  // a namespace is mutable through every copy
  const std::shared_ptr<DictData>& ns_ptr() const { return std::get<NsPtr>(data_); }
  const Function& fn() const { return *std::get<FnPtr>(data_); }
  const std::string& undefined_hint() const;  // for Undefined: what using it reports

  uint32_t depth() const;  // 0 for scalars

  // Python truthiness (Undefined is false).
  bool truthy() const;
  // Python's type name, for error messages: 'str', 'int', 'NoneType', 'dict', ...
  std::string type_name() const;
  // Jinja's object_type_repr, used in "'dict object' has no attribute 'x'".
  std::string object_type_repr() const;

 private:
  using StrPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<const DictData>;
  using NsPtr = std::shared_ptr<DictData>;
  using FnPtr = std::shared_ptr<const Function>;

  Kind kind_ = Kind::Undefined;
  uint8_t sub_ = 0;  // String: 1 = Markup; Iterator: IterKind
  std::variant<std::monostate, bool, int64_t, double, StrPtr, ListPtr, DictPtr, NsPtr, FnPtr> data_;
};

// str(v) as Jinja prints it: Undefined prints empty, None "None", True "True",
// floats in Python's repr, containers as Python's repr.
std::string to_str(const Value& v);
// Python repr(v).
std::string repr(const Value& v);
// Python's float repr (shortest round-trip digits, '1e+16', '0.0001', '1.0').
std::string float_repr(double d);
// Python ==. Ints and floats compare by value; dicts ignore order.
bool equals(const Value& a, const Value& b);
// Python a < b for numbers, strings and lists/tuples; a Runtime error otherwise.
bool less_than(const Value& a, const Value& b);

// JSON (e.g. the request's messages) to Values. Objects keep their key order.
Value from_json(const nlohmann::ordered_json& j);

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Interpreter;
struct Stmt;
struct Scope;

// A native function gets the receiver for bound methods (`self`) and the arguments.
using NativeFn = Value (*)(Interpreter& in, const Value& self, CallArgs& args);

// A callable value: a builtin (range, namespace, ...), a bound method
// ('a,b'.split), or a macro of the template. A macro reaches the scope it was
// defined in through a weak pointer: a value must not own a scope (cycles).
struct Function {
  std::string name;
  NativeFn native = nullptr;
  Value self;
  const Stmt* macro = nullptr;
  std::weak_ptr<Scope> closure;
};

}  // namespace tokamak::jinja
