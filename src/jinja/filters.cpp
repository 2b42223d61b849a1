// Jinja's builtin filters, as Jinja 3.1 defines them, plus Hugging Face's tojson.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <cmath>
#include <cstdio>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/json_dump.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"

namespace tokamak::jinja {

namespace {

Value str_value(Interpreter& in, std::string s) {
  in.budget().charge_string(s.size());
  return Value(std::move(s));
}

Value list_value(Interpreter& in, std::vector<Value> items) {
  in.budget().charge(items.size());
  return Value::list(std::move(items));
}

// Jinja's map/select/reject/unique/items filters are Python generators: lazy,
// single-use, always true, without len() and not JSON serializable.
Value generator(Interpreter& in, std::vector<Value> items) {
  in.budget().charge(items.size());
  return Value::iterator(std::move(items), Value::IterKind::Generator);
}

// Computes a generator filter now, but keeps its error for whoever consumes the
// generator, as Python would raise it only then. Limits are never deferred.
template <typename F>
Value lazily(F compute) {
  try {
    return compute();
  } catch (const TemplateError& e) {
    if (e.kind() == ErrorKind::Limit) throw;
    return Value::failed_generator(e);
  }
}

// The soft_str results of string filters: Markup in, Markup out.
Value keep_kind(Interpreter& in, const Value& like, std::string s) {
  in.budget().charge_string(s.size());
  return same_string_kind(like, std::move(s));
}

// Jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value get_path(const Value& item, const Value& attribute) {
  if (attribute.is_integral()) return get_item(item, attribute);
  if (!attribute.is_string()) runtime_error("attribute must be a string or an integer, not " + attribute.type_name());
  Value v = item;
  for (const std::string& part : pystr::split(attribute.str(), std::string("."), -1)) {
    int64_t index = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), index);
    const bool numeric = !part.empty() && r.ec == std::errc() && r.ptr == part.data() + part.size();
    v = get_item(v, numeric ? Value(index) : Value(part));
  }
  return v;
}

// Jinja's ignore_case: strings compare lowercased unless case_sensitive.
Value sort_key(const Value& v, const Value& attribute, bool case_sensitive) {
  Value k = attribute.is_none() ? v : get_path(v, attribute);
  if (!case_sensitive && k.is_string()) return Value(pystr::lower(k.str()));
  return k;
}

Value f_abs(Interpreter&, const Value& s, CallArgs& a) {
  bind_args("abs", a, {});
  if (s.is_integral()) {
    if (s.as_int() == INT64_MIN) runtime_error("integer overflow (the result does not fit in 64 bits)");
    return Value(s.as_int() < 0 ? -s.as_int() : s.as_int());
  }
  if (s.is_float()) return Value(std::fabs(s.as_double()));
  runtime_error("bad operand type for abs(): '" + s.type_name() + "'");
}

Value f_attr(Interpreter&, const Value& s, CallArgs& a) {
  const auto v = bind_args("attr", a, {{"name", Value(), true}});
  if (!v[0].is_string()) runtime_error("attr(): attribute name must be a string");
  // Attributes only, never keys: {'k': 1} | attr('k') is undefined.
  if (s.is_dict() && !has_method(s, v[0].str())) {
    return Value::undefined("'dict object' has no attribute " + pystr::repr(v[0].str()));
  }
  return get_attr(s, v[0].str());
}

Value f_capitalize(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("capitalize", a, {});
  return keep_kind(in, s, pystr::capitalize(to_str(s)));
}

Value f_center(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("center", a, {{"width", Value(int64_t{80})}});
  const std::string text = to_str(s);
  const int64_t width = to_int_arg(v[0], "center() width");
  const auto len = static_cast<int64_t>(pystr::length(text));
  if (width <= len) return keep_kind(in, s, text);
  const int64_t total = std::min<int64_t>(width - len, static_cast<int64_t>(in.budget().limits().max_string_bytes));
  const int64_t left = total / 2 + (total & width & 1);  // CPython's split of the padding
  return keep_kind(in, s, std::string(static_cast<size_t>(left), ' ') + text +
                              std::string(static_cast<size_t>(total - left), ' '));
}

