#include "jinja/scoping.h"

#include <map>
#include <set>
#include <string>

namespace tokamak::jinja {

namespace {

// How a frame-local symbol gets its initial value (Jinja's VAR_LOAD_*).
enum class Load : uint8_t { Resolve, Alias, Undefined, Parameter };

// Jinja's idtracking.Symbols, reduced to what decides the initial values.
struct Symbols {
  const Symbols* parent = nullptr;
  std::map<std::string, Load> refs;
  std::set<std::string> stores;

  bool known(const std::string& name) const {
    for (const Symbols* s = this; s != nullptr; s = s->parent) {
      if (s->refs.count(name)) return true;
    }
    return false;
  }
  void load(const std::string& name) {
    if (!known(name)) refs[name] = Load::Resolve;
  }
  void store(const std::string& name) {
    stores.insert(name);
    if (!refs.count(name)) refs[name] = (parent && parent->known(name)) ? Load::Alias : Load::Undefined;
  }
  void parameter(const std::string& name) {
    stores.insert(name);
    refs[name] = Load::Parameter;
  }
  // After an if: what any branch stored may not have run, so it starts from the outer value.
  void branch_update(const std::vector<Symbols>& branches) {
    std::set<std::string> branch_stores;
    for (const Symbols& b : branches) branch_stores.insert(b.stores.begin(), b.stores.end());
    for (const std::string& n : stores) branch_stores.erase(n);
    for (const Symbols& b : branches) {
      for (const auto& [k, v] : b.refs) refs[k] = v;
      stores.insert(b.stores.begin(), b.stores.end());
    }
    for (const std::string& n : branch_stores) refs[n] = (parent && parent->known(n)) ? Load::Alias : Load::Resolve;
  }
  std::vector<std::string> unbound() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : refs) {
      if (v == Load::Undefined) out.push_back(k);
    }
    return out;
  }
};

void visit_expr(const Expr* e, Symbols& s) {
  if (e == nullptr) return;
  if (e->kind == ExprKind::Name) s.load(e->name);
  for (const auto& a : e->args) visit_expr(a.get(), s);
  for (const auto& [k, v] : e->kwargs) visit_expr(v.get(), s);
}

void visit_body(const Body& body, Symbols& s);

// An if with its elif/else chain starting at branch i (Jinja nests elifs inside the first if's "elif" branch).
void visit_if(const Stmt& st, size_t i, Symbols& s) {
  visit_expr(st.branches[i].first.get(), s);
  Symbols body = s, elifs = s, otherwise = s;
  visit_body(st.branches[i].second, body);
  if (i == 0) {
    for (size_t k = 1; k < st.branches.size(); ++k) visit_if(st, k, elifs);
    visit_body(st.else_body, otherwise);
  }
  s.branch_update({body, elifs, otherwise});
}

// One statement at the frame's own level (child frames are analyzed afterwards).
void visit_stmt(const Stmt& st, Symbols& s) {
  switch (st.kind) {
    case StmtKind::Output: visit_expr(st.expr.get(), s); break;
    case StmtKind::If: visit_if(st, 0, s); break;
    case StmtKind::For: visit_expr(st.expr.get(), s); break;
    case StmtKind::Set:
      visit_expr(st.expr.get(), s);
      for (const std::string& t : st.targets) s.store(t);
      break;
    case StmtKind::SetAttr:
      visit_expr(st.expr.get(), s);
      s.load(st.targets[0]);
      break;
    case StmtKind::SetBlock: case StmtKind::Macro: s.store(st.targets[0]); break;
    case StmtKind::FilterBlock: visit_expr(st.filter.get(), s); break;
    case StmtKind::With:
      for (const auto& [name, value] : st.assignments) visit_expr(value.get(), s);
      break;
    default: break;
  }
}

void visit_body(const Body& body, Symbols& s) {
  for (const StmtPtr& st : body) visit_stmt(*st, s);
}

void analyze_children(const Body& body, const Symbols& frame);

// Analyzes one child frame whose parent frame's symbols are complete.
std::vector<std::string> analyze_frame(const Body& body, const Symbols& parent,
                                       const std::vector<std::string>& parameters,
                                       const std::vector<const Expr*>& parameter_defaults = {}) {
  Symbols s;
  s.parent = &parent;
  for (const std::string& p : parameters) s.parameter(p);
  for (const Expr* d : parameter_defaults) visit_expr(d, s);
  visit_body(body, s);
  analyze_children(body, s);
  return s.unbound();
}

void analyze_children(const Body& body, const Symbols& frame) {
  for (const StmtPtr& p : body) {
    Stmt& st = *p;
    switch (st.kind) {
      case StmtKind::If:
        for (const auto& [cond, branch] : st.branches) analyze_children(branch, frame);
        analyze_children(st.else_body, frame);
        break;
      case StmtKind::For: {
        std::vector<std::string> params = st.targets;
        params.push_back("loop");
        st.unbound_in_body = analyze_frame(st.body, frame, params);
        st.unbound_in_else = analyze_frame(st.else_body, frame, {});
        break;
      }
      case StmtKind::Macro: {
        std::vector<std::string> params;
        std::vector<const Expr*> defaults;
        for (const MacroParam& mp : st.params) {
          params.push_back(mp.name);
          defaults.push_back(mp.default_value.get());
        }
        st.unbound_in_body = analyze_frame(st.body, frame, params, defaults);
        break;
      }
      case StmtKind::With: {
        std::vector<std::string> params;
        for (const auto& [name, value] : st.assignments) params.push_back(name);
        st.unbound_in_body = analyze_frame(st.body, frame, params);
        break;
      }
      case StmtKind::SetBlock: case StmtKind::FilterBlock: case StmtKind::Scope:
        st.unbound_in_body = analyze_frame(st.body, frame, {});
        break;
      default: break;
    }
  }
}

}  // namespace

void mark_unbound_locals(Program& program) {
  Symbols root;
  visit_body(program.body, root);
  analyze_children(program.body, root);
  program.unbound_in_root = root.unbound();
}

}  // namespace tokamak::jinja
