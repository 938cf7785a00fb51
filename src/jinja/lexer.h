// Splits a Jinja template into tokens: literal text between tags, the tag
// delimiters, and the tokens of the expressions inside tags. Whitespace
// control is applied here, with the settings Hugging Face's transformers
// renders chat templates with (trim_blocks and lstrip_blocks on), following
// jinja2's lexer (https://jinja.palletsprojects.com/en/3.1.x/templates/#whitespace-control):
//   - "{%-" / "{{-" / "{#-" strip all whitespace before the tag, "-%}" /
//     "-}}" / "-#}" all whitespace after it;
//   - trim_blocks: the first newline after a block or comment tag goes;
//   - lstrip_blocks: spaces and tabs from the start of a line to a block or
//     comment tag go; "{%+" keeps them, "+%}" keeps the newline.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kvlab::jinja {

enum class TokenKind {
  Text,         // literal text outside tags
  OutputOpen,   // {{
  OutputClose,  // }}
  BlockOpen,    // {%
  BlockClose,   // %}
  Name,
  String,       // a string literal, escapes decoded
  Integer,
  Float,
  Operator,     // punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  End,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line;
};

// Throws kvlab::Error ("chat template line N: ...") on an unterminated tag
// or string, or a character that starts no token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace kvlab::jinja
