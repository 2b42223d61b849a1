#include "jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "jinja/builtins.h"
#include "jinja/scoping.h"

namespace tokamak::jinja {

namespace {

using Names = std::initializer_list<std::string_view>;

class Parser {
 public:
  explicit Parser(Program& program) : map_(program.map), toks_(tokenize(program.map)) {}

  Body parse() { return subparse({}, "", {}); }

 private:
  // ---- token stream ----
  const Token& cur() const { return toks_[i_]; }
  const Token& look(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  SourcePos here() const { return map_.pos(cur().offset); }
  static bool is_name(const Token& t, std::string_view kw) { return t.type == TokenType::Name && t.text == kw; }
  static bool is_op(const Token& t, std::string_view op) { return t.type == TokenType::Op && t.text == op; }
  bool skip_name(std::string_view kw) {
    if (!is_name(cur(), kw)) return false;
    next();
    return true;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(cur(), op)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::Data: return "template text";
      case TokenType::VarBegin: return "'{{'";
      case TokenType::VarEnd: return "end of print statement '}}'";
      case TokenType::BlockBegin: return "'{%'";
      case TokenType::BlockEnd: return "end of statement block '%}'";
      case TokenType::Name: return "'" + t.text + "'";
      case TokenType::String: return "string literal";
      case TokenType::Int: return "integer literal";
      case TokenType::Float: return "float literal";
      case TokenType::Op: return "'" + t.text + "'";
      case TokenType::Eof: return "end of template";
    }
    return "token";
  }

  [[noreturn]] void fail(const std::string& msg) const { throw TemplateError(ErrorKind::Syntax, msg, here()); }
  [[noreturn]] void fail_unsupported(const std::string& msg) const {
    throw TemplateError(ErrorKind::Unsupported, msg, here());
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
  }
  void expect(TokenType type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail("expected a name, got " + describe(cur()));
    return next().text;
  }

  // ---- nesting guard: bounds the parser's recursion and the tree height ----
  struct Guard {
    explicit Guard(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) {
        throw TemplateError(ErrorKind::Limit, "template nested deeper than " + std::to_string(kMaxNesting) + " levels",
                            p_.here());
      }
    }
    ~Guard() { --p_.nesting_; }
    Parser& p_;
  };

