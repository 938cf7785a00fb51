#include "jinja/parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "jinja/error.h"

namespace kvlab::jinja {
namespace {

// Deeper nesting than this is refused, so that a hostile template cannot
// exhaust the stack of the recursive descent (or of the evaluator after it).
constexpr int kMaxDepth = 200;

int64_t integer_literal(const Token& t) {
  errno = 0;
  const long long v = std::strtoll(t.text.c_str(), nullptr, 10);
  if (errno == ERANGE) fail_at(t.line, "integer literal out of range");
  return v;
}

double float_literal(const Token& t) {
  errno = 0;
  const double v = std::strtod(t.text.c_str(), nullptr);
  if (errno == ERANGE) fail_at(t.line, "float literal out of range");
  return v;
}

template <class Node>
ExprPtr make_expr(int line, Node node) {
  return std::make_unique<Expr>(Expr{std::move(node), line});
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Parsed parse_template() {
    std::string end;
    Body body = parse_body({}, end);
    return {std::move(body), std::move(names_)};
  }

 private:
  // ---------------------------------------------------------------- tokens
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  int line() const { return peek().line; }

  bool at_operator(std::string_view op) const { return peek().kind == TokenKind::Operator && peek().text == op; }
  bool at_name(std::string_view name) const { return peek().kind == TokenKind::Name && peek().text == name; }
  bool accept_operator(std::string_view op) { return at_operator(op) ? (next(), true) : false; }
  bool accept_name(std::string_view name) { return at_name(name) ? (next(), true) : false; }

  [[noreturn]] void unexpected(const std::string& wanted) const {
    const Token& t = peek();
    std::string got;
    switch (t.kind) {
      case TokenKind::End: got = "end of template"; break;
      case TokenKind::OutputClose: got = "'}}'"; break;
      case TokenKind::BlockClose: got = "'%}'"; break;
      case TokenKind::Text: got = "text"; break;
      default: got = "'" + t.text + "'";
    }
    fail_at(t.line, "expected " + wanted + ", got " + got);
  }
  void expect_operator(std::string_view op) {
    if (!accept_operator(op)) unexpected("'" + std::string(op) + "'");
  }
  std::string expect_name() {
    if (peek().kind != TokenKind::Name) unexpected("a name");
    return next().text;
  }
  void expect_block_close() {
    if (peek().kind != TokenKind::BlockClose) unexpected("'%}'");
    next();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxDepth) fail_at(p.line(), "template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  // ---------------------------------------------------------------- statements
  // Statements up to a block tag whose keyword is one of `ends` (stored in
  // `end`, the position left after the keyword) or the end of the template.
  Body parse_body(std::initializer_list<std::string_view> ends, std::string& end) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::End) {
        if (ends.size() != 0)
          fail_at(t.line, "missing '{% " + std::string(*(ends.end() - 1)) + " %}' at the end of the template");
        end.clear();
        return body;
      }
      if (t.kind == TokenKind::Text) {
        body.push_back(std::make_unique<Stmt>(Stmt{TextStmt{next().text}, t.line}));
      } else if (t.kind == TokenKind::OutputOpen) {
        const int at = next().line;
        ExprPtr value = parse_expression();
        if (peek().kind != TokenKind::OutputClose) unexpected("'}}'");
        next();
        body.push_back(std::make_unique<Stmt>(Stmt{OutputStmt{std::move(value)}, at}));
      } else {
        next();  // {%
        const Token& keyword = peek();
        if (keyword.kind != TokenKind::Name) unexpected("a tag name");
        for (std::string_view e : ends) {
          if (keyword.text == e) {
            end = next().text;
            return body;
          }
        }
        parse_statement(body);
      }
    }
  }

