// The request side of server/openai_api.h: reading and validating the bodies
// of /v1/completions and /v1/chat/completions. parse_request checks the field
// groups in a fixed order, so a body with several bad fields always gets the
// same (first) error.
#include <algorithm>
#include <atomic>
#include <limits>
#include <random>

#include "common/error.h"
#include "server/openai_api.h"
#include "server/output_grammar.h"
#include "server/tool_calls.h"

namespace kvlab::server {

using nlohmann::json;

void fail(std::string message, std::string param, std::string code, int status) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  throw ApiException{e};
}

namespace {

const json* field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number(const json& j, const char* name) {
  const json* f = field(j, name);
  if (!f) return std::nullopt;
  if (!f->is_number()) fail(std::string("'") + name + "' must be a number", name, "invalid_type");
  return f->get<double>();
}

std::optional<int64_t> integer(const json& j, const char* name) {
  const json* f = field(j, name);
  if (!f) return std::nullopt;
  if (f->is_number_float()) {
    const double d = f->get<double>();
    if (d != double(int64_t(d))) fail(std::string("'") + name + "' must be an integer", name, "invalid_type");
    return int64_t(d);
  }
  if (!f->is_number_integer() && !f->is_number_unsigned())
    fail(std::string("'") + name + "' must be an integer", name, "invalid_type");
  if (f->is_number_unsigned() && f->get<uint64_t>() > uint64_t(INT64_MAX))
    fail(std::string("'") + name + "' is out of range", name, "invalid_value");
  return f->get<int64_t>();
}

// --- prompt / messages ---

std::string message_content(const json& c, size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (c.is_null()) return {};
  if (c.is_string()) return c.get<std::string>();
  if (c.is_array()) {
    std::string out;
    for (const json& part : c) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        fail("only text content parts are supported", param, "invalid_type");
      out += part["text"].get<std::string>();
    }
    return out;
  }
  fail("'content' must be a string or an array of text parts", param, "invalid_type");
}

// The function a tool result answers: the earlier call with its id.
std::string called_function(const std::vector<tokenizer::ChatMessage>& earlier, const std::string& id) {
  for (auto m = earlier.rbegin(); m != earlier.rend(); ++m)
    if (m->tool_calls.is_array())
      for (const auto& call : m->tool_calls)
        if (call["id"] == id) return call["function"]["name"].get<std::string>();
  return "";
}

// Message i as the template gets it. With `in_template` tool turns keep
// their structure (server/tool_format.h); otherwise they become plain
// messages the template knows (server/tool_calls.h).
tokenizer::ChatMessage chat_message(const json& msg, size_t i, bool in_template,
                                    const std::vector<tokenizer::ChatMessage>& earlier) {
  const std::string p = "messages[" + std::to_string(i) + "]";
  if (!msg.is_object()) fail(p + " must be an object", p, "invalid_type");
  if (!msg.contains("role") || !msg["role"].is_string()) fail(p + ".role must be a string", p + ".role", "invalid_type");
  std::string role = msg["role"].get<std::string>();
  if (role == "developer") role = "system";
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    fail("unsupported role '" + role + "'", p + ".role", "invalid_value");
  tokenizer::ChatMessage out{role, message_content(msg.contains("content") ? msg["content"] : json(), i)};
  if (role == "assistant" && field(msg, "tool_calls")) {
    if (in_template) out.tool_calls = parse_tool_calls(msg["tool_calls"], p + ".tool_calls");
    else out.content += render_tool_calls(msg["tool_calls"], p + ".tool_calls");
  }
  if (role == "tool") {
    const json* id = field(msg, "tool_call_id");
    if (!id || !id->is_string()) fail(p + ".tool_call_id must be a string", p + ".tool_call_id", "invalid_type");
    if (!in_template) return {"user", "Result of the tool call " + id->get<std::string>() + ": " + out.content};
    out.tool_call_id = id->get<std::string>();
    const json* name = field(msg, "name");
    out.name = name && name->is_string() ? name->get<std::string>() : called_function(earlier, out.tool_call_id);
  }
  return out;
}

