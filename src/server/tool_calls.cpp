#include "server/tool_calls.h"

#include <set>

#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "server/openai_api.h"
#include "server/tool_call_stream.h"

namespace kvlab::server {
namespace {

using ojson = nlohmann::ordered_json;
using nlohmann::json;

// OpenAI's rule for function names.
bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!std::isalnum(uint8_t(c)) && c != '_' && c != '-') return false;
  return true;
}

// The function as a template reads it: OpenAI's shape, parameters given.
ojson openai_tool(const ToolRequest::Function& f) {
  ojson function = {{"name", f.name}};
  if (!f.description.empty()) function["description"] = f.description;
  function["parameters"] = f.parameters;
  if (function["parameters"] == ojson{{"type", "object"}}) function["parameters"]["properties"] = ojson::object();
  return {{"type", "function"}, {"function", std::move(function)}};
}

ToolRequest::Function parse_function(const ojson& tool, size_t i) {
  const std::string p = "tools[" + std::to_string(i) + "]";
  if (!tool.is_object() || tool.value("type", "function") != "function" || !tool.contains("function") ||
      !tool["function"].is_object())
    fail(p + " must be {\"type\": \"function\", \"function\": {...}}", p, "invalid_type");
  const ojson& f = tool["function"];
  ToolRequest::Function out;
  if (!f.contains("name") || !f["name"].is_string() || !valid_name(out.name = f["name"].get<std::string>()))
    fail(p + ".function.name must be 1-64 letters, digits, '_' or '-'", p + ".function.name", "invalid_value");
  if (f.contains("description") && f["description"].is_string()) out.description = f["description"].get<std::string>();
  out.parameters = f.contains("parameters") && !f["parameters"].is_null() ? f["parameters"] : ojson{{"type", "object"}};
  if (f.contains("strict") && f["strict"].is_boolean()) out.strict = f["strict"].get<bool>();
  return out;
}

// tool_choice: "auto", "required", or one named function; false for "none".
bool parse_choice(const ojson& body, ToolRequest& t) {
  const auto c = body.find("tool_choice");
  if (c == body.end() || c->is_null() || *c == "auto") return true;
  if (*c == "none") return false;
  if (*c == "required") {
    t.choice = ToolRequest::Choice::Required;
    return true;
  }
  if (!c->is_object() || !c->contains("function") || !(*c)["function"].is_object() ||
      !(*c)["function"].contains("name") || !(*c)["function"]["name"].is_string())
    fail("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}",
         "tool_choice", "invalid_value");
  t.choice = ToolRequest::Choice::Named;
  t.named = (*c)["function"]["name"].get<std::string>();
  for (const auto& f : t.functions)
    if (f.name == t.named) return true;
  fail("'tool_choice' names '" + t.named + "', which is not in 'tools'", "tool_choice", "invalid_value");
}

// A GBNF literal and a space, or nothing for an empty text.
std::string literal(std::string_view text) {
  return text.empty() ? "" : grammar::gbnf_literal(text) + " ";
}

std::shared_ptr<const grammar::Grammar> compile(const std::string& gbnf) {
  try {
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
  } catch (const Error& e) {
    fail(e.what(), "tools", "invalid_value");
  }
}

}  // namespace

std::optional<ToolRequest> parse_tools(const ojson& body) {
  const auto tools = body.find("tools");
  if (tools == body.end() || tools->is_null() || (tools->is_array() && tools->empty())) return std::nullopt;
  if (!tools->is_array()) fail("'tools' must be an array", "tools", "invalid_type");
  ToolRequest t;
  std::set<std::string> names;
  for (size_t i = 0; i < tools->size(); ++i) {
    t.functions.push_back(parse_function((*tools)[i], i));
    t.openai.push_back(openai_tool(t.functions.back()));
    if (!names.insert(t.functions.back().name).second)
      fail("two tools are named '" + t.functions.back().name + "'", "tools", "invalid_value");
  }
  if (!parse_choice(body, t)) return std::nullopt;
  if (const auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) fail("'parallel_tool_calls' must be a boolean", "parallel_tool_calls", "invalid_type");
    t.parallel = p->get<bool>();
  }
  return t;
}

