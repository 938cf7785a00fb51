// Tool calling's pieces (server/tool_calls.h): the request fields, the
// reply grammar of each format (server/tool_format.h) under each
// tool_choice, the reply and history forms, and the prompt a model's own
// template renders.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "gguf/file.h"
#include "grammar/matcher.h"
#include "server/openai_api.h"
#include "server/tool_call_stream.h"
#include "server/tool_calls.h"
#include "tokenizer/gguf_vocab.h"

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

bool matches(const ToolRequest& t, std::string_view text, const ToolFormat& format = kGenericTools) {
  grammar::Matcher m(tools_grammar(t, format));
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

struct StreamedCall {
  std::string name, arguments;
};

// `reply` fed to a stream one byte at a time: each call's header comes
// before its pieces, and the stream is done at the end.
std::vector<StreamedCall> streamed(const std::string& reply, const ToolFormat& format) {
  ToolCallStream stream(format);
  std::vector<StreamedCall> calls;
  for (char c : reply) {
    for (const nlohmann::json& d : stream.feed(std::string(1, c))) {
      const size_t i = d["index"].get<size_t>();
      if (d.contains("id")) {
        EXPECT_EQ(calls.size(), i);
        EXPECT_EQ(d["type"], "function");
        EXPECT_EQ(d["id"].get<std::string>().rfind("call_", 0), 0u);
        calls.push_back({d["function"]["name"].get<std::string>(), ""});
      } else {
        EXPECT_EQ(calls.size(), i + 1);
        calls[i].arguments += d["function"]["arguments"].get<std::string>();
      }
    }
  }
  EXPECT_TRUE(stream.done());
  return calls;
}

// Fed one byte at a time, a stream gives each call's header as soon as its
// name closes, then pieces of arguments that add up to the text as written
// (braces and quotes inside strings do not end them; a scalar ends at the
// first character past it).
TEST(ToolCalls, StreamsHeadersThenArgumentPieces) {
  const std::vector<StreamedCall> calls = streamed(
      R"(<tool_call>[{"name": "f", "arguments": {"s": "a}\"]b", "n": [1, {"x": null}]}}, {"name":"g","arguments":42 }])",
      kGenericTools);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "f");
  EXPECT_EQ(calls[0].arguments, R"({"s": "a}\"]b", "n": [1, {"x": null}]})");
  EXPECT_EQ(calls[1].name, "g");
  EXPECT_EQ(calls[1].arguments, "42");
  ToolCallStream text;
  EXPECT_TRUE(text.feed("<b>").empty());
  EXPECT_TRUE(text.text());
}

const std::string kHermesAdd = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>";
const std::string kHermesNow = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
const std::string kLlamaAdd = R"({"name": "add", "parameters": {"a": 1, "b": 2}})";

// Hermes 2 Pro and Qwen: a tagged block per call, arguments valid against
// the function's schema, as many blocks as parallel_tool_calls allows.
TEST(ToolCalls, HermesGrammarWantsTaggedBlocksOfValidCalls) {
  const ToolRequest required = tools_with(R"({"tool_choice": "required"})");
  EXPECT_TRUE(matches(required, kHermesAdd, kHermesTools));
  EXPECT_TRUE(matches(required, kHermesAdd + "\n" + kHermesNow, kHermesTools));
  EXPECT_FALSE(matches(required, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": \"1\", \"b\": 2}}\n</tool_call>",
                       kHermesTools));
  EXPECT_FALSE(matches(required, R"(<tool_call>[{"name": "add", "arguments": {"a": 1, "b": 2}}])", kHermesTools));
  EXPECT_FALSE(matches(required, "Hello", kHermesTools));
  const ToolRequest one = tools_with(R"({"tool_choice": "required", "parallel_tool_calls": false})");
  EXPECT_TRUE(matches(one, kHermesNow, kHermesTools));
  EXPECT_FALSE(matches(one, kHermesAdd + "\n" + kHermesNow, kHermesTools));
  const ToolRequest named = tools_with(R"({"tool_choice": {"type": "function", "function": {"name": "now"}}})");
  EXPECT_TRUE(matches(named, kHermesNow, kHermesTools));
  EXPECT_FALSE(matches(named, kHermesAdd, kHermesTools));
  const ToolRequest automatic = tools_with("{}");
  EXPECT_TRUE(matches(automatic, kHermesAdd, kHermesTools));
  EXPECT_TRUE(matches(automatic, "Hello <b>", kHermesTools));
  EXPECT_FALSE(matches(automatic, "<b>", kHermesTools));
}