Value f_default(Interpreter&, const Value& s, CallArgs& a) {
  const auto v = bind_args("default", a, {{"default_value", Value("")}, {"boolean", Value(false)}});
  if (s.is_undefined() || (v[1].truthy() && !s.truthy())) return v[0];
  return s;
}

Value f_dictsort(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("dictsort", a,
                           {{"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}});
  if (!s.is_dict()) runtime_error("dictsort(): expected a mapping, not " + s.type_name());
  const bool by_value = v[1].is_string() && v[1].str() == "value";
  if (!by_value && !(v[1].is_string() && v[1].str() == "key")) {
    runtime_error("dictsort(): 'by' must be 'key' or 'value'");
  }
  std::vector<Value> pairs;
  for (const auto& [k, x] : s.dict().items) pairs.push_back(Value::tuple({k, x}));
  const bool cs = v[0].truthy(), rev = v[2].truthy();
  stable_sort_values(pairs, [&](const Value& x, const Value& y) {
    const Value kx = sort_key(x.items()[by_value ? 1 : 0], Value::none(), cs);
    const Value ky = sort_key(y.items()[by_value ? 1 : 0], Value::none(), cs);
    return rev ? less_than(ky, kx) : less_than(kx, ky);
  });
  return list_value(in, std::move(pairs));
}

Value f_escape(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("escape", a, {});
  if (s.is_markup()) return s;  // already safe: not escaped twice
  std::string out = escape_html(to_str(s));
  in.budget().charge_string(out.size());
  return Value::markup(std::move(out));
}

Value f_first(Interpreter&, const Value& s, CallArgs& a) {
  bind_args("first", a, {});
  if (auto v = first_item(s)) return *v;
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interpreter&, const Value& s, CallArgs& a) {
  bind_args("last", a, {});
  if (s.is_iterator() && !s.is_view()) runtime_error("'" + s.type_name() + "' object is not reversible");
  const std::vector<Value> items = iterate(s);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

// Python's float(str): surrounding whitespace, underscores between digits, inf/nan.
std::optional<double> parse_py_float(const std::string& text) {
  std::string t = pystr::strip(text, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_' && i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(t[i + 1]))) {
      continue;
    }
    clean.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(t[i]))));
  }
  size_t start = (!clean.empty() && (clean[0] == '+' || clean[0] == '-')) ? 1 : 0;
  const std::string body = clean.substr(start);
  const double sign = (start && clean[0] == '-') ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") return sign * HUGE_VAL;
  if (body == "nan") return std::nan("");
  if (body.empty() || body[0] == '+' || body[0] == '-') return std::nullopt;
  double v = 0;
  const auto r = std::from_chars(body.data(), body.data() + body.size(), v);
  if (r.ptr != body.data() + body.size()) return std::nullopt;
  if (r.ec == std::errc::result_out_of_range) {
    v = body.find("e-") != std::string::npos ? 0.0 : HUGE_VAL;  // underflow or overflow
  } else if (r.ec != std::errc()) {
    return std::nullopt;
  }
  return sign * v;
}

Value f_float(Interpreter&, const Value& s, CallArgs& a) {
  const auto v = bind_args("float", a, {{"default", Value(0.0)}});
  if (s.is_undefined()) runtime_error(s.undefined_hint());  // float(Undefined) raises, it is no TypeError
  if (s.is_number()) return Value(s.as_double());
  if (s.is_string()) {
    if (auto d = parse_py_float(s.str())) return Value(*d);
  }
  return v[0];
}

Value f_format(Interpreter& in, const Value& s, CallArgs& a) {
  if (!a.kw.empty()) unsupported("the format filter with keyword arguments is not supported");
  return keep_kind(in, s, percent_format(to_str(s), a.pos, s.is_markup()));  // always `fmt % (args,)`
}

