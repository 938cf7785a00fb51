// The grammar a reply must follow, from the request body: OpenAI's
// response_format (json_object: any JSON object; json_schema: its schema,
// grammar/json_schema.h) or llama.cpp's `grammar` field (GBNF text,
// grammar/gbnf.h). The engine masks every draw to it
// (sample/grammar_vocab.h).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace kvlab::server {

// Null: the reply is free text. Throws ApiException 400 naming the field
// for a malformed format, a schema that is unsupported (strict) or
// unsatisfiable, or a grammar that does not compile (with its line and
// column). `body` is ordered: a schema's properties keep their order.
std::shared_ptr<const grammar::Grammar> output_grammar(const nlohmann::ordered_json& body);

}  // namespace kvlab::server
