// Tool calling (OpenAI's tools, tool_choice, parallel_tool_calls) for
// models whose chat template has no tool syntax: kvlab describes the tools
// in a system-prompt section and constrains the reply with a grammar. A
// call is written as the marker <tool_call> and a JSON array of
// {"name": ..., "arguments": {...}} whose arguments match the function's
// parameters schema (grammar/json_schema.h). Under tool_choice "auto" the
// reply is either that or plain text, which may not start with '<': the
// first byte tells them apart, so a stream knows at once which it carries.
//
// History goes back to the template as plain messages: an assistant turn's
// tool_calls in the same marker form, a tool result as a user turn.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::server {

inline constexpr const char* kToolCallMarker = "<tool_call>";
// Calls in one reply at most: a small model can repeat a call without end
// rather than close the array.
inline constexpr int kMaxToolCalls = 8;

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
};

// tools / tool_choice / parallel_tool_calls of a chat body; nullopt when
// there are no tools or tool_choice is "none". Throws ApiException 400
// naming the field.
std::optional<ToolRequest> parse_tools(const nlohmann::ordered_json& body);

// The system-prompt section that describes the tools and the reply format.
std::string tools_prompt(const ToolRequest& tools);
// Adds tools_prompt to the first system message, or as one before the rest.
void add_tools_prompt(const ToolRequest& tools, std::vector<tokenizer::ChatMessage>& messages);

// The grammar of the reply; throws ApiException 400 for a parameters
// schema that is unsupported (strict) or unsatisfiable.
std::shared_ptr<const grammar::Grammar> tools_grammar(const ToolRequest& tools);

// A reply that is a whole tool call: OpenAI's message.tool_calls, each with
// a new id and its arguments' text as written (server/tool_call_stream.h).
// nullopt for a text reply or one cut short.
std::optional<nlohmann::json> tool_calls_of(const std::string& reply);

// An assistant message's tool_calls, as the reply that made them.
std::string render_tool_calls(const nlohmann::json& tool_calls, const std::string& param);

}  // namespace kvlab::server
