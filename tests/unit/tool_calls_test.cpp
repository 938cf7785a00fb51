// Tool calling's pieces (server/tool_calls.h): the request fields, the
// reply grammar under each tool_choice, and the reply and history forms.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/matcher.h"
#include "server/openai_api.h"
#include "server/tool_call_stream.h"
#include "server/tool_calls.h"

namespace kvlab::server {
namespace {

using ojson = nlohmann::ordered_json;

const ojson kBody = ojson::parse(R"({"tools": [
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "now"}}]})");

ToolRequest tools_with(const char* extra) {
  ojson body = kBody;
  body.update(ojson::parse(extra));
  return parse_tools(body).value();
}

bool matches(const ToolRequest& t, std::string_view text) {
  grammar::Matcher m(tools_grammar(t));
  return m.accept(text) && m.can_end();
}

std::string param_of_error(const char* extra) {
  ojson body = kBody;
  body.update(ojson::parse(extra));
  try {
    parse_tools(body);
  } catch (const ApiException& e) {
    return e.err.param;
  }
  return "";
}

TEST(ToolCalls, GrammarFollowsToolChoice) {
  const ToolRequest required = tools_with(R"({"tool_choice": "required"})");
  EXPECT_TRUE(matches(required, R"(<tool_call>[{"name": "add", "arguments": {"a": 1, "b": 2}}])"));
  EXPECT_TRUE(matches(required, R"(<tool_call>[{"name":"add","arguments":{"a":1,"b":2}}, {"name":"now","arguments":{}}])"));
  EXPECT_FALSE(matches(required, R"(<tool_call>[{"name": "add", "arguments": {"a": 1}}])"));
  EXPECT_FALSE(matches(required, R"(<tool_call>[{"name": "sub", "arguments": {}}])"));
  EXPECT_FALSE(matches(required, "Hello"));
  auto calls = [](int n) {
    std::string out = "<tool_call>[";
    for (int i = 0; i < n; ++i) out += std::string(i ? "," : "") + R"({"name":"now","arguments":{}})";
    return out + "]";
  };
  EXPECT_TRUE(matches(required, calls(kMaxToolCalls)));
  EXPECT_FALSE(matches(required, calls(kMaxToolCalls + 1)));
  const ToolRequest one = tools_with(R"({"tool_choice": "required", "parallel_tool_calls": false})");
  EXPECT_FALSE(matches(one, R"(<tool_call>[{"name":"now","arguments":{}},{"name":"now","arguments":{}}])"));
  const ToolRequest named = tools_with(R"({"tool_choice": {"type": "function", "function": {"name": "now"}}})");
  EXPECT_TRUE(matches(named, R"(<tool_call>[{"name": "now", "arguments": {}}])"));  // no parameters: {}
  EXPECT_FALSE(matches(named, R"(<tool_call>[{"name": "add", "arguments": {"a": 1, "b": 2}}])"));
  const ToolRequest automatic = tools_with("{}");
  EXPECT_TRUE(matches(automatic, "Hello <there>"));
  EXPECT_TRUE(matches(automatic, R"(<tool_call>[{"name": "now", "arguments": {}}])"));
  EXPECT_FALSE(matches(automatic, "<b>bold</b>"));  // text may not start like the marker
  EXPECT_FALSE(parse_tools(ojson::parse(R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})")));
}

TEST(ToolCalls, RepliesAndHistory) {
  const auto calls = tool_calls_of(R"(<tool_call>[{"name": "add", "arguments": {"b": 2, "a": 1}}])");
  ASSERT_TRUE(calls);
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_EQ((*calls)[0]["type"], "function");
  EXPECT_EQ((*calls)[0]["function"]["name"], "add");
  EXPECT_EQ((*calls)[0]["function"]["arguments"], R"({"b": 2, "a": 1})");  // as written
  EXPECT_EQ((*calls)[0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_FALSE(tool_calls_of("plain text"));
  EXPECT_FALSE(tool_calls_of(R"(<tool_call>[{"name": "add", "argu)"));  // cut short
  EXPECT_EQ(render_tool_calls(*calls, "p"), R"(<tool_call>[{"name":"add","arguments":{"b":2,"a":1}}])");
}

// Fed one byte at a time, a stream gives each call's header as soon as its
// name closes, then pieces of arguments that add up to the text as written
// (braces and quotes inside strings do not end them; a scalar ends at the
// first character past it).
TEST(ToolCalls, StreamsHeadersThenArgumentPieces) {
  const std::string reply =
      R"(<tool_call>[{"name": "f", "arguments": {"s": "a}\"]b", "n": [1, {"x": null}]}}, {"name":"g","arguments":42 }])";
  ToolCallStream stream;
  std::vector<nlohmann::json> deltas;
  for (char c : reply) {
    EXPECT_FALSE(stream.done());
    for (nlohmann::json& d : stream.feed(std::string(1, c))) deltas.push_back(std::move(d));
  }
  EXPECT_TRUE(stream.done());
  std::string args[2];
  int headers = 0;
  for (const nlohmann::json& d : deltas) {
    const int i = d["index"].get<int>();
    if (d.contains("id")) {
      EXPECT_EQ(headers++, i);  // a call's header comes before its pieces
      EXPECT_EQ(d["function"]["name"], i == 0 ? "f" : "g");
      EXPECT_EQ(d["type"], "function");
    } else {
      EXPECT_EQ(headers, i + 1);
      args[i] += d["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(args[0], R"({"s": "a}\"]b", "n": [1, {"x": null}]})");
  EXPECT_EQ(args[1], "42");
  ToolCallStream text;
  EXPECT_TRUE(text.feed("<b>").empty());
  EXPECT_TRUE(text.text());
}

TEST(ToolCalls, BadFieldsAreNamed) {
  EXPECT_EQ(param_of_error(R"({"tool_choice": {"type": "function", "function": {"name": "zzz"}}})"), "tool_choice");
  EXPECT_EQ(param_of_error(R"({"tool_choice": "sometimes"})"), "tool_choice");
  EXPECT_EQ(param_of_error(R"({"parallel_tool_calls": "yes"})"), "parallel_tool_calls");
  EXPECT_EQ(param_of_error(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})"), "tools[0].function.name");
  EXPECT_EQ(param_of_error(R"({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]})"),
            "tools");
  EXPECT_EQ(param_of_error(R"({"tools": {}})"), "tools");
}

}  // namespace
}  // namespace kvlab::server
