#include "jinja/value.h"

#include <charconv>
#include <cmath>

#include "jinja/error.h"
#include "jinja/pystr.h"

namespace tokamak::jinja {

namespace {

uint32_t max_depth_of(const std::vector<Value>& items) {
  uint32_t d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  return d;
}

void check_depth(uint32_t depth) {
  if (depth > kMaxDepth) limit_error("value nested deeper than " + std::to_string(kMaxDepth) + " levels");
}

void check_recursion(int depth) {
  if (depth > static_cast<int>(kMaxDepth) + 8) limit_error("value nested too deeply (or containing itself)");
}

bool equals_at(const Value& a, const Value& b, int depth);

bool sequences_equal(const std::vector<Value>& x, const std::vector<Value>& y, int depth) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!equals_at(x[i], y[i], depth + 1)) return false;
  }
  return true;
}

bool equals_at(const Value& a, const Value& b, int depth) {
  check_recursion(depth);
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined: case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::List: case K::Tuple: return sequences_equal(a.items(), b.items(), depth);
    case K::Dict: {
      const auto& x = a.dict().items;
      const auto& y = b.dict().items;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict().find(k);
        if (!other || !equals_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case K::Namespace: return a.ns_ptr() == b.ns_ptr();
    case K::Function: return &a.fn() == &b.fn();
    case K::Iterator: return &a.list_data() == &b.list_data();
    default: return false;
  }
}

bool less_at(const Value& a, const Value& b, int depth) {
  check_recursion(depth);
  if (a.is_undefined()) runtime_error(a.undefined_hint());
  if (b.is_undefined()) runtime_error(b.undefined_hint());
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals_at(x[i], y[i], depth + 1)) return less_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  runtime_error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

void repr_into(std::string& out, const Value& v, int depth) {
  check_recursion(depth);
  using K = Value::Kind;
  switch (v.kind()) {
    case K::Undefined: out += "Undefined"; return;
    case K::None: out += "None"; return;
    case K::Bool: out += v.as_bool() ? "True" : "False"; return;
    case K::Int: out += std::to_string(v.as_int()); return;
    case K::Float: out += float_repr(v.as_double()); return;
    case K::String:
      if (v.is_markup()) {
        out += "Markup(" + pystr::repr(v.str()) + ")";
      } else {
        out += pystr::repr(v.str());
      }
      return;
    case K::Iterator:
      if (!v.is_view()) {
        out += "<" + v.type_name() + " object>";  // Python adds an address here
        return;
      }
      out += v.type_name() + "(";
      repr_into(out, Value::list(v.items()), depth + 1);
      out += ")";
      return;
    case K::List: case K::Tuple: {
      const bool tuple = v.is_tuple();
      out += tuple ? '(' : '[';
      const auto& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, items[i], depth + 1);
      }
      if (tuple && items.size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case K::Dict: case K::Namespace: {
      const DictData& d = v.is_dict() ? v.dict() : v.ns();
      if (v.is_namespace()) out += "<Namespace ";
      out += '{';
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, d.items[i].first, depth + 1);
        out += ": ";
        repr_into(out, d.items[i].second, depth + 1);
      }
      out += '}';
      if (v.is_namespace()) out += '>';
      return;
    }
    case K::Function: out += "<function " + v.fn().name + ">"; return;
  }
}

Value from_json_at(const nlohmann::ordered_json& j, uint32_t depth) {
  if (depth > kMaxDepth) limit_error("input JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value(j.get<bool>());
    case T::number_integer: return Value(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case T::number_float: return Value(j.get<double>());
    case T::string: return Value(j.get_ref<const std::string&>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      DictData d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.set(Value(it.key()), from_json_at(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    default: runtime_error("unsupported JSON value type (binary or discarded) in the template inputs");
  }
}

}  // namespace

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::set(Value key, Value value) {
  depth = std::max(depth, 1 + std::max(key.depth(), value.depth()));
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::list(std::vector<Value> items) {
  const uint32_t depth = 1 + max_depth_of(items);
  check_depth(depth);
  Value v;
  v.kind_ = Kind::List;
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->depth = depth;
  v.data_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}

Value Value::dict(DictData d) {
  check_depth(d.depth);
  Value v;
  v.kind_ = Kind::Dict;
  v.data_ = std::make_shared<const DictData>(std::move(d));
  return v;
}

Value Value::make_namespace(DictData d) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.data_ = std::make_shared<DictData>(std::move(d));
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.sub_ = 1;
  return v;
}

Value Value::iterator(std::vector<Value> items, IterKind kind) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Iterator;
  v.sub_ = static_cast<uint8_t>(kind);
  return v;
}

Value Value::failed_generator(const TemplateError& error) {
  Value v = iterator({}, IterKind::Generator);
  auto data = std::make_shared<ListData>();
  data->deferred_error = std::make_shared<const TemplateError>(error);
  v.data_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}

Value Value::function(std::shared_ptr<const Function> f) {
  Value v;
  v.kind_ = Kind::Function;
  v.data_ = std::move(f);
  return v;
}

const std::string& Value::undefined_hint() const {
  static const std::string kNoHint = "undefined value";
  if (const auto* p = std::get_if<StrPtr>(&data_)) return **p;
  return kNoHint;
}

int64_t Value::as_int() const {
  if (kind_ == Kind::Bool) return std::get<bool>(data_) ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind_ == Kind::Float) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

uint32_t Value::depth() const {
  switch (kind_) {
    case Kind::List: case Kind::Tuple: case Kind::Iterator: return std::get<ListPtr>(data_)->depth;
    case Kind::Dict: return std::get<DictPtr>(data_)->depth;
    case Kind::Namespace: return 1;  // mutable: its contents are cut loose after each render
    default: return 0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !str().empty();
    case Kind::List: case Kind::Tuple: return !items().empty();
    case Kind::Dict: return !dict().items.empty();
    case Kind::Iterator: return !is_view() || !items().empty();  // a generator is always true
    default: return true;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Function: return "function";
    case Kind::Iterator:
      switch (iter_kind()) {
        case IterKind::Generator: return "generator";
        case IterKind::ReverseIterator: return "list_reverseiterator";
        case IterKind::DictItems: return "dict_items";
        case IterKind::DictKeys: return "dict_keys";
        case IterKind::DictValues: return "dict_values";
      }
  }
  return "object";
}

std::string Value::object_type_repr() const {
  if (kind_ == Kind::None) return "None";
  if (kind_ == Kind::Namespace) return "jinja2.utils.Namespace object";
  return type_name() + " object";
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // e.g. "-1.2345e+17"
  const size_t e_at = sci.find('e');
  std::string_view mant = sci.substr(0, e_at);
  std::string sign;
  if (!mant.empty() && mant[0] == '-') {
    sign = "-";
    mant.remove_prefix(1);
  }
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  std::from_chars(sci.data() + e_at + (sci[e_at + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp);
  const int n = static_cast<int>(digits.size());
  const int decpt = exp + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = sign;
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    const int e = decpt - 1;
    out += e < 0 ? "e-" : "e+";
    const std::string e_digits = std::to_string(e < 0 ? -e : e);
    if (e_digits.size() < 2) out += '0';
    out += e_digits;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt >= n) {
    out += digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string to_str(const Value& v) {
  if (v.is_undefined()) return {};
  if (v.is_string()) return v.str();
  return repr(v);
}

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }
bool less_than(const Value& a, const Value& b) { return less_at(a, b, 0); }

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

}  // namespace tokamak::jinja
