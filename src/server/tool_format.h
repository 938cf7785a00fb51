// How a reply writes tool calls. kvlab's generic format serves every model
// whose chat template has no tool syntax of its own; a model trained on one
// (its template shows how to call) gets its own, so that the template can
// describe the tools and the history the way the model saw in training.
// One descriptor drives the grammar (server/tool_calls.cpp), the parser and
// the stream (server/tool_call_stream.h):
//
//   open  call_open {"name": N, "<arguments_key>": A} call_close
//        (separator call_open {...} call_close)*  close
//
// No literal holds '{', so the first '{' after a literal always opens a call.
#pragma once
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace kvlab::server {

struct ToolFormat {
  std::string_view name;           // as docs/serving.md calls it
  std::string_view open;           // before the first call
  std::string_view call_open;      // before each call
  std::string_view call_close;     // after each call
  std::string_view separator;      // between calls
  std::string_view close;          // after the last call
  std::string_view arguments_key;  // the call's key for its arguments
  int max_calls;                   // calls in one reply at most
  // The chat template renders the tools and the tool turns itself; the
  // generic format adds a system-prompt section and flattens them instead.
  bool in_template;

  // The text up to the first call's '{': a reply that starts otherwise is text.
  std::string opening() const { return std::string(open) + std::string(call_open) + "{"; }
};

// Calls in one reply at most: a small model can repeat a call without end
// rather than stop.
inline constexpr int kMaxToolCalls = 8;

// kvlab's own: <tool_call>[{"name": ..., "arguments": {...}}, ...].
inline constexpr ToolFormat kGenericTools{"generic", "<tool_call>[", "", "", ",", "]", "arguments", kMaxToolCalls, false};
// Hermes 2 Pro, Qwen 2.5 and Qwen 3: one XML-tagged block per call,
// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>.
inline constexpr ToolFormat kHermesTools{"hermes", "", "<tool_call>\n", "\n</tool_call>", "\n", "", "arguments",
                                         kMaxToolCalls, true};
// Llama 3.1-3.3's JSON tool calls: {"name": ..., "parameters": {...}}, one
// per reply (their templates refuse a turn with more).
inline constexpr ToolFormat kLlama3Tools{"llama3", "", "", "", "", "", "parameters", 1, true};

// The format of the model's chat template, recognised from the call syntax
// it shows the model; kGenericTools for a template without tools or with a
// syntax kvlab does not write (Mistral's, Command R's, ...).
const ToolFormat& model_tool_format(const tokenizer::Tokenizer& tok);

}  // namespace kvlab::server