  ExprPtr make(ExprKind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  // Computes the node's height once its children are attached.
  ExprPtr done(ExprPtr e) {
    int d = 0;
    for (const auto& a : e->args) {
      if (a) d = std::max(d, a->depth);
    }
    for (const auto& [k, v] : e->kwargs) d = std::max(d, v->depth);
    e->depth = d + 1;
    if (e->depth > kMaxNesting) {
      throw TemplateError(ErrorKind::Limit,
                          "expression nested deeper than " + std::to_string(kMaxNesting) + " levels", e->pos);
    }
    return e;
  }
  ExprPtr unary(ExprKind kind, SourcePos pos, ExprPtr a) {
    auto e = make(kind, pos);
    e->args.push_back(std::move(a));
    return done(std::move(e));
  }
  ExprPtr binary(ExprKind kind, SourcePos pos, ExprPtr a, ExprPtr b) {
    auto e = make(kind, pos);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return done(std::move(e));
  }

  // ---- statements ----
  Body subparse(Names end_tokens, std::string_view opener, SourcePos opener_pos) {
    Guard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->pos = here();
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        next();
        s->pos = here();
        s->expr = parse_tuple(false, true, {}, false);
        expect(TokenType::VarEnd, "end of print statement '}}'");
        body.push_back(std::move(s));
      } else if (t.type == TokenType::BlockBegin) {
        next();
        if (cur().type == TokenType::Name &&
            std::find(end_tokens.begin(), end_tokens.end(), cur().text) != end_tokens.end()) {
          return body;
        }
        body.push_back(parse_statement(end_tokens));
        expect(TokenType::BlockEnd, "end of statement block '%}'");
      } else if (t.type == TokenType::Eof) {
        if (end_tokens.size() == 0) return body;
        const std::string missing(*std::prev(end_tokens.end()));
        throw TemplateError(ErrorKind::Syntax,
                            "unexpected end of template: the '" + std::string(opener) + "' opened at line " +
                                std::to_string(opener_pos.line) + ", column " + std::to_string(opener_pos.column) +
                                " has no {% " + missing + " %}",
                            here());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  // After `{% kw ...`: expects the `%}`, the body, and leaves the stream at the end tag's name.
  Body statements(Names end_tokens, std::string_view opener, SourcePos opener_pos) {
    skip_op(":");
    expect(TokenType::BlockEnd, "end of statement block '%}'");
    return subparse(end_tokens, opener, opener_pos);
  }

  StmtPtr parse_statement(Names enclosing_end_tokens) {
    if (cur().type != TokenType::Name) fail("expected a tag name after '{%', got " + describe(cur()));
    const std::string kw = cur().text;
    const SourcePos pos = here();
    if (kw == "for") return parse_for(pos);
    if (kw == "if") return parse_if(pos);
    if (kw == "set") return parse_set(pos);
    if (kw == "macro") return parse_macro(pos);
    if (kw == "filter") return parse_filter_block(pos);
    if (kw == "with") return parse_with(pos);
    if (kw == "generation") return parse_scope_block(pos, "endgeneration");
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) fail("'" + kw + "' outside of a for loop");
      next();
      auto s = std::make_unique<Stmt>();
      s->kind = kw == "break" ? StmtKind::Break : StmtKind::Continue;
      s->pos = pos;
      return s;
    }
    static constexpr std::string_view kUnsupported[] = {"block", "extends", "include", "import", "from", "call",
                                                        "autoescape", "do", "trans", "pluralize", "embed", "raw"};
    if (std::find(std::begin(kUnsupported), std::end(kUnsupported), kw) != std::end(kUnsupported)) {
      fail_unsupported("the '{% " + kw + " %}' tag is not supported");
    }
    if (enclosing_end_tokens.size() != 0) {
      std::string expected;
      for (std::string_view e : enclosing_end_tokens) {
        expected += (expected.empty() ? "'" : " or '") + std::string(e) + "'";
      }
      fail("unexpected tag '" + kw + "' (expected " + expected + ")");
    }
    fail("unknown tag '" + kw + "'");
  }

  void parse_target_names(Stmt& s, Names extra_end) {
    // A simplified tuple: names separated by commas (`k, v`), possibly parenthesized-free.
    do {
      if (is_tuple_end(extra_end)) break;
      const SourcePos pos = here();
      const std::string name = expect_name();
      if (name == "true" || name == "false" || name == "True" || name == "False" || name == "none" ||
          name == "None") {
        throw TemplateError(ErrorKind::Syntax, "cannot assign to '" + name + "'", pos);
      }
      s.targets.push_back(name);
      if (!is_op(cur(), ",")) break;
      s.unpack = true;
    } while (skip_op(","));
    if (s.targets.empty()) fail("expected an assignment target, got " + describe(cur()));
  }

  StmtPtr parse_for(SourcePos pos) {
    next();
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::For;
    s->pos = pos;
    parse_target_names(*s, {"in"});
    if (!skip_name("in")) fail("expected 'in' in the for loop, got " + describe(cur()));
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name(cur(), "recursive")) fail_unsupported("recursive for loops are not supported");
    ++loop_depth_;
    s->body = statements({"endfor", "else"}, "for", pos);
    --loop_depth_;
    if (next().text == "else") {
      s->else_body = statements({"endfor"}, "for", pos);
      next();
    }
    return s;
  }

  StmtPtr parse_if(SourcePos pos) {
    next();
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::If;
    s->pos = pos;
    while (true) {
      ExprPtr cond = parse_tuple(false, false, {}, false);
      Body body = statements({"elif", "else", "endif"}, "if", pos);
      s->branches.emplace_back(std::move(cond), std::move(body));
      const std::string tag = next().text;
      if (tag == "elif") continue;
      if (tag == "else") {
        s->else_body = statements({"endif"}, "if", pos);
        next();
      }
      return s;
    }
  }