std::string tools_prompt(const ToolRequest& t) {
  std::string out = "You can call these functions:\n";
  for (const auto& f : t.functions) {
    out += "- " + f.name + (f.description.empty() ? "" : ": " + f.description) + "\n";
    out += "  arguments (JSON schema): " + f.parameters.dump() + "\n";
  }
  // kGenericTools in words.
  out += "To call functions, reply with <tool_call> and a JSON array of calls, each {\"name\": function name, "
         "\"arguments\": {...}}, and nothing else";
  out += t.parallel ? ".\n" : " (one call at a time).\n";
  if (t.choice == ToolRequest::Choice::Auto) out += "If no function is needed, answer in plain text.";
  if (t.choice == ToolRequest::Choice::Required) out += "You must call at least one function.";
  if (t.choice == ToolRequest::Choice::Named) out += "You must call " + t.named + ".";
  return out;
}

void add_tools_prompt(const ToolRequest& t, std::vector<tokenizer::ChatMessage>& messages) {
  if (!messages.empty() && messages.front().role == "system") {
    messages.front().content += "\n\n" + tools_prompt(t);
    return;
  }
  messages.insert(messages.begin(), {"system", tools_prompt(t)});
}

std::shared_ptr<const grammar::Grammar> tools_grammar(const ToolRequest& t, const ToolFormat& format) {
  std::string rules, calls;
  for (size_t i = 0; i < t.functions.size(); ++i) {
    const ToolRequest::Function& f = t.functions[i];
    if (t.choice == ToolRequest::Choice::Named && f.name != t.named) continue;
    const std::string args = "tool-" + std::to_string(i);
    try {
      grammar::json_schema_rules(f.parameters, f.strict, args, rules);
    } catch (const Error& e) {
      fail(e.what(), "tools[" + std::to_string(i) + "].function.parameters", "invalid_value");
    }
    calls += (calls.empty() ? "" : " | ") + grammar::gbnf_literal(json(f.name).dump()) + " schema-ws \",\" schema-ws " +
             literal(json(format.arguments_key).dump()) + "schema-ws \":\" schema-ws " + args;
  }
  std::string gbnf = "tool-call ::= " + literal(format.call_open) + "\"{\" schema-ws " +
                     grammar::gbnf_literal("\"name\"") + " schema-ws \":\" schema-ws (" + calls + ") schema-ws \"}\" " +
                     literal(format.call_close) + "\n";
  const int max_calls = t.parallel ? format.max_calls : 1;
  gbnf += "tool-calls ::= " + literal(format.open) + "tool-call" +
          (max_calls > 1 ? " (" + literal(format.separator) + "schema-ws tool-call){0," + std::to_string(max_calls - 1) + "} "
                         : " ") +
          literal(format.close) + "\n";
  // Under auto, plain text may not start as a call does.
  gbnf += t.choice == ToolRequest::Choice::Auto ? "root ::= tool-calls | [^" + format.opening().substr(0, 1) + "] .*\n"
                                                : "root ::= tool-calls\n";
  return compile(gbnf + rules + grammar::schema_shared_rules());
}

std::optional<json> tool_calls_of(const std::string& reply, const ToolFormat& format) {
  ToolCallStream stream(format);
  const std::vector<json> deltas = stream.feed(reply);
  if (!stream.done()) return std::nullopt;
  json calls = json::array();
  for (const json& d : deltas) {
    if (d.contains("id")) {
      calls.push_back({{"id", d["id"]}, {"type", "function"}, {"function", d["function"]}});
    } else {
      std::string& args = calls.back()["function"]["arguments"].get_ref<std::string&>();
      args += d["function"]["arguments"].get<std::string>();
    }
  }
  return calls;
}

ojson parse_tool_calls(const json& tool_calls, const std::string& param) {
  if (!tool_calls.is_array()) fail(param + " must be an array", param, "invalid_type");
  ojson calls = ojson::array();
  for (const json& c : tool_calls) {
    const json* f = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string() || !f->contains("arguments") ||
        !(*f)["arguments"].is_string())
      fail(param + " entries must have function.name and function.arguments strings", param, "invalid_type");
    const ojson args = ojson::parse((*f)["arguments"].get<std::string>(), nullptr, false);
    if (args.is_discarded()) fail(param + ": function.arguments must be JSON text", param, "invalid_value");
    calls.push_back({{"id", c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : ""},
                     {"type", "function"},
                     {"function", {{"name", (*f)["name"].get<std::string>()}, {"arguments", args}}}});
  }
  return calls;
}

std::string render_tool_calls(const json& tool_calls, const std::string& param) {
  std::string calls;
  for (const ojson& c : parse_tool_calls(tool_calls, param)) {
    if (!calls.empty()) calls += kGenericTools.separator;
    calls += ojson{{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}}.dump();
  }
  return std::string(kGenericTools.open) + calls + std::string(kGenericTools.close);
}

}  // namespace kvlab::server
