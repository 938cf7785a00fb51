// The syntax tree of a parsed template: expressions and statements, each
// with the template line it starts on (for error messages).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kvlab::jinja {

// Template data: objects keep their keys in insertion order, as Python's
// dicts do, so that tojson prints them the way jinja2 does.
using Json = nlohmann::ordered_json;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Arguments of a call, filter or test: f(a, b, key=c).
struct Args {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Literal { Json value; };                                    // 1, 'a', true, none
struct Name { std::string id; };                                   // x
struct ListExpr { std::vector<ExprPtr> items; };                   // [a, b] and (a, b)
struct DictExpr { std::vector<std::pair<ExprPtr, ExprPtr>> entries; };  // {k: v}
struct GetAttr { ExprPtr object; std::string attr; };              // a.b
struct GetItem { ExprPtr object, index; };                         // a[i]
struct SliceExpr { ExprPtr object, start, stop, step; };           // a[i:j:k], each part optional
struct Call { ExprPtr callee; Args args; };                        // f(...)
struct FilterExpr { ExprPtr value; std::string name; Args args; };  // a | f(...)
struct TestExpr { ExprPtr value; std::string name; Args args; bool negated; };  // a is [not] t(...)
struct Unary { std::string op; ExprPtr operand; };                 // -a, +a, not a
struct Binary { std::string op; ExprPtr lhs, rhs; };               // arithmetic, and, or, ~
struct Compare {                                                   // a < b <= c, a in b, a not in b
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
};
struct Conditional { ExprPtr condition, then, otherwise; };        // a if c else b (otherwise may be null)

struct Expr {
  std::variant<Literal, Name, ListExpr, DictExpr, GetAttr, GetItem, SliceExpr, Call, FilterExpr, TestExpr, Unary,
               Binary, Compare, Conditional>
      node;
  int line;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt { std::string text; };
struct OutputStmt { ExprPtr value; };                                     // {{ value }}
struct IfStmt { std::vector<std::pair<ExprPtr, Body>> branches; Body otherwise; };
struct ForStmt {
  std::vector<std::string> targets;  // one name, or several to unpack each item into
  ExprPtr iterable, filter;          // filter: the optional "if" clause
  Body body, otherwise;              // otherwise: the "else" block, run when nothing was iterated
};
struct SetStmt {
  std::vector<std::string> targets;  // names (several unpack a sequence), or the namespace of `attr`
  std::string attr;                  // set ns.attr = value
  ExprPtr value;                     // null for a block set, whose body renders to the value
  Body body;
};
struct MacroStmt {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default values may be null
  Body body;
};
struct LoopControl { bool is_break; };                                    // break / continue
struct FilterBlock { std::string name; Args args; Body body; };           // {% filter f %}...{% endfilter %}

struct Stmt {
  std::variant<TextStmt, OutputStmt, IfStmt, ForStmt, SetStmt, MacroStmt, LoopControl, FilterBlock> node;
  int line;
};

}  // namespace kvlab::jinja