std::vector<int32_t> chat_prompt(const json& j, const tokenizer::Tokenizer& tok, const std::optional<ToolRequest>& tools,
                                 const ToolFormat& format) {
  const json* m = field(j, "messages");
  if (!m) fail("'messages' is required", "messages", "missing_required_parameter");
  if (!m->is_array() || m->empty()) fail("'messages' must be a non-empty array", "messages", "invalid_type");
  std::vector<tokenizer::ChatMessage> msgs;
  for (size_t i = 0; i < m->size(); ++i) msgs.push_back(chat_message((*m)[i], i, format.in_template, msgs));
  tokenizer::ChatOptions options;
  if (tools && format.in_template) options.tools = tools->openai;
  else if (tools) add_tools_prompt(*tools, msgs);
  std::string prompt;
  try {
    prompt = tok.apply_chat(msgs, options);
  } catch (const Error& e) {  // the template refused the conversation (raise_exception), or failed on it
    fail(e.what(), "messages", "invalid_value");
  }
  return tok.encode(prompt, true, true);
}

[[noreturn]] void bad_prompt_type() {
  fail("'prompt' must be a string, an array of one string, or an array of token ids", "prompt", "invalid_type");
}

std::vector<int32_t> prompt_ids(const json& p, const tokenizer::Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (const json& t : p) {
    if (!t.is_number_integer() && !t.is_number_unsigned()) bad_prompt_type();
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= tok.n_vocab()) fail("token id " + std::to_string(id) + " is out of range", "prompt", "invalid_value");
    ids.push_back(int32_t(id));
  }
  return ids;
}

std::vector<int32_t> completion_prompt(const json& j, const tokenizer::Tokenizer& tok) {
  const json* p = field(j, "prompt");
  if (!p) fail("'prompt' is required", "prompt", "missing_required_parameter");
  if (p->is_string()) return tok.encode(p->get<std::string>(), true, true);
  if (!p->is_array() || p->empty()) bad_prompt_type();
  if (!(*p)[0].is_string()) return prompt_ids(*p, tok);
  if (p->size() != 1) fail("only one prompt per request is supported", "prompt", "invalid_value");
  return tok.encode((*p)[0].get<std::string>(), true, true);
}

// --- model, n, and what is refused ---

void check_model(const json& j, const std::string& model_id) {
  const json* m = field(j, "model");
  if (!m) return;
  if (!m->is_string()) fail("'model' must be a string", "model", "invalid_type");
  if (!model_matches(m->get<std::string>(), model_id))
    fail("The model '" + m->get<std::string>() + "' does not exist (this server serves '" + model_id + "')", "model",
         "model_not_found", 404);
}

int choice_count(const json& j) {
  int count = 1;
  if (auto n = integer(j, "n")) {
    if (*n < 1 || *n > kMaxChoices)
      fail("'n' must be an integer from 1 to " + std::to_string(kMaxChoices), "n", "invalid_value");
    count = int(*n);
  }
  // Features this server does not implement are refused, not silently ignored.
  if (auto b = integer(j, "best_of"); b && *b != 1) fail("'best_of' is not supported", "best_of", "unsupported_parameter");
  return count;
}

// Tools are for chat; the legacy "functions" not at all.
void refuse_unsupported(Endpoint ep, const json& j) {
  if (const json* sfx = field(j, "suffix"); sfx && !(sfx->is_string() && sfx->get<std::string>().empty()))
    fail("'suffix' is not supported", "suffix", "unsupported_parameter");
  if (const json* f = field(j, "functions"); f && !(f->is_array() && f->empty()))
    fail("'functions' is not supported; 'tools' is", "functions", "unsupported_parameter");
  if (const json* t = field(j, "tools"); t && ep == Endpoint::Completions && !(t->is_array() && t->empty()))
    fail("'tools' is for /v1/chat/completions", "tools", "unsupported_parameter");
}