  void parse_statement(Body& body) {
    const int at = line();
    const std::string keyword = next().text;
    if (keyword == "if") return body.push_back(stmt(at, parse_if()));
    if (keyword == "for") return body.push_back(stmt(at, parse_for()));
    if (keyword == "set") return body.push_back(stmt(at, parse_set()));
    if (keyword == "macro") return body.push_back(stmt(at, parse_macro()));
    if (keyword == "filter") return body.push_back(stmt(at, parse_filter_block()));
    if (keyword == "break" || keyword == "continue") {
      expect_block_close();
      return body.push_back(stmt(at, LoopControl{keyword == "break"}));
    }
    if (keyword == "generation") {  // transformers' marker of assistant text: no output of its own
      expect_block_close();
      std::string end;
      for (StmtPtr& s : parse_body({"endgeneration"}, end)) body.push_back(std::move(s));
      return expect_block_close();
    }
    fail_at(at, "unknown or unsupported tag '" + keyword + "'");
  }

  template <class Node>
  static StmtPtr stmt(int line, Node node) {
    return std::make_unique<Stmt>(Stmt{std::move(node), line});
  }

  IfStmt parse_if() {
    IfStmt s;
    std::string end = "elif";
    while (end == "elif") {
      ExprPtr condition = parse_expression();
      expect_block_close();
      Body body = parse_body({"elif", "else", "endif"}, end);
      s.branches.emplace_back(std::move(condition), std::move(body));
    }
    if (end == "else") {
      expect_block_close();
      s.otherwise = parse_body({"endif"}, end);
    }
    expect_block_close();
    return s;
  }

  std::vector<std::string> parse_targets() {
    const bool parenthesized = accept_operator("(");
    std::vector<std::string> names{expect_name()};
    while (accept_operator(",")) names.push_back(expect_name());
    if (parenthesized) expect_operator(")");
    return names;
  }

  ForStmt parse_for() {
    ForStmt s;
    s.targets = parse_targets();
    if (!accept_name("in")) unexpected("'in'");
    s.iterable = parse_tuple(/*allow_conditional=*/false);
    if (accept_name("if")) s.filter = parse_expression();
    if (at_name("recursive")) fail_at(line(), "recursive loops are not supported");
    expect_block_close();
    std::string end;
    s.body = parse_body({"else", "endfor"}, end);
    if (end == "else") {
      expect_block_close();
      s.otherwise = parse_body({"endfor"}, end);
    }
    expect_block_close();
    return s;
  }

  SetStmt parse_set() {
    SetStmt s;
    s.targets = parse_targets();
    if (s.targets.size() == 1 && accept_operator(".")) s.attr = expect_name();
    if (accept_operator("=")) {
      s.value = parse_tuple(/*allow_conditional=*/true);
      expect_block_close();
      return s;
    }
    if (s.targets.size() != 1 || !s.attr.empty()) unexpected("'='");
    expect_block_close();
    std::string end;
    s.body = parse_body({"endset"}, end);
    expect_block_close();
    return s;
  }

  MacroStmt parse_macro() {
    MacroStmt s;
    s.name = expect_name();
    expect_operator("(");
    while (!accept_operator(")")) {
      if (!s.params.empty()) expect_operator(",");
      std::string param = expect_name();
      ExprPtr fallback = accept_operator("=") ? parse_expression() : nullptr;
      s.params.emplace_back(std::move(param), std::move(fallback));
    }
    expect_block_close();
    std::string end;
    s.body = parse_body({"endmacro"}, end);
    if (peek().kind == TokenKind::Name) next();  // {% endmacro name %}
    expect_block_close();
    return s;
  }

  FilterBlock parse_filter_block() {
    FilterBlock s;
    s.name = expect_name();
    if (at_operator("(")) s.args = parse_call_args();
    expect_block_close();
    std::string end;
    s.body = parse_body({"endfilter"}, end);
    expect_block_close();
    return s;
  }

  // ---------------------------------------------------------------- expressions
  // An expression, or several separated by commas: a tuple (a list here).
  ExprPtr parse_tuple(bool allow_conditional) {
    const int at = line();
    ExprPtr first = parse_expression(allow_conditional);
    if (!at_operator(",")) return first;
    ListExpr items;
    items.items.push_back(std::move(first));
    while (accept_operator(",")) items.items.push_back(parse_expression(allow_conditional));
    return make_expr(at, std::move(items));
  }