// Llama 3.x: one bare JSON call per reply, its arguments under "parameters".
TEST(ToolCalls, Llama3GrammarWantsOneCallWithParameters) {
  const ToolRequest automatic = tools_with("{}");
  EXPECT_TRUE(matches(automatic, kLlamaAdd, kLlama3Tools));
  EXPECT_FALSE(matches(automatic, R"({"name": "add", "arguments": {"a": 1, "b": 2}})", kLlama3Tools));
  EXPECT_FALSE(matches(automatic, R"({"name": "add", "parameters": {"a": 1.5, "b": 2}})", kLlama3Tools));
  EXPECT_FALSE(matches(automatic, kLlamaAdd + kLlamaAdd, kLlama3Tools));
  EXPECT_FALSE(matches(automatic, kLlamaAdd + "," + kLlamaAdd, kLlama3Tools));
  EXPECT_TRUE(matches(automatic, "Hi {x}", kLlama3Tools));
  EXPECT_FALSE(matches(automatic, "{x}", kLlama3Tools));
  const ToolRequest required = tools_with(R"({"tool_choice": "required"})");
  EXPECT_FALSE(matches(required, "Hi", kLlama3Tools));
  const ToolRequest named = tools_with(R"({"tool_choice": {"type": "function", "function": {"name": "now"}}})");
  EXPECT_TRUE(matches(named, R"({"name": "now", "parameters": {}})", kLlama3Tools));
  EXPECT_FALSE(matches(named, kLlamaAdd, kLlama3Tools));
}

// A reply in the model's format becomes OpenAI's tool_calls: new ids, the
// names, and the arguments' text as written; whole or streamed alike.
TEST(ToolCalls, ModelFormatRepliesBecomeOpenAIToolCalls) {
  const auto calls = tool_calls_of(kHermesAdd + "\n" + kHermesNow, kHermesTools);
  ASSERT_TRUE(calls);
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0]["function"]["name"], "add");
  EXPECT_EQ((*calls)[0]["function"]["arguments"], R"({"a": 1, "b": 2})");
  EXPECT_EQ((*calls)[1]["function"]["name"], "now");
  EXPECT_EQ((*calls)[1]["function"]["arguments"], "{}");
  EXPECT_NE((*calls)[0]["id"], (*calls)[1]["id"]);
  EXPECT_FALSE(tool_calls_of(kHermesAdd.substr(0, kHermesAdd.size() - 3), kHermesTools));  // cut short
  EXPECT_FALSE(tool_calls_of("Hello", kHermesTools));
  const auto llama = tool_calls_of(kLlamaAdd, kLlama3Tools);
  ASSERT_TRUE(llama);
  ASSERT_EQ(llama->size(), 1u);
  EXPECT_EQ((*llama)[0]["function"]["arguments"], R"({"a": 1, "b": 2})");
  EXPECT_FALSE(tool_calls_of("Hi {x}", kLlama3Tools));
  ToolCallStream text(kLlama3Tools);
  EXPECT_TRUE(text.feed("Hi").empty());
  EXPECT_TRUE(text.text());

  const std::vector<StreamedCall> hermes = streamed(kHermesAdd + "\n" + kHermesNow, kHermesTools);
  ASSERT_EQ(hermes.size(), 2u);
  EXPECT_EQ(hermes[1].name, "now");
  EXPECT_EQ(hermes[0].arguments, R"({"a": 1, "b": 2})");
  const std::vector<StreamedCall> one = streamed(kLlamaAdd, kLlama3Tools);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "add");
  EXPECT_EQ(one[0].arguments, R"({"a": 1, "b": 2})");
}

