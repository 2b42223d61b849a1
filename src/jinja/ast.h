// The syntax tree of a parsed template. One node struct per category
// (expressions, statements) with a kind tag; each kind uses the fields its
// comment names. Trees are at most kMaxNesting deep (the parser enforces it),
// which bounds the interpreter's recursion.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/error.h"
#include "jinja/value.h"

namespace tokamak::jinja {

inline constexpr int kMaxNesting = 256;

enum class ExprKind : uint8_t {
  Const,    // value
  Name,     // name
  List,     // args = items
  Tuple,    // args = items
  Dict,     // args = key0, value0, key1, value1, ...
  GetAttr,  // args[0] . name
  GetItem,  // args[0] [ args[1] ]   (args[1] may be a Slice)
  Slice,    // args = start, stop, step (each may be null)
  Call,     // args[0] ( args[1..], kwargs )
  Filter,   // args[0] | name ( args[1..], kwargs ); args[0] null = the body of a filter block
  Test,     // args[0] is name ( args[1..], kwargs )
  Neg,      // -args[0]
  Pos,      // +args[0]
  Not,      // not args[0]
  Binary,   // args[0] bin_op args[1]
  Compare,  // args[0] cmp_ops[0] args[1] cmp_ops[1] args[2] ... (Python chained comparison)
  And,      // args[0] and args[1]
  Or,       // args[0] or args[1]
  Cond,     // args[0] if args[1] else args[2] (args[2] may be null)
  Concat,   // args[0] ~ args[1] ~ ...
};

enum class BinOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using Kwargs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  ExprKind kind = ExprKind::Const;
  SourcePos pos;
  int depth = 1;  // height of this subtree
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  Kwargs kwargs;
  BinOp bin_op = BinOp::Add;
  std::vector<CmpOp> cmp_ops;
};

enum class StmtKind : uint8_t {
  Text,         // text
  Output,       // {{ expr }}
  If,           // branches: (cond, body)...; else_body
  For,          // for targets in expr [if cond]: body; else_body
  Set,          // set targets = expr
  SetAttr,      // set targets[0].attr = expr   (namespace attribute)
  SetBlock,     // set targets[0] [| filter]: body  (captures the rendered body)
  Macro,        // macro targets[0](params): body
  FilterBlock,  // filter <filter>: body
  With,         // with assignments: body
  Break,
  Continue,
  Scope,        // a body rendered in place ({% generation %} of Hugging Face's assistant masks)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind = StmtKind::Text;
  SourcePos pos;
  std::string text;
  ExprPtr expr;
  std::vector<std::string> targets;
  bool unpack = false;  // the target was a tuple: `for k, v in ...`, `set a, b = ...`
  std::string attr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  ExprPtr filter;  // a Filter chain whose innermost args[0] is null
  std::vector<MacroParam> params;
  bool catch_varargs = false;  // Macro: the body mentions `varargs` (extra positional arguments allowed)
  bool catch_kwargs = false;   // Macro: the body mentions `kwargs` (unknown keyword arguments allowed)
  Kwargs assignments;
  // Names that start unbound (Undefined, hiding any outer or context value) in
  // the frame of `body` / `else_body`; see scoping.h.
  std::vector<std::string> unbound_in_body;
  std::vector<std::string> unbound_in_else;
};

}  // namespace tokamak::jinja