  ExprPtr parse_expression(bool allow_conditional = true) {
    DepthGuard guard(*this);
    const int at = line();
    ExprPtr value = parse_or();
    if (!allow_conditional || !accept_name("if")) return value;
    ExprPtr condition = parse_or();
    ExprPtr otherwise = accept_name("else") ? parse_expression() : nullptr;
    return make_expr(at, Conditional{std::move(condition), std::move(value), std::move(otherwise)});
  }

  ExprPtr parse_or() {
    ExprPtr lhs = parse_and();
    while (at_name("or")) {
      const int at = next().line;
      lhs = make_expr(at, Binary{"or", std::move(lhs), parse_and()});
    }
    return lhs;
  }

  ExprPtr parse_and() {
    ExprPtr lhs = parse_not();
    while (at_name("and")) {
      const int at = next().line;
      lhs = make_expr(at, Binary{"and", std::move(lhs), parse_not()});
    }
    return lhs;
  }

  ExprPtr parse_not() {
    if (!at_name("not")) return parse_compare();
    DepthGuard guard(*this);
    const int at = next().line;
    return make_expr(at, Unary{"not", parse_not()});
  }

  // Comparisons chain as in Python: a < b < c is a < b and b < c.
  ExprPtr parse_compare() {
    const int at = line();
    ExprPtr first = parse_binary_level(0);
    Compare chain{std::move(first), {}};
    while (true) {
      std::string op;
      if (peek().kind == TokenKind::Operator && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                                 peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (accept_name("in")) {
        op = "in";
      } else if (at_name("not") && peek(1).kind == TokenKind::Name && peek(1).text == "in") {
        next(), next();
        op = "not in";
      } else {
        break;
      }
      chain.rest.emplace_back(std::move(op), parse_binary_level(0));
    }
    if (chain.rest.empty()) return std::move(chain.first);
    return make_expr(at, std::move(chain));
  }

  // The left-associative operator levels between comparison and unary.
  ExprPtr parse_binary_level(size_t level) {
    static const std::vector<std::vector<std::string_view>> kLevels = {
        {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
    if (level == kLevels.size()) return parse_unary(true);
    ExprPtr lhs = parse_binary_level(level + 1);
    while (peek().kind == TokenKind::Operator) {
      const auto& ops = kLevels[level];
      if (std::find(ops.begin(), ops.end(), peek().text) == ops.end()) break;
      const Token& op = next();
      lhs = make_expr(op.line, Binary{op.text, std::move(lhs), parse_binary_level(level + 1)});
    }
    return lhs;
  }

  ExprPtr parse_unary(bool with_filters) {
    DepthGuard guard(*this);
    const int at = line();
    ExprPtr node;
    if (at_operator("-") || at_operator("+")) {
      const std::string op = next().text;
      node = make_expr(at, Unary{op, parse_unary(false)});
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filters) node = parse_filters_and_tests(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    const int at = t.line;
    switch (t.kind) {
      case TokenKind::Name: {
        const std::string id = next().text;
        if (id == "true" || id == "True") return make_expr(at, Literal{true});
        if (id == "false" || id == "False") return make_expr(at, Literal{false});
        if (id == "none" || id == "None") return make_expr(at, Literal{nullptr});
        names_.insert(id);
        return make_expr(at, Name{id});
      }
      case TokenKind::String: {
        std::string s = next().text;
        while (peek().kind == TokenKind::String) s += next().text;  // adjacent literals join
        return make_expr(at, Literal{s});
      }
      case TokenKind::Integer: return make_expr(at, Literal{integer_literal(next())});
      case TokenKind::Float: return make_expr(at, Literal{float_literal(next())});
      default: break;
    }
    if (accept_operator("(")) {
      if (accept_operator(")")) return make_expr(at, ListExpr{});
      ExprPtr inner = parse_tuple(true);
      expect_operator(")");
      return inner;
    }
    if (accept_operator("[")) {
      ListExpr list;
      while (!accept_operator("]")) {
        if (!list.items.empty()) expect_operator(",");
        if (accept_operator("]")) break;  // trailing comma
        list.items.push_back(parse_expression());
      }
      return make_expr(at, std::move(list));
    }
    if (accept_operator("{")) {
      DictExpr dict;
      while (!accept_operator("}")) {
        if (!dict.entries.empty()) expect_operator(",");
        if (accept_operator("}")) break;
        ExprPtr key = parse_expression();
        expect_operator(":");
        dict.entries.emplace_back(std::move(key), parse_expression());
      }
      return make_expr(at, std::move(dict));
    }
    unexpected("an expression");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const int at = line();
      if (accept_operator(".")) {
        if (peek().kind == TokenKind::Integer) {  // a.0 is a[0]
          node = make_expr(at, GetItem{std::move(node), make_expr(at, Literal{integer_literal(next())})});
        } else {
          node = make_expr(at, GetAttr{std::move(node), expect_name()});
        }
      } else if (accept_operator("[")) {
        node = parse_subscript(std::move(node), at);
      } else if (at_operator("(")) {
        node = make_expr(at, Call{std::move(node), parse_call_args()});
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object, int at) {
    ExprPtr parts[3];
    size_t colons = 0;
    while (true) {
      if (!at_operator(":") && !at_operator("]")) parts[colons] = parse_expression();
      if (accept_operator("]")) break;
      if (colons == 2) unexpected("']'");
      expect_operator(":");
      ++colons;
    }
    if (colons == 0) {
      if (!parts[0]) fail_at(at, "empty subscript");
      return make_expr(at, GetItem{std::move(object), std::move(parts[0])});
    }
    return make_expr(at, SliceExpr{std::move(object), std::move(parts[0]), std::move(parts[1]), std::move(parts[2])});
  }

  Args parse_call_args() {
    expect_operator("(");
    Args args;
    while (!accept_operator(")")) {
      if (!args.positional.empty() || !args.keyword.empty()) {
        expect_operator(",");
        if (accept_operator(")")) break;
      }
      if (peek().kind == TokenKind::Name && peek(1).kind == TokenKind::Operator && peek(1).text == "=") {
        std::string key = next().text;
        next();
        args.keyword.emplace_back(std::move(key), parse_expression());
      } else {
        if (!args.keyword.empty()) fail_at(line(), "positional argument after a keyword argument");
        args.positional.push_back(parse_expression());
      }
    }
    return args;
  }

  ExprPtr parse_filters_and_tests(ExprPtr node) {
    while (true) {
      const int at = line();
      if (accept_operator("|")) {
        FilterExpr f{std::move(node), expect_name(), {}};
        if (at_operator("(")) f.args = parse_call_args();
        node = make_expr(at, std::move(f));
      } else if (accept_name("is")) {
        const bool negated = accept_name("not");
        TestExpr t{std::move(node), expect_name(), {}, negated};
        if (at_operator("("))
          t.args = parse_call_args();
        else if (starts_test_argument())
          t.args.positional.push_back(parse_postfix(parse_primary()));
        node = make_expr(at, std::move(t));
      } else {
        return node;
      }
    }
  }

  // "x is divisibleby 3": a test takes one bare argument when a value follows.
  bool starts_test_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::String || t.kind == TokenKind::Integer || t.kind == TokenKind::Float) return true;
    if (t.kind == TokenKind::Operator) return t.text == "[" || t.text == "{";
    if (t.kind != TokenKind::Name) return false;
    for (std::string_view keyword : {"else", "or", "and", "if", "in", "not", "is"})
      if (t.text == keyword) return false;
    return true;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::set<std::string, std::less<>> names_;
};

}  // namespace

Parsed parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_template(); }

}  // namespace kvlab::jinja