std::string read_source(const std::string& path) {
  std::ifstream in(std::string(KVLAB_SOURCE_DIR) + "/" + path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// stories260K's vocabulary with a committed chat template.
std::unique_ptr<tokenizer::Tokenizer> tokenizer_with(const std::string& chat_template) {
  tokenizer::Vocab v =
      tokenizer::vocab_from_gguf(gguf::File::open(std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf"));
  v.chat_template = read_source("tests/data/chat_templates/" + chat_template);
  EXPECT_FALSE(v.chat_template.empty()) << chat_template;
  return tokenizer::Tokenizer::create(std::move(v));
}

TEST(ToolCalls, TemplatesWithToolSyntaxGetTheirFormat) {
  const std::vector<std::pair<std::string, std::string_view>> expected = {
      {"qwen2.5-instruct.jinja", "hermes"},
      {"qwen3-0.6b-generation-block.jinja", "hermes"},
      {"hermes-2-pro-tools-vllm.jinja", "hermes"},
      {"llama-3.2-instruct-tools-vllm.jinja", "llama3"},
      {"mistral-small-3.1-24b-instruct-2503.jinja", "generic"},  // tools, in a syntax kvlab does not write
      {"command-r7b-12-2024-tool-use.jinja", "generic"},
      {"smollm2-135m-instruct.jinja", "generic"},  // no tools
      {"gemma-3-it.jinja", "generic"},
  };
  for (const auto& e : expected) EXPECT_EQ(model_tool_format(*tokenizer_with(e.first)).name, e.second) << e.first;
}

// The cases of conversations.json's with tools, which
// tests/tools/check_chat_templates.py renders with jinja2 as transformers
// does: the tool calls' arguments as objects, a tool result naming its
// function.
std::vector<ojson> tool_conversations() {
  std::vector<ojson> out;
  for (const ojson& c : ojson::parse(read_source("tests/data/chat_templates/conversations.json")))
    if (c["name"] == "tools_listed" || c["name"] == "tool_call_dict_args") out.push_back(c);
  EXPECT_EQ(out.size(), 2u);
  return out;
}

// An OpenAI request carrying such a conversation: arguments as JSON text,
// the tool result without the function's name.
std::string openai_body(const ojson& conversation) {
  ojson body = {{"messages", conversation["messages"]}, {"tools", conversation["tools"]}};
  for (ojson& m : body["messages"]) {
    if (m.contains("tool_calls"))
      for (ojson& call : m["tool_calls"]) call["function"]["arguments"] = call["function"]["arguments"].dump();
    m.erase("name");
  }
  return body.dump();
}

std::vector<tokenizer::ChatMessage> chat_messages(const ojson& conversation) {
  std::vector<tokenizer::ChatMessage> out;
  for (const ojson& m : conversation["messages"]) {
    tokenizer::ChatMessage msg(m["role"].get<std::string>(), m["content"].is_string() ? m["content"].get<std::string>() : "");
    msg.tool_calls = m.value("tool_calls", ojson());
    msg.tool_call_id = m.value("tool_call_id", "");
    msg.name = m.value("name", "");
    out.push_back(std::move(msg));
  }
  return out;
}

// The prompt of a request, or the error's message.
std::string prompt_of(const std::string& body, const tokenizer::Tokenizer& tok) {
  try {
    return tok.decode(parse_request(Endpoint::Chat, body, tok, {"m", 4096}).gen.prompt);
  } catch (const ApiException& e) {
    return "error: " + e.err.message;
  }
}

// Where the template has tool syntax, the request's tools and tool turns
// reach it as transformers passes them, so the prompt is what jinja2
// renders (tests/tools/check_chat_templates.py), and a conversation the
// template refuses (Llama 3.2's iterates content, which is null in a turn
// that only calls tools) is a 400 as it is an error there.
TEST(ToolCalls, ModelTemplatesRenderToolTurnsThemselves) {
  for (const ojson& conversation : tool_conversations()) {
    tokenizer::ChatOptions options;
    options.tools = conversation["tools"];
    for (const char* name : {"qwen2.5-instruct.jinja", "qwen3-0.6b-generation-block.jinja",
                             "hermes-2-pro-tools-vllm.jinja", "llama-3.2-instruct-tools-vllm.jinja"}) {
      const auto tok = tokenizer_with(name);
      std::string want;
      try {
        want = tok->decode(tok->encode(tok->apply_chat(chat_messages(conversation), options), true, true));
      } catch (const Error& e) {
        want = std::string("error: ") + e.what();
      }
      EXPECT_EQ(prompt_of(openai_body(conversation), *tok), want) << name << " / " << conversation["name"];
    }
  }
  const auto generic = tokenizer_with("smollm2-135m-instruct.jinja");
  const std::string flat = prompt_of(openai_body(tool_conversations()[1]), *generic);
  EXPECT_NE(flat.find("You can call these functions"), std::string::npos);
  EXPECT_NE(flat.find(R"(<tool_call>[{"name":"get_weather","arguments":{"city":"Paris","days":2}}])"), std::string::npos);
  EXPECT_NE(flat.find("Result of the tool call call_abc123xyz: "), std::string::npos);
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