  StmtPtr parse_set(SourcePos pos) {
    next();
    auto s = std::make_unique<Stmt>();
    s->pos = pos;
    if (cur().type == TokenType::Name && is_op(look(), ".")) {
      s->targets.push_back(next().text);
      next();
      s->attr = expect_name();
      s->kind = StmtKind::SetAttr;
      expect_op("=");
      s->expr = parse_tuple(false, true, {}, false);
      return s;
    }
    parse_target_names(*s, {});
    if (skip_op("=")) {
      s->kind = StmtKind::Set;
      s->expr = parse_tuple(false, true, {}, false);
      return s;
    }
    if (s->unpack) fail("a block set needs a single name");
    s->kind = StmtKind::SetBlock;
    if (is_op(cur(), "|")) s->filter = parse_filter(nullptr, false);
    s->body = statements({"endset"}, "set", pos);
    next();
    return s;
  }

  StmtPtr parse_macro(SourcePos pos) {
    next();
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::Macro;
    s->pos = pos;
    s->targets.push_back(expect_name());
    expect_op("(");
    while (!is_op(cur(), ")")) {
      if (!s->params.empty()) expect_op(",");
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) {
        p.default_value = parse_expression(true);
      } else if (!s->params.empty() && s->params.back().default_value) {
        fail("non-default argument follows default argument");
      }
      s->params.push_back(std::move(p));
    }
    expect_op(")");
    const int saved_loops = loop_depth_;
    const int varargs_before = varargs_mentions_, kwargs_before = kwargs_mentions_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    s->body = statements({"endmacro"}, "macro", pos);
    loop_depth_ = saved_loops;
    s->catch_varargs = varargs_mentions_ != varargs_before;
    s->catch_kwargs = kwargs_mentions_ != kwargs_before;
    next();
    return s;
  }

  StmtPtr parse_filter_block(SourcePos pos) {
    next();
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::FilterBlock;
    s->pos = pos;
    s->filter = parse_filter(nullptr, true);
    s->body = statements({"endfilter"}, "filter", pos);
    next();
    return s;
  }

  StmtPtr parse_with(SourcePos pos) {
    next();
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::With;
    s->pos = pos;
    while (cur().type != TokenType::BlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->assignments.emplace_back(std::move(name), parse_expression(true));
    }
    s->body = statements({"endwith"}, "with", pos);
    next();
    return s;
  }

  StmtPtr parse_scope_block(SourcePos pos, std::string_view end) {
    const std::string opener = next().text;
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::Scope;
    s->pos = pos;
    s->body = statements({end}, opener, pos);
    next();
    return s;
  }

  // ---- expressions ----
  bool is_tuple_end(Names extra_end) const {
    const Token& t = cur();
    if (t.type == TokenType::VarEnd || t.type == TokenType::BlockEnd || t.type == TokenType::Eof ||
        is_op(t, ")")) {
      return true;
    }
    return t.type == TokenType::Name &&
           std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parens) {
    Guard guard(*this);
    const SourcePos pos = here();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(cur(), ",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("expected an expression, got " + describe(cur()));
    }
    auto e = make(ExprKind::Tuple, pos);
    e->args = std::move(items);
    return done(std::move(e));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Guard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr1 = parse_or();
    while (is_name(cur(), "if")) {
      const SourcePos pos = here();
      next();
      ExprPtr cond = parse_or();
      ExprPtr expr3;
      if (skip_name("else")) expr3 = parse_condexpr();
      auto e = make(ExprKind::Cond, pos);
      e->args.push_back(std::move(expr1));
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(expr3));
      expr1 = done(std::move(e));
    }
    return expr1;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name(cur(), "or")) {
      const SourcePos pos = here();
      next();
      left = binary(ExprKind::Or, pos, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name(cur(), "and")) {
      const SourcePos pos = here();
      next();
      left = binary(ExprKind::And, pos, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    Guard guard(*this);
    if (is_name(cur(), "not")) {
      const SourcePos pos = here();
      next();
      return unary(ExprKind::Not, pos, parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const SourcePos pos = here();
    ExprPtr first = parse_math1();
    auto e = make(ExprKind::Compare, pos);
    e->args.push_back(std::move(first));
    while (true) {
      const Token& t = cur();
      CmpOp op;
      if (is_op(t, "==")) op = CmpOp::Eq;
      else if (is_op(t, "!=")) op = CmpOp::Ne;
      else if (is_op(t, "<")) op = CmpOp::Lt;
      else if (is_op(t, "<=")) op = CmpOp::Le;
      else if (is_op(t, ">")) op = CmpOp::Gt;
      else if (is_op(t, ">=")) op = CmpOp::Ge;
      else if (is_name(t, "in")) op = CmpOp::In;
      else if (is_name(t, "not") && is_name(look(), "in")) op = CmpOp::NotIn, next();
      else break;
      next();
      e->cmp_ops.push_back(op);
      e->args.push_back(parse_math1());
    }
    if (e->cmp_ops.empty()) return std::move(e->args[0]);
    return done(std::move(e));
  }

  ExprPtr parse_binary_level(int level) {
    // level 0: + -   1: ~ (Concat)   2: * / // %   3: **
    if (level == 1) {
      const SourcePos pos = here();
      ExprPtr first = parse_binary_level(2);
      if (!is_op(cur(), "~")) return first;
      auto e = make(ExprKind::Concat, pos);
      e->args.push_back(std::move(first));
      while (skip_op("~")) e->args.push_back(parse_binary_level(2));
      return done(std::move(e));
    }
    ExprPtr left = level == 3 ? parse_unary(true) : parse_binary_level(level + 1);
    while (true) {
      const Token& t = cur();
      if (t.type != TokenType::Op) break;
      BinOp op;
      if (level == 0 && t.text == "+") op = BinOp::Add;
      else if (level == 0 && t.text == "-") op = BinOp::Sub;
      else if (level == 2 && t.text == "*") op = BinOp::Mul;
      else if (level == 2 && t.text == "/") op = BinOp::Div;
      else if (level == 2 && t.text == "//") op = BinOp::FloorDiv;
      else if (level == 2 && t.text == "%") op = BinOp::Mod;
      else if (level == 3 && t.text == "**") op = BinOp::Pow;
      else break;
      const SourcePos pos = here();
      next();
      ExprPtr right = level == 3 ? parse_unary(true) : parse_binary_level(level + 1);
      auto e = make(ExprKind::Binary, pos);
      e->bin_op = op;
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = done(std::move(e));
    }
    return left;
  }
  ExprPtr parse_math1() { return parse_binary_level(0); }

  ExprPtr parse_unary(bool with_filter) {
    Guard guard(*this);
    const SourcePos pos = here();
    ExprPtr node;
    if (is_op(cur(), "-")) {
      next();
      node = unary(ExprKind::Neg, pos, parse_unary(false));
    } else if (is_op(cur(), "+")) {
      next();
      node = unary(ExprKind::Pos, pos, parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    Guard guard(*this);
    const Token& t = cur();
    const SourcePos pos = here();
    if (t.type == TokenType::Name) {
      const std::string name = next().text;
      auto e = make(ExprKind::Const, pos);
      if (name == "true" || name == "True") {
        e->value = Value(true);
      } else if (name == "false" || name == "False") {
        e->value = Value(false);
      } else if (name == "none" || name == "None") {
        e->value = Value::none();
      } else {
        e->kind = ExprKind::Name;
        e->name = name;
        varargs_mentions_ += name == "varargs";
        kwargs_mentions_ += name == "kwargs";
      }
      return done(std::move(e));
    }
    if (t.type == TokenType::String) {
      std::string s;
      while (cur().type == TokenType::String) s += next().text;
      auto e = make(ExprKind::Const, pos);
      e->value = Value(std::move(s));
      return done(std::move(e));
    }
    if (t.type == TokenType::Int || t.type == TokenType::Float) {
      auto e = make(ExprKind::Const, pos);
      e->value = t.type == TokenType::Int ? Value(t.int_value) : Value(t.float_value);
      next();
      return done(std::move(e));
    }
    if (is_op(t, "(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op(t, "[") || is_op(t, "{")) {
      const bool is_dict = t.text == "{";
      const std::string close = is_dict ? "}" : "]";
      next();
      auto e = make(is_dict ? ExprKind::Dict : ExprKind::List, pos);
      while (!is_op(cur(), close)) {
        if (!e->args.empty()) {
          expect_op(",");
          if (is_op(cur(), close)) break;
        }
        e->args.push_back(parse_expression(true));
        if (is_dict) {
          expect_op(":");
          e->args.push_back(parse_expression(true));
        }
      }
      expect_op(close);
      return done(std::move(e));
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(cur(), ".") || is_op(cur(), "[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op(cur(), "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op(cur(), "|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name(cur(), "is")) {
        node = parse_test(std::move(node));
      } else if (is_op(cur(), "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const SourcePos pos = here();
    if (skip_op(".")) {
      const Token& t = cur();
      if (t.type == TokenType::Name) {
        auto e = make(ExprKind::GetAttr, pos);
        e->name = next().text;
        e->args.push_back(std::move(node));
        return done(std::move(e));
      }
      if (t.type != TokenType::Int) fail("expected a name or number after '.', got " + describe(t));
      auto index = make(ExprKind::Const, here());
      index->value = Value(next().int_value);
      return binary(ExprKind::GetItem, pos, std::move(node), done(std::move(index)));
    }
    expect_op("[");
    std::vector<ExprPtr> items;
    while (!is_op(cur(), "]")) {
      if (!items.empty()) expect_op(",");
      items.push_back(parse_subscribed());
    }
    expect_op("]");
    if (items.empty()) fail("expected a subscript expression");
    ExprPtr index;
    if (items.size() == 1) {
      index = std::move(items[0]);
    } else {
      index = make(ExprKind::Tuple, pos);
      index->args = std::move(items);
      index = done(std::move(index));
    }
    return binary(ExprKind::GetItem, pos, std::move(node), std::move(index));
  }

  ExprPtr parse_subscribed() {
    const SourcePos pos = here();
    std::vector<ExprPtr> parts;
    if (skip_op(":")) {
      parts.push_back(nullptr);
    } else {
      ExprPtr first = parse_expression(true);
      if (!skip_op(":")) return first;
      parts.push_back(std::move(first));
    }
    if (is_op(cur(), ":") || is_op(cur(), "]") || is_op(cur(), ",")) {
      parts.push_back(nullptr);
    } else {
      parts.push_back(parse_expression(true));
    }
    if (skip_op(":") && !is_op(cur(), "]") && !is_op(cur(), ",")) {
      parts.push_back(parse_expression(true));
    } else {
      parts.push_back(nullptr);
    }
    auto e = make(ExprKind::Slice, pos);
    e->args = std::move(parts);
    return done(std::move(e));
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool need_comma = false;
    while (!is_op(cur(), ")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(cur(), ")")) break;
      }
      if (is_op(cur(), "*") || is_op(cur(), "**")) fail_unsupported("*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::Name && is_op(look(), "=")) {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("positional argument follows keyword argument");
        e.args.push_back(parse_expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::Call, node->pos);  // errors of a call point at what is called
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return done(std::move(e));
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op(cur(), "|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const SourcePos pos = here();
      auto e = make(ExprKind::Filter, pos);
      e->name = dotted_name();
      if (!find_filter(e->name)) {
        throw TemplateError(ErrorKind::Unsupported, "unknown or unsupported filter '" + e->name + "'", pos);
      }
      e->args.push_back(std::move(node));
      if (is_op(cur(), "(")) parse_call_args(*e);
      node = done(std::move(e));
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const SourcePos pos = here();
    next();  // 'is'
    const bool negated = skip_name("not");
    const SourcePos name_pos = here();
    auto e = make(ExprKind::Test, pos);
    e->name = dotted_name();
    if (!find_test(e->name)) {
      throw TemplateError(ErrorKind::Unsupported, "unknown or unsupported test '" + e->name + "'", name_pos);
    }
    e->args.push_back(std::move(node));
    const Token& t = cur();
    if (is_op(t, "(")) {
      parse_call_args(*e);
    } else if ((t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Int ||
                t.type == TokenType::Float || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
      if (is_name(t, "is")) fail("tests cannot be chained with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    ExprPtr test = done(std::move(e));
    return negated ? unary(ExprKind::Not, pos, std::move(test)) : std::move(test);
  }

  const SourceMap& map_;
  std::vector<Token> toks_;
  size_t i_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
  int varargs_mentions_ = 0;
  int kwargs_mentions_ = 0;
};

}  // namespace

std::unique_ptr<Program> parse_template(std::string_view source) {
  auto program = std::make_unique<Program>(normalize_newlines(source));
  program->body = Parser(*program).parse();
  mark_unbound_locals(*program);
  return program;
}

}  // namespace tokamak::jinja