Value f_indent(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("indent", a, {{"width", Value(int64_t{4})}, {"first", Value(false)}, {"blank", Value(false)}});
  // Jinja starts with `s += "\n"`, which only a string survives.
  if (s.is_undefined()) runtime_error(s.undefined_hint());
  if (!s.is_string()) runtime_error("unsupported operand type(s) for +=: '" + s.type_name() + "' and 'str'");
  std::string indent;
  if (v[0].is_string()) {
    indent = v[0].str();
  } else {
    const int64_t w = to_int_arg(v[0], "indent() width");
    indent.assign(static_cast<size_t>(std::clamp<int64_t>(w, 0, 1 << 16)), ' ');
  }
  // Jinja appends a newline so that splitlines keeps a trailing empty line.
  const std::vector<std::string> lines = pystr::splitlines(to_str(s) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (v[2].truthy() || !lines[i].empty()) out += indent;
    }
    out += lines[i];
    in.budget().check_size(out.size());
  }
  if (v[1].truthy()) out.insert(0, indent);
  return keep_kind(in, s, std::move(out));
}

std::optional<int64_t> parse_py_int(const std::string& text, int64_t base) {
  std::string t = pystr::strip(text, std::nullopt, true, true);
  bool neg = false;
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  if (i + 1 < t.size() && t[i] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(t[i + 1])));
    if ((p == 'x' && base == 16) || (p == 'o' && base == 8) || (p == 'b' && base == 2)) i += 2;
  }
  std::string digits;
  for (; i < t.size(); ++i) {
    if (t[i] == '_' && !digits.empty() && i + 1 < t.size() && t[i + 1] != '_') continue;
    digits.push_back(t[i]);
  }
  if (digits.empty() || base < 2 || base > 36) return std::nullopt;
  int64_t v = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v, static_cast<int>(base));
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return std::nullopt;
  return neg ? -v : v;
}

Value f_int(Interpreter&, const Value& s, CallArgs& a) {
  const auto v = bind_args("int", a, {{"default", Value(int64_t{0})}, {"base", Value(int64_t{10})}});
  if (s.is_undefined()) runtime_error(s.undefined_hint());  // int(Undefined) raises, it is no TypeError
  if (s.is_integral()) return Value(s.as_int());
  // Python: int(nan) is a ValueError (the default); int(inf) and huge values
  // give an OverflowError or a big int, which we cannot hold: an error.
  auto from_double = [&](double d) {
    if (std::isnan(d)) return v[0];
    if (!(d > -9.2e18 && d < 9.2e18)) runtime_error("int(): " + float_repr(d) + " does not fit in 64 bits");
    return Value(static_cast<int64_t>(d));
  };
  if (s.is_float()) return from_double(s.as_double());
  if (s.is_string()) {
    if (auto i = parse_py_int(s.str(), to_int_arg(v[1], "int() base"))) return Value(*i);
    if (auto d = parse_py_float(s.str())) return from_double(*d);
  }
  return v[0];
}

Value items_now(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("items", a, {});
  if (s.is_undefined()) return Value::iterator({}, Value::IterKind::Generator);
  if (!s.is_dict()) runtime_error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, v] : s.dict().items) out.push_back(Value::tuple({k, v}));
  return generator(in, std::move(out));
}

Value f_items(Interpreter& in, const Value& s, CallArgs& a) {
  return lazily([&] { return items_now(in, s, a); });
}

Value f_join(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("join", a, {{"d", Value("")}, {"attribute", Value::none()}});
  const std::string sep = to_str(v[0]);
  std::string out;
  bool first = true;
  for (const Value& item : iterate(s)) {
    if (!first) out += sep;
    out += to_str(v[1].is_none() ? item : get_path(item, v[1]));
    first = false;
    in.budget().check_size(out.size());
  }
  return str_value(in, std::move(out));
}

