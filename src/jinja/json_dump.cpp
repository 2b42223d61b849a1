#include "jinja/json_dump.h"

#include <algorithm>
#include <cmath>

#include "jinja/error.h"
#include "jinja/pystr.h"

namespace tokamak::jinja {

namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_u_escape(std::string& out, uint32_t unit) {
  out += "\\u";
  for (int k = 3; k >= 0; --k) out.push_back(kHex[(unit >> (4 * k)) & 15]);
}

void append_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const pystr::Decoded d = pystr::decode(s, i);
    const char32_t cp = d.cp;
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20) {
          append_u_escape(out, cp);
        } else if (cp < 0x80 || !ensure_ascii) {
          out.append(s.substr(i, d.len));
        } else if (cp < 0x10000) {
          append_u_escape(out, cp);
        } else {
          const uint32_t v = cp - 0x10000;
          append_u_escape(out, 0xD800 + (v >> 10));
          append_u_escape(out, 0xDC00 + (v & 0x3FF));
        }
    }
    i += d.len;
  }
  out.push_back('"');
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

// json.dumps turns non-string keys into strings.
std::string key_string(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::String: return k.str();
    case Value::Kind::Int: return std::to_string(k.as_int());
    case Value::Kind::Float: return float_json(k.as_double());
    case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
    case Value::Kind::None: return "null";
    default: runtime_error("tojson: keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

class Writer {
 public:
  Writer(const JsonFormat& f, std::string& out) : f_(f), out_(out) {}

  void write(const Value& v, int level) {
    if (level > static_cast<int>(kMaxDepth) + 8) limit_error("tojson: value nested too deeply (or containing itself)");
    switch (v.kind()) {
      case Value::Kind::None: out_ += "null"; return;
      case Value::Kind::Bool: out_ += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out_ += std::to_string(v.as_int()); return;
      case Value::Kind::Float: out_ += float_json(v.as_double()); return;
      case Value::Kind::String: append_string(out_, v.str(), f_.ensure_ascii); return;
      case Value::Kind::List: case Value::Kind::Tuple: write_list(v.items(), level); return;
      case Value::Kind::Dict: write_dict(v.dict(), level); return;
      default: runtime_error("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }

 private:
  void newline(int level) {
    if (!f_.indent) return;
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *f_.indent;
  }

  void write_list(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += f_.item_separator;
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out_.push_back(']');
  }

  void write_dict(const DictData& d, int level) {
    if (d.items.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    entries.reserve(d.items.size());
    for (const auto& [k, v] : d.items) entries.emplace_back(key_string(k), &v);
    if (f_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out_.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out_ += f_.item_separator;
      newline(level + 1);
      append_string(out_, entries[i].first, f_.ensure_ascii);
      out_ += f_.key_separator;
      write(*entries[i].second, level + 1);
    }
    newline(level);
    out_.push_back('}');
  }

  const JsonFormat& f_;
  std::string& out_;
};

}  // namespace

std::string to_json(const Value& v, const JsonFormat& format) {
  std::string out;
  Writer(format, out).write(v, 0);
  return out;
}

}  // namespace tokamak::jinja