// The reply's grammar: response_format or `grammar` (server/output_grammar.h),
// or the tool calls' (server/tool_calls.h), from the body parsed again,
// ordered, where a schema may need its properties' order. Sets
// r.tool_format to `format` when there are tools.
std::optional<ToolRequest> constrain(Endpoint ep, const json& j, const std::string& body, const ToolFormat& format,
                                     ParsedRequest& r) {
  if (!j.contains("response_format") && !j.contains("grammar") && !j.contains("tools")) return std::nullopt;
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body);
  r.gen.grammar = output_grammar(ordered);
  std::optional<ToolRequest> tools = ep == Endpoint::Chat ? parse_tools(ordered) : std::nullopt;
  if (!tools) return tools;
  if (r.gen.grammar) fail("'tools' and a JSON response_format or 'grammar' exclude each other", "tools", "invalid_value");
  r.tool_format = &format;
  r.gen.grammar = tools_grammar(*tools, format);
  return tools;
}

// --- echo and logprobs ---

// echo (completions): the prompt comes back ahead of the completion, and
// with logprobs every prompt token is scored (lm-evaluation-harness's
// loglikelihood requests: echo, logprobs, max_tokens 0 or 1).
bool echo_flag(Endpoint ep, const json& j) {
  const bool echo = boolean(j, "echo").value_or(false);
  if (echo && ep == Endpoint::Chat) fail("'echo' is only for /v1/completions", "echo", "unsupported_parameter");
  return echo;
}

// logprobs: completions take how many alternatives (an integer), chat a
// boolean with top_logprobs for the alternatives. At most 20, as vLLM
// allows (OpenAI: 5 for completions, 20 for chat). nullopt: not asked for.
std::optional<int> completion_logprobs(const json& j) {
  const json* lp = field(j, "logprobs");
  if (!lp || (lp->is_boolean() && !lp->get<bool>())) return std::nullopt;
  const auto n = integer(j, "logprobs");
  if (!n || *n < 0 || *n > 20) fail("'logprobs' must be an integer from 0 to 20", "logprobs", "invalid_value");
  return int(*n);
}

std::optional<int> chat_logprobs(const json& j) {
  const bool on = boolean(j, "logprobs").value_or(false);
  const auto top = integer(j, "top_logprobs");
  if (top && (*top < 0 || *top > 20))
    fail("'top_logprobs' must be an integer from 0 to 20", "top_logprobs", "invalid_value");
  if (top && !on) fail("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
  if (!on) return std::nullopt;
  return int(top.value_or(0));
}

// --- streaming ---

void parse_stream(const json& j, ParsedRequest& r) {
  r.stream = boolean(j, "stream").value_or(false);
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) fail("'stream_options' must be an object", "stream_options", "invalid_type");
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }
}

// --- sampling ---

// A count where 0 means off; the bound only keeps it an int.
void set_count(const json& j, const char* name, int& dst) {
  if (auto n = integer(j, name)) {
    if (*n < 0 || *n > (1 << 24)) fail(std::string("'") + name + "' must be >= 0", name, "invalid_value");
    dst = int(*n);
  }
}