Value f_length(Interpreter&, const Value& s, CallArgs& a) {
  bind_args("length", a, {});
  return Value(length(s));
}

Value f_list(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("list", a, {});
  return list_value(in, iterate(s));
}

Value f_lower(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("lower", a, {});
  return keep_kind(in, s, pystr::lower(to_str(s)));
}

Value f_upper(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("upper", a, {});
  return keep_kind(in, s, pystr::upper(to_str(s)));
}

Value map_now(Interpreter& in, const Value& s, CallArgs& a) {
  if (!s.truthy()) return generator(in, {});  // Jinja guards with `if value:` (so none | map is empty)
  std::vector<Value> out;
  const std::vector<Value> items = iterate(s);
  if (a.pos.empty()) {
    const auto v = bind_args("map", a, {{"attribute", Value(), true}, {"default", Value()}});
    for (const Value& item : items) {
      Value x = get_path(item, v[0]);
      out.push_back(x.is_undefined() && !v[1].is_undefined() ? v[1] : std::move(x));
    }
    return generator(in, std::move(out));
  }
  if (!a.pos[0].is_string()) runtime_error("map(): the filter name must be a string");
  const std::string name = a.pos[0].str();
  const FilterFn f = find_filter(name);
  if (!f) unsupported("map(): unknown or unsupported filter '" + name + "'");
  for (const Value& item : items) {
    CallArgs rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    out.push_back(f(in, item, rest));
  }
  return generator(in, std::move(out));
}

Value f_map(Interpreter& in, const Value& s, CallArgs& a) {
  return lazily([&] { return map_now(in, s, a); });
}

Value min_max(Interpreter&, const Value& s, CallArgs& a, bool want_max) {
  const auto v = bind_args(want_max ? "max" : "min", a, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  const std::vector<Value> items = iterate(s);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value ki = sort_key(items[i], v[1], v[0].truthy());
    const Value kb = sort_key(items[best], v[1], v[0].truthy());
    if (want_max ? less_than(kb, ki) : less_than(ki, kb)) best = i;
  }
  return items[best];
}
Value f_max(Interpreter& in, const Value& s, CallArgs& a) { return min_max(in, s, a, true); }
Value f_min(Interpreter& in, const Value& s, CallArgs& a) { return min_max(in, s, a, false); }

Value f_replace(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("replace", a, {{"old", Value(), true}, {"new", Value(), true}, {"count", Value::none()}});
  const int64_t count = v[2].is_none() ? -1 : to_int_arg(v[2], "replace() count");
  const std::string subject = to_str(s), old = to_str(v[0]), repl = to_str(v[1]);
  // Bound the result before building it: every match may grow the string.
  if (!old.empty() && repl.size() > old.size()) {
    const uint64_t matches = static_cast<uint64_t>(pystr::count(subject, old));
    in.budget().charge_string(subject.size() + matches * (repl.size() - old.size()));
  } else if (old.empty()) {
    in.budget().charge_string(subject.size() + (pystr::length(subject) + 1) * repl.size());
  }
  return str_value(in, pystr::replace(subject, old, repl, count));
}

// Jinja: value[::-1] for strings, else reversed(value), else list(value) reversed.
Value f_reverse(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("reverse", a, {});
  if (s.is_string()) {
    std::u32string u = pystr::to_u32(s.str());
    std::reverse(u.begin(), u.end());
    return keep_kind(in, s, pystr::from_u32(u));
  }
  const bool reversible = !(s.is_iterator() && !s.is_view());
  std::vector<Value> items = iterate(s);
  std::reverse(items.begin(), items.end());
  in.budget().charge(items.size());
  if (!reversible) return Value::list(std::move(items));
  return Value::iterator(std::move(items), Value::IterKind::ReverseIterator);
}

