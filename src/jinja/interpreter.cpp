#include "jinja/interpreter.h"

#include "jinja/builtins.h"

namespace tokamak::jinja {

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    for (const auto& [k, v] : s->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  for (auto& [k, x] : vars) {
    if (k == name) {
      x = std::move(v);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(v));
}

namespace {

// A frame's scope, with the names that start unbound in it (scoping.h).
ScopePtr child_of(const ScopePtr& parent, const std::vector<std::string>& unbound = {}) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  for (const std::string& name : unbound) s->vars.emplace_back(name, Value::undefined("'" + name + "' is undefined"));
  return s;
}

Value loop_cycle(Interpreter&, const Value& self, CallArgs& args) {
  if (args.pos.empty()) runtime_error("loop.cycle(): no items for cycling given");
  return args.pos[static_cast<size_t>(self.as_int()) % args.pos.size()];
}

// The `loop` variable of iteration i over items (Jinja's LoopContext, non-recursive).
Value make_loop(const std::vector<Value>& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  DictData d;
  d.items.reserve(12);
  auto add = [&](const char* key, Value v) {
    d.depth = std::max(d.depth, 1 + v.depth());
    d.items.emplace_back(Value(key), std::move(v));
  };
  add("index", Value(k + 1));
  add("index0", Value(k));
  add("revindex", Value(n - k));
  add("revindex0", Value(n - k - 1));
  add("first", Value(k == 0));
  add("last", Value(k == n - 1));
  add("length", Value(n));
  add("depth", Value(int64_t{1}));
  add("depth0", Value(int64_t{0}));
  if (k > 0) add("previtem", items[i - 1]);
  if (k + 1 < n) add("nextitem", items[i + 1]);
  auto cycle = std::make_shared<Function>();
  cycle->name = "cycle";
  cycle->native = loop_cycle;
  cycle->self = Value(k);
  add("cycle", Value::function(std::move(cycle)));
  return Value::dict(std::move(d));
}

}  // namespace

Interpreter::DepthGuard::DepthGuard(Interpreter& in) : in_(in) {
  if (++in_.depth_ > in_.budget_.limits().max_depth) {
    --in_.depth_;
    limit_error("evaluation nested deeper than " + std::to_string(in_.budget_.limits().max_depth) +
                " frames (runaway macro recursion?)");
  }
}

Interpreter::Interpreter(const Program& program, std::tm now, const RenderLimits& limits)
    : program_(program), now_(now), budget_(limits) {}

Interpreter::~Interpreter() {
  // Namespaces are the only mutable values, so the only way to build a reference
  // cycle (`{% set ns.self = ns %}`). Emptying them breaks every cycle; the
  // registry keeps each alive meanwhile, so no destructor chain runs deep.
  for (const auto& ns : namespaces_) ns->items.clear();
}

std::string Interpreter::render(const ScopePtr& globals) {
  ScopePtr root = child_of(globals, program_.unbound_in_root);
  std::string out;
  exec_body(program_.body, root, out);
  return out;
}

Value Interpreter::make_namespace(DictData attrs) {
  budget_.charge(1 + attrs.items.size());
  Value v = Value::make_namespace(std::move(attrs));
  namespaces_.push_back(v.ns_ptr());
  return v;
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Interpreter::render_child(const Stmt& s, const ScopePtr& scope) {
  std::string buf;
  exec_body(s.body, child_of(scope, s.unbound_in_body), buf);
  return buf;
}

void Interpreter::assign(const Stmt& s, const Value& v, Scope& scope) {
  if (!s.unpack) {
    scope.set(s.targets[0], v);
    return;
  }
  const std::vector<Value> parts = iterate(v);
  if (parts.size() != s.targets.size()) {
    if (parts.size() > s.targets.size()) {
      runtime_error("too many values to unpack (expected " + std::to_string(s.targets.size()) + ")");
    }
    runtime_error("not enough values to unpack (expected " + std::to_string(s.targets.size()) + ", got " +
                  std::to_string(parts.size()) + ")");
  }
  for (size_t i = 0; i < parts.size(); ++i) scope.set(s.targets[i], parts[i]);
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  DepthGuard guard(*this);
  budget_.charge(1);
  auto append = [&](std::string_view text) {
    if (out.size() + text.size() > budget_.limits().max_string_bytes) {
      limit_error("the rendered prompt exceeds " + std::to_string(budget_.limits().max_string_bytes) + " bytes");
    }
    budget_.charge(text.size() / 16);
    out += text;
  };
  try {
    switch (s.kind) {
      case StmtKind::Text: append(s.text); return Flow::Normal;
      case StmtKind::Output: append(to_str(eval(*s.expr, scope))); return Flow::Normal;
      case StmtKind::If:
        for (const auto& [cond, body] : s.branches) {
          if (eval(*cond, scope).truthy()) return exec_body(body, scope, out);
        }
        return exec_body(s.else_body, scope, out);
      case StmtKind::For: return exec_for(s, scope, out);
      case StmtKind::Set: assign(s, eval(*s.expr, scope), *scope); return Flow::Normal;
      case StmtKind::SetAttr: {
        const Value target = lookup(s.targets[0], *scope);
        if (!target.is_namespace()) runtime_error("cannot assign attribute on non-namespace object");
        Value v = eval(*s.expr, scope);
        target.ns().set(Value(s.attr), std::move(v));
        return Flow::Normal;
      }
      case StmtKind::SetBlock: {
        Value v(render_child(s, scope));
        if (s.filter) v = eval_filter(*s.filter, scope, &v);
        assign(s, v, *scope);
        return Flow::Normal;
      }
      case StmtKind::Macro: scope->set(s.targets[0], define_macro(s, scope)); return Flow::Normal;
      case StmtKind::FilterBlock: {
        const Value body(render_child(s, scope));
        append(to_str(eval_filter(*s.filter, scope, &body)));
        return Flow::Normal;
      }
      case StmtKind::With: {
        ScopePtr inner = child_of(scope, s.unbound_in_body);
        for (const auto& [name, expr] : s.assignments) inner->set(name, eval(*expr, scope));
        return exec_body(s.body, inner, out);
      }
      case StmtKind::Scope: return exec_body(s.body, child_of(scope, s.unbound_in_body), out);
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
    }
  } catch (const TemplateError& e) {
    if (!e.has_pos()) throw e.at(s.pos);
    throw;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr, scope));
  budget_.charge(items.size());
  if (s.cond) {
    std::vector<Value> kept;
    for (Value& item : items) {
      ScopePtr probe = child_of(scope);
      assign(s, item, *probe);
      if (eval(*s.cond, probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  // Jinja runs the else block unless some iteration reached the end of its body:
  // iterations that all end in break or continue count as none.
  bool completed_an_iteration = false;
  for (size_t i = 0; i < items.size(); ++i) {
    budget_.charge(4);  // a scope and the loop object: a dozen allocations
    ScopePtr iteration = child_of(scope, s.unbound_in_body);
    assign(s, items[i], *iteration);
    iteration->set("loop", make_loop(items, i));
    const Flow f = exec_body(s.body, iteration, out);
    if (f == Flow::Break) break;
    completed_an_iteration = completed_an_iteration || f == Flow::Normal;
  }
  if (!completed_an_iteration) return exec_body(s.else_body, child_of(scope, s.unbound_in_else), out);
  return Flow::Normal;
}

// ---- expressions ----

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  DepthGuard guard(*this);
  budget_.charge(1);
  try {
    return eval_inner(e, scope);
  } catch (const TemplateError& err) {
    if (!err.has_pos()) throw err.at(e.pos);
    throw;
  }
}

Value Interpreter::lookup(const std::string& name, const Scope& scope) {
  if (const Value* v = scope.find(name)) return *v;
  if (NativeFn fn = find_global(name)) {
    auto f = std::make_shared<Function>();
    f->name = name;
    f->native = fn;
    return Value::function(std::move(f));
  }
  return Value::undefined("'" + name + "' is undefined");
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
  CallArgs a;
  for (size_t i = first; i < e.args.size(); ++i) a.pos.push_back(eval(*e.args[i], scope));
  for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v, scope));
  return a;
}

Value Interpreter::eval_inner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::Const: return e.value;
    case ExprKind::Name: return lookup(e.name, *scope);
    case ExprKind::List: case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return e.kind == ExprKind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::Dict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value key = eval(*e.args[i], scope);
        if (key.is_list() || key.is_dict() || key.is_namespace() || key.is_undefined()) {
          runtime_error("unhashable dict key of type '" + key.type_name() + "'");
        }
        d.set(std::move(key), eval(*e.args[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::GetAttr: return get_attr(eval(*e.args[0], scope), e.name);
    case ExprKind::GetItem: {
      const Value obj = eval(*e.args[0], scope);
      const Expr& index = *e.args[1];
      if (index.kind != ExprKind::Slice) return get_item(obj, eval(index, scope));
      Value bounds[3] = {Value::none(), Value::none(), Value::none()};
      for (size_t i = 0; i < 3; ++i) {
        if (index.args[i]) bounds[i] = eval(*index.args[i], scope);
      }
      return get_slice(obj, bounds[0], bounds[1], bounds[2]);
    }
    case ExprKind::Slice: unsupported("a slice outside of a subscript");
    case ExprKind::Call: return eval_call(e, scope);
    case ExprKind::Filter: return eval_filter(e, scope, nullptr);
    case ExprKind::Test: {
      const Value subject = eval(*e.args[0], scope);
      CallArgs args = eval_args(e, 1, scope);
      return Value(find_test(e.name)(*this, subject, args));
    }
    case ExprKind::Neg: return negate(eval(*e.args[0], scope));
    case ExprKind::Pos: return unary_plus(eval(*e.args[0], scope));
    case ExprKind::Not: return Value(!eval(*e.args[0], scope).truthy());
    case ExprKind::Binary: {
      const Value a = eval(*e.args[0], scope);
      const Value b = eval(*e.args[1], scope);
      return binary_op(e.bin_op, a, b, budget_);
    }
    case ExprKind::Compare: {
      Value left = eval(*e.args[0], scope);
      for (size_t i = 0; i < e.cmp_ops.size(); ++i) {
        Value right = eval(*e.args[i + 1], scope);
        if (!compare(e.cmp_ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::And: {
      Value left = eval(*e.args[0], scope);
      return left.truthy() ? eval(*e.args[1], scope) : left;
    }
    case ExprKind::Or: {
      Value left = eval(*e.args[0], scope);
      return left.truthy() ? left : eval(*e.args[1], scope);
    }
    case ExprKind::Cond: {
      if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the inline if-expression evaluated to false and has no else section");
    }
    case ExprKind::Concat: {
      std::vector<Value> parts;
      size_t total = 0;
      for (const auto& a : e.args) {
        Value v = eval(*a, scope);
        if (!v.is_string()) v = Value(to_str(v));
        total += v.str().size();
        parts.push_back(std::move(v));
      }
      budget_.charge_string(total);  // before building it
      std::string s;
      s.reserve(total);
      for (const Value& p : parts) s += p.str();
      return Value(std::move(s));
    }
  }
  runtime_error("unknown expression");
}

Value Interpreter::eval_call(const Expr& e, const ScopePtr& scope) {
  const Expr& callee = *e.args[0];
  if (callee.kind == ExprKind::GetAttr) {
    const Value obj = eval(*callee.args[0], scope);
    if (obj.is_undefined()) runtime_error(obj.undefined_hint());
    if (has_method(obj, callee.name)) {
      CallArgs args = eval_args(e, 1, scope);
      return call_method(*this, obj, callee.name, args);
    }
    const Value fn = get_attr(obj, callee.name);
    CallArgs args = eval_args(e, 1, scope);
    return call(fn, args);
  }
  const Value fn = eval(callee, scope);
  CallArgs args = eval_args(e, 1, scope);
  return call(fn, args);
}

Value Interpreter::eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_input) {
  Value subject;
  if (!e.args[0]) {
    if (block_input) subject = *block_input;
  } else if (block_input && e.args[0]->kind == ExprKind::Filter) {
    subject = eval_filter(*e.args[0], scope, block_input);
  } else {
    subject = eval(*e.args[0], scope);
  }
  CallArgs args = eval_args(e, 1, scope);
  return find_filter(e.name)(*this, subject, args);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) runtime_error(callee.undefined_hint());
  if (!callee.is_function()) runtime_error("'" + callee.type_name() + "' object is not callable");
  const Function& f = callee.fn();
  if (f.macro) return call_macro(f, args);
  if (f.native) return f.native(*this, f.self, args);
  return call_method(*this, f.self, f.name, args);
}

Value Interpreter::define_macro(const Stmt& s, const ScopePtr& scope) {
  auto f = std::make_shared<Function>();
  f->name = s.targets[0];
  f->macro = &s;
  f->closure = scope;
  return Value::function(std::move(f));
}

Value Interpreter::call_macro(const Function& f, CallArgs& args) {
  DepthGuard guard(*this);
  const ScopePtr closure = f.closure.lock();
  if (!closure) runtime_error("macro '" + f.name + "' was called after the scope that defined it ended");
  const Stmt& m = *f.macro;
  const size_t n = m.params.size();
  if (args.pos.size() > n && !m.catch_varargs) {
    runtime_error("macro '" + f.name + "' takes not more than " + std::to_string(n) + " argument(s)");
  }
  ScopePtr scope = child_of(closure, m.unbound_in_body);
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < n && i < args.pos.size(); ++i) {
    scope->set(m.params[i].name, args.pos[i]);
    given[i] = true;
  }
  std::vector<Value> varargs;
  for (size_t i = n; i < args.pos.size(); ++i) varargs.push_back(args.pos[i]);
  DictData kwargs;
  for (auto& [k, v] : args.kw) {
    size_t j = 0;
    while (j < n && m.params[j].name != k) ++j;
    if (j < n) {
      if (given[j]) runtime_error("macro '" + f.name + "' got multiple values for argument '" + k + "'");
      scope->set(k, v);
      given[j] = true;
    } else if (m.catch_kwargs) {
      kwargs.set(Value(k), v);
    } else {
      runtime_error("macro '" + f.name + "' takes no keyword argument '" + k + "'");
    }
  }
  for (size_t j = 0; j < n; ++j) {
    if (given[j]) continue;
    const MacroParam& p = m.params[j];
    scope->set(p.name, p.default_value ? eval(*p.default_value, scope)
                                       : Value::undefined("parameter '" + p.name + "' was not provided"));
  }
  scope->set("varargs", Value::tuple(std::move(varargs)));
  scope->set("kwargs", Value::dict(std::move(kwargs)));
  std::string out;
  exec_body(m.body, scope, out);
  return Value(std::move(out));
}

}  // namespace tokamak::jinja