void parse_sampling_ranges(const json& j, sample::Params& sp) {
  sp.temperature = float(number(j, "temperature").value_or(1.0));
  if (!(sp.temperature >= 0 && sp.temperature <= 2)) fail("'temperature' must be in [0, 2]", "temperature", "invalid_value");
  sp.top_p = float(number(j, "top_p").value_or(1.0));
  if (!(sp.top_p > 0 && sp.top_p <= 1)) fail("'top_p' must be in (0, 1]", "top_p", "invalid_value");
  // Extensions (llama.cpp-style); defaults as the sampler's.
  set_count(j, "top_k", sp.top_k);
  if (auto v = number(j, "min_p")) {
    if (!(*v >= 0 && *v < 1)) fail("'min_p' must be in [0, 1)", "min_p", "invalid_value");
    sp.min_p = float(*v);
  }
  if (auto v = number(j, "repeat_penalty")) {
    if (!(*v > 0 && *v <= 10)) fail("'repeat_penalty' must be in (0, 10]", "repeat_penalty", "invalid_value");
    sp.repeat_penalty = float(*v);
  }
  set_count(j, "repeat_last_n", sp.repeat_last_n);
  // OpenAI's penalties, in its range.
  for (auto [name, dst] : {std::pair{"frequency_penalty", &sp.frequency_penalty},
                           std::pair{"presence_penalty", &sp.presence_penalty}})
    if (auto v = number(j, name)) {
      if (!(*v >= -2 && *v <= 2)) fail(std::string("'") + name + "' must be in [-2, 2]", name, "invalid_value");
      *dst = float(*v);
    }
}

// One logit_bias entry: {"token id": bias in [-100, 100]}; -100 bans, as OpenAI.
std::pair<int32_t, float> logit_bias_entry(const std::string& key, const json& bias, const tokenizer::Tokenizer& tok) {
  const bool digits = !key.empty() && key.size() <= 9 &&
                      std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  const long id = digits ? std::stol(key) : -1;
  if (id < 0 || id >= tok.n_vocab())
    fail("'logit_bias' key '" + key + "' is not a token id of this model (0.." + std::to_string(tok.n_vocab() - 1) + ")",
         "logit_bias", "invalid_value");
  if (!bias.is_number() || !(bias.get<double>() >= -100 && bias.get<double>() <= 100))
    fail("'logit_bias' values must be numbers in [-100, 100]", "logit_bias", "invalid_value");
  const double b = bias.get<double>();
  return {int32_t(id), b <= -100 ? -std::numeric_limits<float>::infinity() : float(b)};
}

void parse_logit_bias(const json& j, const tokenizer::Tokenizer& tok, sample::Params& sp) {
  const json* lb = field(j, "logit_bias");
  if (!lb) return;
  if (!lb->is_object()) fail("'logit_bias' must be an object of token id -> bias", "logit_bias", "invalid_type");
  for (const auto& [key, bias] : lb->items()) sp.logit_bias.push_back(logit_bias_entry(key, bias, tok));
}

// The request's seed, or else one no other request got.
uint64_t seed(const json& j) {
  if (auto s = integer(j, "seed")) return uint64_t(*s);
  static std::atomic<uint64_t> counter{std::random_device{}()};
  return counter.fetch_add(0x9E3779B97F4A7C15ull);
}

void parse_sampling(const json& j, const tokenizer::Tokenizer& tok, sample::Params& sp) {
  parse_sampling_ranges(j, sp);
  parse_logit_bias(j, tok, sp);
  sp.seed = seed(j);
  try {
    sample::validate(sp);
  } catch (const std::exception& e) {
    fail(e.what(), {}, "invalid_value");
  }
}

// --- stop ---

std::vector<std::string> stop_sequences(const json& j) {
  const json* st = field(j, "stop");
  if (!st) return {};
  std::vector<std::string> stop;
  if (st->is_string()) {
    stop.push_back(st->get<std::string>());
  } else if (st->is_array()) {
    if (st->size() > 4) fail("at most 4 stop sequences are supported", "stop", "invalid_value");
    for (const json& s : *st) {
      if (!s.is_string()) fail("'stop' must be a string or an array of strings", "stop", "invalid_type");
      stop.push_back(s.get<std::string>());
    }
  } else {
    fail("'stop' must be a string or an array of strings", "stop", "invalid_type");
  }
  for (const auto& s : stop)
    if (s.empty()) fail("stop sequences must not be empty", "stop", "invalid_value");
  return stop;
}

// --- limits ---