Value f_round(Interpreter&, const Value& s, CallArgs& a) {
  const auto v = bind_args("round", a, {{"precision", Value(int64_t{0})}, {"method", Value("common")}});
  const int64_t precision = std::clamp<int64_t>(to_int_arg(v[0], "round() precision"), -308, 308);
  const std::string method = to_str(v[1]);
  if (method != "common" && method != "ceil" && method != "floor") {
    runtime_error("round(): method must be 'common', 'ceil' or 'floor'");
  }
  if (!s.is_number()) runtime_error("round(): a number is required, not " + s.type_name());
  if (method == "common") {
    if (s.is_integral() && precision >= 0) return Value(s.as_int());
    // Python rounds the exact binary value, half to even: printf does the same.
    if (precision >= 0) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(precision, 340)), s.as_double());
      double r = 0;
      std::from_chars(buf, buf + std::strlen(buf), r);
      return Value(r);
    }
    const double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value(std::nearbyint(s.as_double() / scale) * scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = s.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interpreter&, const Value& s, CallArgs& a) {
  bind_args("safe", a, {});
  return Value::markup(to_str(s));
}

Value select_common(Interpreter& in, const Value& s, CallArgs& a, bool by_attr, bool keep_if) {
  if (!s.truthy()) return generator(in, {});  // Jinja guards with `if value:` (so none | select is empty)
  const std::vector<Value> items = iterate(s);
  size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (a.pos.empty()) runtime_error("selectattr/rejectattr need an attribute name");
    attribute = a.pos[next++];
  }
  TestFn test = nullptr;
  if (next < a.pos.size()) {
    if (!a.pos[next].is_string()) runtime_error("the test name must be a string");
    test = find_test(a.pos[next].str());
    if (!test) unsupported("unknown or unsupported test '" + a.pos[next].str() + "'");
    ++next;
  }
  CallArgs test_args;
  test_args.pos.assign(a.pos.begin() + static_cast<ptrdiff_t>(next), a.pos.end());
  test_args.kw = a.kw;
  std::vector<Value> out;
  for (const Value& item : items) {
    const Value subject = by_attr ? get_path(item, attribute) : item;
    CallArgs call = test_args;
    const bool pass = test ? test(in, subject, call) : subject.truthy();
    if (pass == keep_if) out.push_back(item);
  }
  return generator(in, std::move(out));
}
Value f_select(Interpreter& in, const Value& s, CallArgs& a) {
  return lazily([&] { return select_common(in, s, a, false, true); });
}
Value f_reject(Interpreter& in, const Value& s, CallArgs& a) {
  return lazily([&] { return select_common(in, s, a, false, false); });
}
Value f_selectattr(Interpreter& in, const Value& s, CallArgs& a) {
  return lazily([&] { return select_common(in, s, a, true, true); });
}
Value f_rejectattr(Interpreter& in, const Value& s, CallArgs& a) {
  return lazily([&] { return select_common(in, s, a, true, false); });
}

// Jinja's make_multi_attrgetter: "a,b.c" gives the key [item.a, item.b.c]. Keys
// compare as lists, so equal (even undefined) parts never reach `<`.
Value multi_sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  if (!attribute.is_string()) return Value::list({sort_key(item, attribute, case_sensitive)});
  std::vector<Value> parts;
  for (const std::string& part : pystr::split(attribute.str(), std::string(","), -1)) {
    parts.push_back(sort_key(item, Value(part), case_sensitive));
  }
  return Value::list(std::move(parts));
}

