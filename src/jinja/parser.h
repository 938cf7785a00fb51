// Builds the syntax tree (jinja/ast.h) of a token stream (jinja/lexer.h),
// with jinja2's operator precedence, loosest first:
//   a if c else b;  or;  and;  not;  == != < <= > >= in, not in;  + -;  ~;
//   * / // %;  **;  unary - +;  then a primary with its postfixes (.attr,
//   [index], [a:b:c], (call)) and its filters and tests (| f, is t), which
//   bind tighter than everything above: "a + b | trim" trims only b.
// Statements: if/elif/else, for (with an "if" filter and else), set (also
// ns.attr and the block form), macro, break/continue, filter blocks, and
// transformers' generation blocks (rendered as their plain body).
#pragma once
#include <set>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace kvlab::jinja {

struct Parsed {
  Body body;
  std::set<std::string, std::less<>> names;  // every variable name the template reads
};

// Throws kvlab::Error ("line N: ...") on a syntax error or an unsupported
// tag.
Parsed parse(std::vector<Token> tokens);

}  // namespace kvlab::jinja
