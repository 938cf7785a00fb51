#include "server/output_grammar.h"

#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"
#include "grammar/json_schema.h"
#include "server/openai_api.h"

namespace kvlab::server {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const grammar::Grammar> compiled(const std::string& gbnf, const char* param) {
  try {
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
  } catch (const Error& e) {
    fail(e.what(), param, "invalid_value");
  }
}

// response_format {"type": "json_schema", "json_schema": {"name", "schema",
// "strict"}}; without a schema, any JSON object.
std::shared_ptr<const grammar::Grammar> schema_grammar(const json& rf) {
  const char* param = "response_format.json_schema";
  const auto it = rf.find("json_schema");
  if (it == rf.end() || !it->is_object()) fail("response_format json_schema needs a 'json_schema' object", param, "invalid_type");
  const auto strict = it->find("strict");
  const bool is_strict = strict != it->end() && strict->is_boolean() && strict->get<bool>();
  if (strict != it->end() && !strict->is_null() && !strict->is_boolean())
    fail("'strict' must be a boolean", "response_format.json_schema.strict", "invalid_type");
  const auto schema = it->find("schema");
  if (schema == it->end() || schema->is_null()) return grammar::json_object_grammar();
  std::string gbnf;
  try {
    gbnf = grammar::json_schema_to_gbnf(*schema, is_strict);
  } catch (const Error& e) {
    fail(e.what(), "response_format.json_schema.schema", "invalid_value");
  }
  return compiled(gbnf, "response_format.json_schema.schema");
}

std::shared_ptr<const grammar::Grammar> response_format(const json& body) {
  const auto rf = body.find("response_format");
  if (rf == body.end() || rf->is_null()) return nullptr;
  const auto type = rf->is_object() ? rf->find("type") : rf->end();
  if (!rf->is_object() || type == rf->end() || !type->is_string())
    fail("'response_format' must be an object with a string 'type'", "response_format", "invalid_type");
  const std::string t = type->get<std::string>();
  if (t == "text") return nullptr;
  if (t == "json_object") return grammar::json_object_grammar();
  if (t == "json_schema") return schema_grammar(*rf);
  fail("response_format type must be text, json_object or json_schema, got '" + t + "'", "response_format",
       "invalid_value");
}

}  // namespace

std::shared_ptr<const grammar::Grammar> output_grammar(const json& body) {
  std::shared_ptr<const grammar::Grammar> g = response_format(body);
  const auto gbnf = body.find("grammar");
  if (gbnf == body.end() || gbnf->is_null()) return g;
  if (!gbnf->is_string()) fail("'grammar' must be a string of GBNF", "grammar", "invalid_type");
  if (g) fail("'grammar' and a JSON response_format exclude each other", "grammar", "invalid_value");
  return compiled(gbnf->get<std::string>(), "grammar");
}

}  // namespace kvlab::server