Value f_sort(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("sort", a, {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  std::vector<Value> items = iterate(s);
  const bool rev = v[0].truthy(), cs = v[1].truthy();
  stable_sort_values(items, [&](const Value& x, const Value& y) {
    const Value kx = v[2].is_none() ? sort_key(x, v[2], cs) : multi_sort_key(x, v[2], cs);
    const Value ky = v[2].is_none() ? sort_key(y, v[2], cs) : multi_sort_key(y, v[2], cs);
    return rev ? less_than(ky, kx) : less_than(kx, ky);
  });
  return list_value(in, std::move(items));
}

Value f_string(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("string", a, {});
  if (s.is_string()) return s;  // soft_str keeps Markup
  return str_value(in, to_str(s));
}

Value f_sum(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("sum", a, {{"attribute", Value::none()}, {"start", Value(int64_t{0})}});
  Value total = v[1];
  for (const Value& item : iterate(s)) {
    total = binary_op(BinOp::Add, total, v[0].is_none() ? item : get_path(item, v[0]), in.budget());
  }
  return total;
}

// Jinja's title filter: words start after runs of whitespace, '-', '(', '{', '[' or '<'.
Value f_title(Interpreter& in, const Value& s, CallArgs& a) {
  bind_args("title", a, {});
  const std::u32string u = pystr::to_u32(to_str(s));
  auto is_sep = [](char32_t c) { return pystr::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  std::string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    const bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    const std::string piece = pystr::from_u32(std::u32string_view(u).substr(i, j - i));
    const size_t first_len = pystr::decode(piece, 0).len;
    out += pystr::upper(piece.substr(0, first_len)) + pystr::lower(piece.substr(first_len));
    i = j;
  }
  return str_value(in, std::move(out));
}

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("tojson", a, {{"ensure_ascii", Value(false)}, {"indent", Value::none()},
                                         {"separators", Value::none()}, {"sort_keys", Value(false)}});
  JsonFormat f;
  f.ensure_ascii = v[0].truthy();
  f.sort_keys = v[3].truthy();
  if (v[1].is_string()) {
    f.indent = v[1].str();
  } else if (!v[1].is_none()) {
    const int64_t n = to_int_arg(v[1], "tojson() indent");
    f.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1 << 10)), ' ');
  }
  if (f.indent) f.item_separator = ",";
  if (!v[2].is_none()) {
    if (!v[2].is_sequence() || v[2].items().size() != 2 || !v[2].items()[0].is_string() ||
        !v[2].items()[1].is_string()) {
      runtime_error("tojson(): separators must be a pair of strings");
    }
    f.item_separator = v[2].items()[0].str();
    f.key_separator = v[2].items()[1].str();
  }
  return str_value(in, to_json(s, f));
}

Value f_trim(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("trim", a, {{"chars", Value::none()}});
  std::optional<std::string> chars;
  if (!v[0].is_none()) chars = to_str(v[0]);
  return keep_kind(in, s, pystr::strip(to_str(s), chars, true, true));
}

Value unique_now(Interpreter& in, const Value& s, CallArgs& a) {
  const auto v = bind_args("unique", a, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  std::vector<Value> out, seen;
  for (const Value& item : iterate(s)) {
    const Value key = sort_key(item, v[1], v[0].truthy());
    if (key.is_list() || key.is_dict()) runtime_error("unhashable type: '" + key.type_name() + "'");
    bool dup = false;
    for (const Value& k : seen) {
      if (equals(k, key)) {
        dup = true;
        break;
      }
    }
    in.budget().charge(seen.size());
    if (!dup) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return generator(in, std::move(out));
}

Value f_unique(Interpreter& in, const Value& s, CallArgs& a) {
  return lazily([&] { return unique_now(in, s, a); });
}

Value f_wordcount(Interpreter&, const Value& s, CallArgs& a) {
  bind_args("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : pystr::to_u32(to_str(s))) {
    std::string ch;
    pystr::append_utf8(ch, c);
    const bool word = c == '_' || pystr::all_of_class(ch, 2);
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value(n);
}

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};
constexpr NamedFilter kFilters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort},
    {"e", f_escape}, {"escape", f_escape}, {"first", f_first}, {"float", f_float}, {"format", f_format},
    {"indent", f_indent}, {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last},
    {"length", f_length}, {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max},
    {"min", f_min}, {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum},
    {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim}, {"unique", f_unique}, {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& f : kFilters) {
    if (f.name == name) return f.fn;
  }
  return nullptr;
}

}  // namespace tokamak::jinja
