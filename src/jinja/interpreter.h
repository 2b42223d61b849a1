// Tree-walking evaluation of a parsed template.
//
// Scoping follows Jinja: the template's top level is one scope (a `set` there
// is visible for the rest of the template, including inside `if`); each loop
// iteration, macro call, `with`, block `set` and `filter` body gets a child
// scope whose `set`s vanish at its end (hence `namespace()` for loop state).
// A macro sees the scope it was defined in, live, not the caller's.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/ops.h"
#include "jinja/parser.h"
#include "jinja/value.h"

namespace tokamak::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const;  // this scope, then its parents
  void set(std::string_view name, Value v);        // in this scope
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter(const Program& program, std::tm now, const RenderLimits& limits);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders the whole template with `globals` as the outermost scope.
  std::string render(const ScopePtr& globals);

  // For builtins.
  Value call(const Value& callee, CallArgs& args);
  Value make_namespace(DictData attrs);  // tracked, so reference cycles are cut after the render
  Budget& budget() { return budget_; }
  const std::tm& now() const { return now_; }

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  std::string render_child(const Stmt& s, const ScopePtr& scope);  // a block set's or filter block's body
  void assign(const Stmt& s, const Value& v, Scope& scope);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_call(const Expr& e, const ScopePtr& scope);
  Value eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_input);
  Value lookup(const std::string& name, const Scope& scope);
  CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope);
  Value call_macro(const Function& f, CallArgs& args);
  Value define_macro(const Stmt& s, const ScopePtr& scope);

  struct DepthGuard {
    explicit DepthGuard(Interpreter& in);
    ~DepthGuard() { --in_.depth_; }
    Interpreter& in_;
  };

  const Program& program_;
  std::tm now_;
  Budget budget_;
  int depth_ = 0;
  std::vector<std::shared_ptr<DictData>> namespaces_;
};

}  // namespace tokamak::jinja