// max_tokens (chat also takes max_completion_tokens), checked against the
// context; nullopt: not given.
std::optional<int64_t> max_tokens(Endpoint ep, const json& j, bool echo, int n_ctx) {
  std::optional<int64_t> max = integer(j, "max_tokens");
  const char* param = "max_tokens";
  if (!max && ep == Endpoint::Chat) {
    max = integer(j, "max_completion_tokens");
    param = "max_completion_tokens";
  }
  const int min_tokens = echo ? 0 : 1;  // with echo, the prompt alone is an answer
  if (max && (*max < min_tokens || *max > n_ctx))
    fail("'" + std::string(param) + "' must be between " + std::to_string(min_tokens) + " and the context size " +
             std::to_string(n_ctx) + ", got " + std::to_string(*max),
         param, "invalid_value");
  return max;
}

// Checks that the prompt leaves room in the context; returns how many tokens
// may follow it.
int room_after_prompt(Endpoint ep, size_t prompt_size, int n_ctx) {
  const char* prompt_param = ep == Endpoint::Chat ? "messages" : "prompt";
  if (prompt_size == 0) fail("the prompt is empty", prompt_param, "invalid_value");
  const int n_prompt = int(prompt_size);
  if (n_prompt >= n_ctx)
    fail("This model's maximum context length is " + std::to_string(n_ctx) + " tokens. However, your " +
             (ep == Endpoint::Chat ? "messages resulted in " : "prompt has ") + std::to_string(n_prompt) +
             " tokens. Please reduce the length of the " + (ep == Endpoint::Chat ? "messages." : "prompt."),
         prompt_param, "context_length_exceeded");
  return n_ctx - n_prompt;
}

}  // namespace

std::optional<bool> boolean(const json& j, const char* name) {
  const json* f = field(j, name);
  if (!f) return std::nullopt;
  if (!f->is_boolean()) fail(std::string("'") + name + "' must be a boolean", name, "invalid_type");
  return f->get<bool>();
}

bool model_matches(const std::string& name, const std::string& model_id) {
  return name == model_id || name == model_id + ".gguf";
}

json parse_body(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) fail("the request body is not valid JSON", {}, "invalid_json");
  if (!j.is_object()) fail("the request body must be a JSON object", {}, "invalid_type");
  return j;
}

ParsedRequest parse_request(Endpoint ep, const std::string& body, const tokenizer::Tokenizer& tok,
                            const ApiLimits& limits) {
  const json j = parse_body(body);
  ParsedRequest r;
  r.endpoint = ep;
  r.model = limits.model_id;
  check_model(j, limits.model_id);
  r.n = choice_count(j);
  r.gen.echo = echo_flag(ep, j);
  if (auto lp = ep == Endpoint::Completions ? completion_logprobs(j) : chat_logprobs(j)) r.gen.logprobs = *lp;
  refuse_unsupported(ep, j);
  // The model's tool format, which tool turns in the history follow too,
  // with or without tools in this request.
  const ToolFormat& tool_format = ep == Endpoint::Chat ? model_tool_format(tok) : kGenericTools;
  const std::optional<ToolRequest> tools = constrain(ep, j, body, tool_format, r);
  parse_stream(j, r);
  parse_sampling(j, tok, r.gen.sampling);
  r.gen.ignore_eos = boolean(j, "ignore_eos").value_or(false);
  r.gen.stop = stop_sequences(j);
  const std::optional<int64_t> max = max_tokens(ep, j, r.gen.echo, limits.n_ctx);
  r.gen.prompt = ep == Endpoint::Chat ? chat_prompt(j, tok, tools, tool_format) : completion_prompt(j, tok);
  const int room = room_after_prompt(ep, r.gen.prompt.size(), limits.n_ctx);
  // OpenAI's completions default is 16; chat runs to the end of the context.
  r.gen.max_tokens = int(std::min<int64_t>(max.value_or(ep == Endpoint::Chat ? room : 16), room));
  return r;
}

}  // namespace kvlab::server
