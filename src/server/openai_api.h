// OpenAI-compatible request parsing/validation (openai_request.cpp) and
// response JSON (openai_api.cpp), free of any HTTP library: handlers turn an
// ApiError into the status and the {"error":{"message","type","param","code"}}
// body.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/handle.h"
#include "engine/request.h"
#include "server/tool_format.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::server {

// The engine's request and result types, as this layer fills and reads them.
using engine::GenRequest;
using engine::Handle;
using engine::Timings;
using engine::TokenLogprobs;

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
  nlohmann::json body() const;
};

// Throw this from parsing code; handlers catch it.
struct ApiException {
  ApiError err;
};

enum class Endpoint { Completions, Chat };

struct ApiLimits {
  std::string model_id;  // the served model's id
  int n_ctx = 2048;
};

// OpenAI's `n`: choices per request (server/choices.h).
inline constexpr int kMaxChoices = 16;

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  GenRequest gen;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  // tools: the format of their calls (server/tool_format.h), null without
  // tools. A reply that is a tool call comes back as message.tool_calls with
  // finish_reason "tool_calls".
  const ToolFormat* tool_format = nullptr;
  std::string model;  // as echoed in responses
};

// Shared by the routes' body parsers (here, server/lab.cpp,
// server/tokenize_api.cpp): throws ApiException with this message, naming
// the field `param` (empty: none).
[[noreturn]] void fail(std::string message, std::string param = {}, std::string code = {}, int status = 400);
// A boolean field; absent or null: nullopt; any other type: a 400 naming it.
std::optional<bool> boolean(const nlohmann::json& j, const char* name);

// A request body as a JSON object; throws ApiException 400 (code
// invalid_json, or invalid_type for JSON that is not an object) otherwise.
nlohmann::json parse_body(const std::string& body);

// Parses and validates a request body; throws ApiException with the right
// 4xx. Tokenizes the prompt (chat: the model's chat template, Tokenizer::apply_chat).
ParsedRequest parse_request(Endpoint ep, const std::string& body, const tokenizer::Tokenizer& tok,
                            const ApiLimits& limits);

// Whether `name` names the served model (its id, or its file name).
bool model_matches(const std::string& name, const std::string& model_id);

std::string new_id(Endpoint ep);  // "cmpl-..." / "chatcmpl-..."
int64_t unix_now();

nlohmann::json usage_json(const Timings& t);
nlohmann::json timings_json(const Timings& t);
// A choice's "logprobs": null unless the request asked; completions:
// {tokens, token_logprobs, top_logprobs, text_offset}; chat: {content: [{token,
// logprob, bytes, top_logprobs}]}.
nlohmann::json logprobs_json(const ParsedRequest& r, const std::vector<TokenLogprobs>& lps);
// One finished choice.
struct Choice {
  std::string text;
  std::string finish_reason;
  std::vector<TokenLogprobs> logprobs;
};
// Non-streaming response: choices[i] has index i.
nlohmann::json completion_response(const ParsedRequest& r, const std::string& id, int64_t created,
                                   const std::vector<Choice>& choices, const Timings& t);
// One streaming chunk of choice `index`; `finish_reason` empty: null.
// `role`: first chat delta. `lps`: the tokens whose text starts in this chunk.
nlohmann::json stream_chunk(const ParsedRequest& r, const std::string& id, int64_t created, int index,
                            const std::string& text, const std::string& finish_reason, bool role,
                            const std::vector<TokenLogprobs>& lps = {});
// One delta.tool_calls entry of choice `index` (server/tool_call_stream.h)
// as a streaming chunk.
nlohmann::json tool_call_chunk(const ParsedRequest& r, const std::string& id, int64_t created, int index,
                               const nlohmann::json& entry);
nlohmann::json usage_chunk(const ParsedRequest& r, const std::string& id, int64_t created, const Timings& t);

// JSON text safe for any bytes (invalid UTF-8 replaced).
std::string dump(const nlohmann::json& j);

}  // namespace kvlab::server
