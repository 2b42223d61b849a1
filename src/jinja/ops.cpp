#include "jinja/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/builtins.h"
#include "jinja/pystr.h"

namespace tokamak::jinja {

void Budget::check_size(size_t bytes) const {
  if (bytes > limits_.max_string_bytes) {
    limit_error("a string of " + std::to_string(bytes) + " bytes exceeds the limit of " +
                std::to_string(limits_.max_string_bytes));
  }
}

void Budget::charge_string(size_t bytes) {
  check_size(bytes);
  charge(1 + bytes / 16);
}

namespace {

[[noreturn]] void fail_undefined(const Value& v) { runtime_error(v.undefined_hint()); }

std::vector<Value> chars_of(std::string_view s) {
  std::vector<Value> out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = pystr::decode(s, i).len;
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// Jinja's Undefined messages: "'dict object' has no attribute 'x'", "list object has no element 0".
std::string missing_hint(const Value& obj, const Value& key) {
  if (key.is_string()) return pystr::repr(obj.object_type_repr()) + " has no attribute " + pystr::repr(key.str());
  return obj.object_type_repr() + " has no element " + repr(key);
}

std::optional<int64_t> slice_bound(const Value& v) {
  if (v.is_none()) return std::nullopt;
  if (!v.is_integral()) runtime_error("slice indices must be integers or None or have an __index__ method");
  return v.as_int();
}

Value repeat(const Value& seq, int64_t n, Budget& budget) {
  if (n <= 0) return seq.is_string() ? Value("") : seq.is_tuple() ? Value::tuple({}) : Value::list({});
  if (seq.is_string()) {
    const size_t unit = seq.str().size();
    if (unit != 0 && static_cast<uint64_t>(n) > budget.limits().max_string_bytes / unit) {
      limit_error("string repetition of " + std::to_string(n) + " copies exceeds the string size limit");
    }
    budget.charge_string(unit * static_cast<size_t>(n));
    std::string out;
    out.reserve(unit * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return same_string_kind(seq, std::move(out));
  }
  const auto& items = seq.items();
  if (!items.empty() && static_cast<uint64_t>(n) > budget.limits().max_string_bytes / items.size()) {
    limit_error("list repetition of " + std::to_string(n) + " copies is too large");
  }
  budget.charge(1 + items.size() * static_cast<uint64_t>(n));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

[[noreturn]] void unsupported_operands(const char* op, const Value& a, const Value& b) {
  runtime_error(std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
                b.type_name() + "'");
}

void check_overflow(bool overflow) {
  if (overflow) runtime_error("integer overflow (the result does not fit in 64 bits)");
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
    exp >>= 1;
    if (exp > 0) check_overflow(__builtin_mul_overflow(base, base, &base));
  }
  return Value(result);
}

double py_fmod(double a, double b) {
  double r = std::fmod(a, b);
  if (r == 0) return std::copysign(0.0, b);  // Python: a zero result takes the divisor's sign
  if ((r < 0) != (b < 0)) r += b;
  return r;
}

}  // namespace

std::string escape_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

Value same_string_kind(const Value& like, std::string s) {
  return like.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

std::optional<Value> first_item(const Value& v) {
  if (v.is_iterator() && !v.is_view()) {
    const ListData& d = v.list_data();
    if (d.deferred_error) throw *d.deferred_error;
    if (d.consumed >= d.items.size()) return std::nullopt;
    return d.items[d.consumed++];
  }
  std::vector<Value> items = iterate(v);
  if (items.empty()) return std::nullopt;
  return items.front();
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::Iterator: {
      if (v.is_view()) return v.items();
      const ListData& d = v.list_data();
      if (d.deferred_error) throw *d.deferred_error;
      std::vector<Value> rest(d.items.begin() + static_cast<ptrdiff_t>(std::min(d.consumed, d.items.size())),
                              d.items.end());
      d.consumed = d.items.size();
      return rest;
    }
    case Value::Kind::List: case Value::Kind::Tuple: return v.items();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& [k, _] : v.dict().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: return chars_of(v.str());
    default: runtime_error("'" + v.type_name() + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<int64_t>(pystr::length(v.str()));
    case Value::Kind::List: case Value::Kind::Tuple: return static_cast<int64_t>(v.items().size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.dict().items.size());
    case Value::Kind::Iterator:
      if (v.is_view()) return static_cast<int64_t>(v.items().size());
      runtime_error("object of type '" + v.type_name() + "' has no len()");
    default: runtime_error("object of type '" + v.type_name() + "' has no len()");
  }
}

Value get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (has_method(obj, name)) {
    auto f = std::make_shared<Function>();
    f->name = std::string(name);
    f->self = obj;
    return Value::function(std::move(f));
  }
  if (obj.is_dict() || obj.is_namespace()) {
    const DictData& d = obj.is_dict() ? obj.dict() : obj.ns();
    if (const Value* v = d.find(name)) return *v;
  }
  return Value::undefined(missing_hint(obj, Value(name)));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() || obj.is_namespace()) {
    const DictData& d = obj.is_dict() ? obj.dict() : obj.ns();
    if (const Value* v = d.find(key)) return *v;
  } else if ((obj.is_sequence() || obj.is_string()) && key.is_integral()) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      const std::string& s = obj.str();
      if (pystr::is_ascii(s)) {
        const auto n = static_cast<int64_t>(s.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return same_string_kind(obj, s.substr(static_cast<size_t>(i), 1));
      } else {
        const std::vector<Value> chars = chars_of(s);
        const auto n = static_cast<int64_t>(chars.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return same_string_kind(obj, chars[static_cast<size_t>(i)].str());
      }
    } else {
      const auto n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
    }
  }
  if (key.is_string() && has_method(obj, key.str())) return get_attr(obj, key.str());
  return Value::undefined(missing_hint(obj, key));
}

// Jinja compiles slices to plain Python slicing (no sandbox fallback to Undefined).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) runtime_error("unhashable type: 'slice'");
  if (!(obj.is_sequence() || obj.is_string())) runtime_error("'" + obj.type_name() + "' object is not subscriptable");
  const auto b = slice_bound(start);
  const auto e = slice_bound(stop);
  const auto st = slice_bound(step);
  const int64_t step_v = st.value_or(1);
  if (step_v == 0) runtime_error("slice step cannot be zero");
  if (obj.is_string()) {
    const std::u32string u = pystr::to_u32(obj.str());
    std::u32string out;
    for (int64_t i : pystr::slice_indices(static_cast<int64_t>(u.size()), b, e, step_v)) {
      out.push_back(u[static_cast<size_t>(i)]);
    }
    return same_string_kind(obj, pystr::from_u32(out));
  }
  const auto& items = obj.items();
  std::vector<Value> out;
  for (int64_t i : pystr::slice_indices(static_cast<int64_t>(items.size()), b, e, step_v)) {
    out.push_back(items[static_cast<size_t>(i)]);
  }
  return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value binary_op(BinOp op, const Value& a, const Value& b, Budget& budget) {
  if (op == BinOp::Mod && a.is_string()) {
    // str % x is str.__mod__, so even an Undefined x is formatted (as ''). A
    // single list, dict or Undefined counts as a mapping: unused, it is no error.
    if (b.is_dict() && a.str().find("%(") != std::string::npos) unsupported("%(name)s formatting is not supported");
    const bool mapping_like = b.is_list() || b.is_dict() || b.is_undefined();
    std::string s = percent_format(a.str(), b.is_tuple() ? b.items() : std::vector<Value>{b}, a.is_markup(), mapping_like);
    budget.charge_string(s.size());
    return same_string_kind(a, std::move(s));
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = a.is_integral() && b.is_integral();
  switch (op) {
    case BinOp::Add: {
      if (ints) {
        int64_t r = 0;
        check_overflow(__builtin_add_overflow(a.as_int(), b.as_int(), &r));
        return Value(r);
      }
      if (nums) return Value(a.as_double() + b.as_double());
      if (a.is_string() && b.is_string()) {
        if (a.is_markup() || b.is_markup()) {
          // Markup + str and str + Markup escape the plain side (markupsafe).
          std::string s = (a.is_markup() ? a.str() : escape_html(a.str())) + (b.is_markup() ? b.str() : escape_html(b.str()));
          budget.charge_string(s.size());
          return Value::markup(std::move(s));
        }
        budget.charge_string(a.str().size() + b.str().size());
        return Value(a.str() + b.str());
      }
      if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
        budget.charge(1 + a.items().size() + b.items().size());
        std::vector<Value> out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
      }
      if (a.is_string() || a.is_list() || a.is_tuple()) {
        runtime_error("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                      a.type_name());
      }
      unsupported_operands("+", a, b);
    }
    case BinOp::Sub: {
      if (ints) {
        int64_t r = 0;
        check_overflow(__builtin_sub_overflow(a.as_int(), b.as_int(), &r));
        return Value(r);
      }
      if (nums) return Value(a.as_double() - b.as_double());
      unsupported_operands("-", a, b);
    }
    case BinOp::Mul: {
      if (ints) {
        int64_t r = 0;
        check_overflow(__builtin_mul_overflow(a.as_int(), b.as_int(), &r));
        return Value(r);
      }
      if (nums) return Value(a.as_double() * b.as_double());
      if ((a.is_string() || a.is_sequence()) && b.is_integral()) return repeat(a, b.as_int(), budget);
      if (a.is_integral() && (b.is_string() || b.is_sequence())) return repeat(b, a.as_int(), budget);
      unsupported_operands("*", a, b);
    }
    case BinOp::Div: {
      if (!nums) unsupported_operands("/", a, b);
      if (b.as_double() == 0) runtime_error("division by zero");
      return Value(a.as_double() / b.as_double());
    }
    case BinOp::FloorDiv: {
      if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) runtime_error("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) runtime_error("integer overflow (the result does not fit in 64 bits)");
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value(q);
      }
      if (!nums) unsupported_operands("//", a, b);
      if (b.as_double() == 0) runtime_error("float floor division by zero");
      return Value(std::floor(a.as_double() / b.as_double()));
    }
    case BinOp::Mod: {
      if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) runtime_error("integer division or modulo by zero");
        if (y == -1) return Value(int64_t{0});
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value(r);
      }
      if (!nums) unsupported_operands("%", a, b);
      if (b.as_double() == 0) runtime_error("float modulo");
      return Value(py_fmod(a.as_double(), b.as_double()));
    }
    case BinOp::Pow: {
      if (ints && b.as_int() >= 0) return int_pow(a.as_int(), b.as_int());
      if (!nums) unsupported_operands("** or pow()", a, b);
      if (a.as_double() == 0 && b.as_double() < 0) runtime_error("0.0 cannot be raised to a negative power");
      return Value(std::pow(a.as_double(), b.as_double()));
    }
  }
  runtime_error("unknown operator");
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) runtime_error("integer overflow (the result does not fit in 64 bits)");
    return Value(-v.as_int());
  }
  if (v.is_float()) return Value(-v.as_double());
  runtime_error("bad operand type for unary -: '" + v.type_name() + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) return Value(v.as_int());
  if (v.is_float()) return v;
  runtime_error("bad operand type for unary +: '" + v.type_name() + "'");
}

