// Tool calling (OpenAI's tools, tool_choice, parallel_tool_calls): the
// reply is constrained by a grammar to calls in a ToolFormat
// (server/tool_format.h), each {"name": ..., "<arguments_key>": {...}} whose
// arguments match the function's parameters schema (grammar/json_schema.h).
// Under tool_choice "auto" the reply is either that or plain text, which
// may not start with the format's first byte: that byte tells them apart,
// so a stream knows at once which it carries.
//
// A model whose template has its own tool syntax sees the tools and the
// tool turns through its template (server/openai_request.cpp). For the
// generic format kvlab describes the tools in a system-prompt section and
// history goes back to the template as plain messages: an assistant turn's
// tool_calls in the generic form, a tool result as a user turn.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "server/tool_format.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::server {

struct ToolRequest {
  struct Function {
    std::string name;
    std::string description;
    nlohmann::ordered_json parameters;  // a JSON schema ({"type": "object"} when not given)
    bool strict = false;
  };
  enum class Choice { Auto, Required, Named };
  std::vector<Function> functions;
  Choice choice = Choice::Auto;
  std::string named;  // Choice::Named: the function
  bool parallel = true;
  // The tools in OpenAI's shape, for a template that renders them; a
  // function without parameters gets {"type": "object", "properties": {}},
  // which templates can list.
  nlohmann::ordered_json openai = nlohmann::ordered_json::array();
};

// tools / tool_choice / parallel_tool_calls of a chat body; nullopt when
// there are no tools or tool_choice is "none". Throws ApiException 400
// naming the field.
std::optional<ToolRequest> parse_tools(const nlohmann::ordered_json& body);

// The system-prompt section that describes the tools and the reply format.
std::string tools_prompt(const ToolRequest& tools);
// Adds tools_prompt to the first system message, or as one before the rest.
void add_tools_prompt(const ToolRequest& tools, std::vector<tokenizer::ChatMessage>& messages);

// The grammar of a reply in `format`; throws ApiException 400 for a
// parameters schema that is unsupported (strict) or unsatisfiable.
std::shared_ptr<const grammar::Grammar> tools_grammar(const ToolRequest& tools,
                                                      const ToolFormat& format = kGenericTools);

// A reply that is a whole tool call in `format`: OpenAI's
// message.tool_calls, each with a new id and its arguments' text as written
// (server/tool_call_stream.h). nullopt for a text reply or one cut short.
std::optional<nlohmann::json> tool_calls_of(const std::string& reply, const ToolFormat& format = kGenericTools);

// An assistant message's tool_calls checked, in the shape templates read:
// OpenAI's, with each function's arguments parsed from their JSON text
// (templates write them with `tojson`). Throws ApiException 400 naming `param`.
nlohmann::ordered_json parse_tool_calls(const nlohmann::json& tool_calls, const std::string& param);
// An assistant message's tool_calls as the generic reply that made them.
std::string render_tool_calls(const nlohmann::json& tool_calls, const std::string& param);

}  // namespace kvlab::server
