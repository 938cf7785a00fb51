// JSON (RFC 8259) as GBNF rules, for JSON mode and for the schema compiler
// (grammar/json_schema.h): strings with their escapes (a \u escape of a
// UTF-16 surrogate must be a high one followed at once by an escaped low
// one, as strict parsers require), numbers, literals, and any value nested
// at most kMaxDepth containers deep. Two limits keep a model from
// generating forever inside the grammar: at most kMaxWhitespace whitespace
// bytes in a row (a model in JSON mode can emit blank lines without end, as
// OpenAI's documentation warns) and the depth.
#pragma once
#include <memory>
#include <string>

#include "grammar/grammar.h"

namespace kvlab::grammar {

inline constexpr int kMaxDepth = 32;
inline constexpr int kMaxWhitespace = 24;  // a newline and 23 columns of indentation

// The rules json-string, json-number, json-integer, json-ws (whitespace,
// bounded) and json-value-D for D = 0..kMaxDepth: any value inside D
// enclosing containers (json-object-D and json-array-D are the containers
// at depth D, D >= 1).
std::string json_rules();

// JSON mode (response_format json_object): one JSON object, after optional
// whitespace, and nothing after its closing brace. Compiled once.
std::shared_ptr<const Grammar> json_object_grammar();

}  // namespace kvlab::grammar