bool compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::Eq: return equals(a, b);
    case CmpOp::Ne: return !equals(a, b);
    case CmpOp::Lt: return less_than(a, b);
    case CmpOp::Gt: return less_than(b, a);
    case CmpOp::Le: return less_than(a, b) || equals(a, b);
    case CmpOp::Ge: return less_than(b, a) || equals(a, b);
    case CmpOp::In: return contains(b, a);
    case CmpOp::NotIn: return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) {
        runtime_error("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List: case Value::Kind::Tuple:
      for (const Value& v : container.items()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Kind::Iterator: {
      if (container.is_view()) {
        for (const Value& v : container.items()) {
          if (equals(v, item)) return true;
        }
        return false;
      }
      while (auto v = first_item(container)) {  // consumes up to the match, as Python does
        if (equals(*v, item)) return true;
      }
      return false;
    }
    case Value::Kind::Dict:
      if (item.is_list() || item.is_dict() || item.is_namespace()) {
        runtime_error("unhashable type: '" + item.type_name() + "'");
      }
      return container.dict().find(item) != nullptr;
    default: runtime_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

namespace {

template <typename T>
std::string c_format(const std::string& spec, T value) {
  const int n = std::snprintf(nullptr, 0, spec.c_str(), value);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec.c_str(), value);
  out.pop_back();
  return out;
}

}  // namespace

std::string percent_format(const std::string& fmt, const std::vector<Value>& args, bool escape_args,
                           bool allow_unused) {
  std::string out;
  size_t next_arg = 0;
  auto take = [&]() -> const Value& {
    if (next_arg >= args.size()) runtime_error("not enough arguments for format string");
    return args[next_arg++];
  };
  // Reads up to three digits (widths and precisions above 999 are not supported).
  auto read_number = [&](size_t& j) {
    int n = -1;
    for (int k = 0; k < 3 && j < fmt.size() && fmt[j] >= '0' && fmt[j] <= '9'; ++k, ++j) {
      n = (n < 0 ? 0 : n * 10) + (fmt[j] - '0');
    }
    return n;
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    size_t j = i + 1;
    std::string flags;
    while (j < fmt.size() && std::string_view("-+ #0").find(fmt[j]) != std::string_view::npos) flags += fmt[j++];
    const int width = read_number(j);
    int precision = -1;
    if (j < fmt.size() && fmt[j] == '.') {
      ++j;
      precision = std::max(read_number(j), 0);
    }
    if (j >= fmt.size()) runtime_error("incomplete format");
    const char conv = fmt[i = j];
    std::string spec = "%" + flags + (width >= 0 ? std::to_string(width) : "") +
                       (precision >= 0 ? "." + std::to_string(precision) : "");
    if (conv == '%') {
      out.push_back('%');
    } else if (conv == 's' || conv == 'r') {
      const Value& v = take();
      std::string text = conv == 's' ? to_str(v) : repr(v);
      if (escape_args && !v.is_markup()) text = escape_html(text);
      std::u32string s = pystr::to_u32(text);
      if (precision >= 0 && s.size() > static_cast<size_t>(precision)) s.resize(static_cast<size_t>(precision));
      const size_t pad = width > 0 && s.size() < static_cast<size_t>(width) ? static_cast<size_t>(width) - s.size() : 0;
      const bool left = flags.find('-') != std::string::npos;
      if (!left) out.append(pad, ' ');
      out += pystr::from_u32(s);
      if (left) out.append(pad, ' ');
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      const Value& v = take();
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) runtime_error(std::string("%") + conv + " format: a number is required, not " + v.type_name());
      const double d = v.as_double();
      if (v.is_float() && !(d > -9.2e18 && d < 9.2e18)) runtime_error("%d format: number out of range");
      const int64_t n = v.is_float() ? static_cast<int64_t>(d) : v.as_int();
      out += c_format(spec + "ll" + (conv == 'i' ? 'd' : conv), static_cast<long long>(n));
    } else if (std::string_view("fFeEgG").find(conv) != std::string_view::npos) {
      const Value& v = take();
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) runtime_error(std::string("%") + conv + " format: a real number is required, not " + v.type_name());
      out += c_format(spec + conv, v.as_double());
    } else {
      runtime_error(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next_arg < args.size() && !allow_unused) runtime_error("not all arguments converted during string formatting");
  return out;
}

int64_t to_int_arg(const Value& v, std::string_view what) {
  if (!v.is_integral()) runtime_error(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

}  // namespace tokamak::jinja
