// JSON Schema to GBNF, for structured outputs (OpenAI's response_format
// json_schema, and the arguments of tool calls): the grammar matches JSON
// texts that validate against the schema, written compactly with at most
// one bounded run of whitespace between tokens (a space, or a newline and
// up to 16 spaces of indentation: enough for small models' usual layout,
// never a loop of blank lines).
//
// Supported: type (one or a list), properties with required (optional ones
// in declared order, any subset) and additionalProperties (false or absent:
// only the declared ones; true or a schema: more after them), items,
// minItems / maxItems, enum, const, anyOf / oneOf (oneOf's exclusivity is
// not enforced), allOf of one schema, $ref to "#", "#/$defs/..." or
// "#/definitions/...", minLength / maxLength, pattern (a regex subset:
// grammar/regex.h), format date, time, date-time and uuid (other formats
// are annotations and ignored, as JSON Schema allows), and {"not": {}}.
// Annotations (title, description, default, examples, ...) are ignored.
//
// Any other keyword is refused in strict mode (an error naming it and where
// it is) and ignored otherwise. A schema no JSON value satisfies (false,
// enum [], minLength > maxLength, a required property that
// additionalProperties false forbids, ...) is always an error.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace kvlab::grammar {

// The GBNF text (root rule "root"); throws kvlab::Error "json_schema: ..."
// naming the keyword and its JSON pointer. An ordered_json keeps the
// properties in the order the schema declares them, the order the grammar
// writes them in.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, bool strict);

// For grammars with several schemas (tool calls): appends to `rules` the
// rule `name` matching the schema and its helpers (named `name-...`). The
// rules they share, schema_shared_rules(), must be added once.
void json_schema_rules(const nlohmann::ordered_json& schema, bool strict, const std::string& name, std::string& rules);
std::string schema_shared_rules();

// A GBNF string literal matching exactly `bytes`.
std::string gbnf_literal(std::string_view bytes);

}  // namespace kvlab::grammar
