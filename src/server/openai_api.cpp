#include "server/openai_api.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

namespace kvlab::server {

using nlohmann::json;

json ApiError::body() const {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return json{{"error", e}};
}

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

std::vector<int32_t> prompt_tokens(Endpoint ep, const json& j, const tokenizer::Tokenizer& tok) {
  if (ep == Endpoint::Chat) {
    const json* m = field(j, "messages");
    if (!m) fail("'messages' is required", "messages", "missing_required_parameter");
    if (!m->is_array() || m->empty()) fail("'messages' must be a non-empty array", "messages", "invalid_type");
    std::vector<tokenizer::ChatMessage> msgs;
    for (size_t i = 0; i < m->size(); ++i) {
      const json& msg = (*m)[i];
      const std::string p = "messages[" + std::to_string(i) + "]";
      if (!msg.is_object()) fail(p + " must be an object", p, "invalid_type");
      if (!msg.contains("role") || !msg["role"].is_string()) fail(p + ".role must be a string", p + ".role", "invalid_type");
      std::string role = msg["role"].get<std::string>();
      if (role == "developer") role = "system";
      if (role != "system" && role != "user" && role != "assistant")
        fail("unsupported role '" + role + "'", p + ".role", "invalid_value");
      msgs.push_back({role, message_content(msg.contains("content") ? msg["content"] : json(), i)});
    }
    return tok.encode(tok.apply_chat(msgs), true, true);
  }
  const json* p = field(j, "prompt");
  if (!p) fail("'prompt' is required", "prompt", "missing_required_parameter");
  if (p->is_string()) return tok.encode(p->get<std::string>(), true, true);
  if (p->is_array() && !p->empty()) {
    if ((*p)[0].is_string()) {
      if (p->size() != 1) fail("only one prompt per request is supported", "prompt", "invalid_value");
      return tok.encode((*p)[0].get<std::string>(), true, true);
    }
    std::vector<int32_t> ids;
    for (const json& t : *p) {
      if (!t.is_number_integer() && !t.is_number_unsigned())
        fail("'prompt' must be a string, an array of one string, or an array of token ids", "prompt", "invalid_type");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= tok.n_vocab()) fail("token id " + std::to_string(id) + " is out of range", "prompt", "invalid_value");
      ids.push_back(int32_t(id));
    }
    return ids;
  }
  fail("'prompt' must be a string, an array of one string, or an array of token ids", "prompt", "invalid_type");
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
  if (const json* m = field(j, "model")) {
    if (!m->is_string()) fail("'model' must be a string", "model", "invalid_type");
    if (!model_matches(m->get<std::string>(), limits.model_id))
      fail("The model '" + m->get<std::string>() + "' does not exist (this server serves '" + limits.model_id + "')",
           "model", "model_not_found", 404);
  }
  if (auto n = integer(j, "n")) {
    if (*n < 1 || *n > kMaxChoices)
      fail("'n' must be an integer from 1 to " + std::to_string(kMaxChoices), "n", "invalid_value");
    r.n = int(*n);
  }
  // Features this server does not implement are refused, not silently ignored.
  if (auto b = integer(j, "best_of"); b && *b != 1) fail("'best_of' is not supported", "best_of", "unsupported_parameter");
  // echo (completions): the prompt comes back ahead of the completion, and
  // with logprobs every prompt token is scored (lm-evaluation-harness's
  // loglikelihood requests: echo, logprobs, max_tokens 0 or 1).
  r.gen.echo = boolean(j, "echo").value_or(false);
  if (r.gen.echo && ep == Endpoint::Chat)
    fail("'echo' is only for /v1/completions", "echo", "unsupported_parameter");
  // logprobs: completions take how many alternatives (an integer), chat a
  // boolean with top_logprobs for the alternatives. At most 20, as vLLM
  // allows (OpenAI: 5 for completions, 20 for chat).
  if (ep == Endpoint::Completions) {
    if (const json* lp = field(j, "logprobs"); lp && !(lp->is_boolean() && !lp->get<bool>())) {
      const auto n = integer(j, "logprobs");
      if (!n || *n < 0 || *n > 20) fail("'logprobs' must be an integer from 0 to 20", "logprobs", "invalid_value");
      r.gen.logprobs = int(*n);
    }
  } else {
    const bool on = boolean(j, "logprobs").value_or(false);
    const auto top = integer(j, "top_logprobs");
    if (top && (*top < 0 || *top > 20))
      fail("'top_logprobs' must be an integer from 0 to 20", "top_logprobs", "invalid_value");
    if (top && !on) fail("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
    if (on) r.gen.logprobs = int(top.value_or(0));
  }
  if (const json* sfx = field(j, "suffix"); sfx && !(sfx->is_string() && sfx->get<std::string>().empty()))
    fail("'suffix' is not supported", "suffix", "unsupported_parameter");
  for (const char* name : {"tools", "functions"})
    if (const json* t = field(j, name); t && !(t->is_array() && t->empty()))
      fail(std::string("'") + name + "' (tool calling) is not supported", name, "unsupported_parameter");
  // response_format: "text", or OpenAI's JSON mode (the reply is one JSON
  // object: sample/json_mode.h). Structured outputs against a schema are not
  // implemented.
  if (const json* rf = field(j, "response_format")) {
    const json* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (!type || !type->is_string())
      fail("'response_format' must be an object with a string 'type'", "response_format", "invalid_type");
    const std::string t = type->get<std::string>();
    if (t == "json_object") r.gen.json_object = true;
    else if (t == "json_schema")
      fail("response_format json_schema is not supported; json_object (JSON mode) is", "response_format",
           "unsupported_parameter");
    else if (t != "text")
      fail("response_format type must be text or json_object, got '" + t + "'", "response_format", "invalid_value");
  }
  r.stream = boolean(j, "stream").value_or(false);
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) fail("'stream_options' must be an object", "stream_options", "invalid_type");
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }

  sample::Params& sp = r.gen.sampling;
  sp.temperature = float(number(j, "temperature").value_or(1.0));
  if (!(sp.temperature >= 0 && sp.temperature <= 2)) fail("'temperature' must be in [0, 2]", "temperature", "invalid_value");
  sp.top_p = float(number(j, "top_p").value_or(1.0));
  if (!(sp.top_p > 0 && sp.top_p <= 1)) fail("'top_p' must be in (0, 1]", "top_p", "invalid_value");
  // Extensions (llama.cpp-style); defaults as the sampler's.
  if (auto k = integer(j, "top_k")) {
    if (*k < 0 || *k > (1 << 24)) fail("'top_k' must be >= 0", "top_k", "invalid_value");
    sp.top_k = int(*k);
  }
  if (auto v = number(j, "min_p")) {
    if (!(*v >= 0 && *v < 1)) fail("'min_p' must be in [0, 1)", "min_p", "invalid_value");
    sp.min_p = float(*v);
  }
  if (auto v = number(j, "repeat_penalty")) {
    if (!(*v > 0 && *v <= 10)) fail("'repeat_penalty' must be in (0, 10]", "repeat_penalty", "invalid_value");
    sp.repeat_penalty = float(*v);
  }
  if (auto n = integer(j, "repeat_last_n")) {
    if (*n < 0 || *n > (1 << 24)) fail("'repeat_last_n' must be >= 0", "repeat_last_n", "invalid_value");
    sp.repeat_last_n = int(*n);
  }
  // OpenAI's penalties, in its range.
  for (auto [name, dst] : {std::pair{"frequency_penalty", &sp.frequency_penalty},
                           std::pair{"presence_penalty", &sp.presence_penalty}})
    if (auto v = number(j, name)) {
      if (!(*v >= -2 && *v <= 2)) fail(std::string("'") + name + "' must be in [-2, 2]", name, "invalid_value");
      *dst = float(*v);
    }
  // logit_bias: {"token id": bias in [-100, 100]}; -100 bans, as OpenAI.
  if (const json* lb = field(j, "logit_bias")) {
    if (!lb->is_object()) fail("'logit_bias' must be an object of token id -> bias", "logit_bias", "invalid_type");
    for (const auto& [key, bias] : lb->items()) {
      const bool digits = !key.empty() && key.size() <= 9 &&
                          std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      const long id = digits ? std::stol(key) : -1;
      if (id < 0 || id >= tok.n_vocab())
        fail("'logit_bias' key '" + key + "' is not a token id of this model (0.." + std::to_string(tok.n_vocab() - 1) +
                 ")", "logit_bias", "invalid_value");
      if (!bias.is_number() || !(bias.get<double>() >= -100 && bias.get<double>() <= 100))
        fail("'logit_bias' values must be numbers in [-100, 100]", "logit_bias", "invalid_value");
      const double b = bias.get<double>();
      sp.logit_bias.push_back({int32_t(id), b <= -100 ? -std::numeric_limits<float>::infinity() : float(b)});
    }
  }
  if (auto s = integer(j, "seed")) {
    sp.seed = uint64_t(*s);
  } else {
    static std::atomic<uint64_t> counter{std::random_device{}()};
    sp.seed = counter.fetch_add(0x9E3779B97F4A7C15ull);
  }
  try {
    sample::validate(sp);
  } catch (const std::exception& e) {
    fail(e.what(), {}, "invalid_value");
  }
  r.gen.ignore_eos = boolean(j, "ignore_eos").value_or(false);

  if (const json* st = field(j, "stop")) {
    if (st->is_string()) {
      r.gen.stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      if (st->size() > 4) fail("at most 4 stop sequences are supported", "stop", "invalid_value");
      for (const json& s : *st) {
        if (!s.is_string()) fail("'stop' must be a string or an array of strings", "stop", "invalid_type");
        r.gen.stop.push_back(s.get<std::string>());
      }
    } else {
      fail("'stop' must be a string or an array of strings", "stop", "invalid_type");
    }
    for (const auto& s : r.gen.stop)
      if (s.empty()) fail("stop sequences must not be empty", "stop", "invalid_value");
  }

  std::optional<int64_t> max_tokens = integer(j, "max_tokens");
  const char* max_param = "max_tokens";
  if (!max_tokens && ep == Endpoint::Chat) {
    max_tokens = integer(j, "max_completion_tokens");
    max_param = "max_completion_tokens";
  }
  const int min_tokens = r.gen.echo ? 0 : 1;  // with echo, the prompt alone is an answer
  if (max_tokens && (*max_tokens < min_tokens || *max_tokens > limits.n_ctx))
    fail("'" + std::string(max_param) + "' must be between " + std::to_string(min_tokens) + " and the context size " +
             std::to_string(limits.n_ctx) +
             ", got " + std::to_string(*max_tokens),
         max_param, "invalid_value");

  r.gen.prompt = prompt_tokens(ep, j, tok);
  const char* prompt_param = ep == Endpoint::Chat ? "messages" : "prompt";
  if (r.gen.prompt.empty()) fail("the prompt is empty", prompt_param, "invalid_value");
  const int n_prompt = int(r.gen.prompt.size());
  if (n_prompt >= limits.n_ctx)
    fail("This model's maximum context length is " + std::to_string(limits.n_ctx) + " tokens. However, your " +
             (ep == Endpoint::Chat ? "messages resulted in " : "prompt has ") + std::to_string(n_prompt) +
             " tokens. Please reduce the length of the " + (ep == Endpoint::Chat ? "messages." : "prompt."),
         prompt_param, "context_length_exceeded");
  const int room = limits.n_ctx - n_prompt;
  // OpenAI's completions default is 16; chat runs to the end of the context.
  r.gen.max_tokens = int(std::min<int64_t>(max_tokens.value_or(ep == Endpoint::Chat ? room : 16), room));
  return r;
}

std::string new_id(Endpoint ep) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)(salt ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull)));
  return std::string(ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + buf;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

json usage_json(const Timings& t) {
  return {{"prompt_tokens", t.prompt_tokens},
          {"completion_tokens", t.completion_tokens},
          {"total_tokens", t.prompt_tokens + t.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", t.cached_tokens}}}};
}

json timings_json(const Timings& t) {
  const int decoded = std::max(0, t.completion_tokens - t.sequences);  // each first token comes from a prefill
  json j = {{"queue_ms", t.queue_ms},
          {"prompt_n", t.prompt_tokens},
          {"prompt_ms", t.prompt_ms},
          {"prompt_per_second", t.prompt_ms > 0 ? t.prompt_tokens * 1e3 / t.prompt_ms : 0.0},
          {"cached_n", t.cached_tokens},
          {"ttft_ms", t.ttft_ms},
          {"predicted_n", decoded},
          {"predicted_ms", t.decode_ms},
          {"predicted_per_second", t.decode_ms > 0 ? decoded * 1e3 / t.decode_ms : 0.0}};
  if (t.drafted > 0) {  // speculative decoding, under llama.cpp server's names
    j["draft_n"] = t.drafted;
    j["draft_n_accepted"] = t.draft_accepted;
  }
  return j;
}

json logprobs_json(const ParsedRequest& r, const std::vector<TokenLogprobs>& lps) {
  if (r.gen.logprobs < 0) return nullptr;
  if (r.endpoint == Endpoint::Chat) {
    auto bytes = [](const std::string& b) {
      json a = json::array();
      for (unsigned char c : b) a.push_back(int(c));
      return a;
    };
    json content = json::array();
    for (const TokenLogprobs& e : lps) {
      json top = json::array();
      for (const auto& alt : e.top)
        top.push_back({{"token", alt.bytes}, {"logprob", alt.logprob}, {"bytes", bytes(alt.bytes)}});
      content.push_back({{"token", e.bytes}, {"logprob", e.logprob}, {"bytes", bytes(e.bytes)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const TokenLogprobs& e : lps) {
    tokens.push_back(e.bytes);
    // An echoed prompt's first token: nothing predicts it (null, as OpenAI).
    const bool unscored = std::isnan(e.logprob);
    token_logprobs.push_back(unscored ? json(nullptr) : json(e.logprob));
    json top = unscored ? json(nullptr) : json::object();
    for (const auto& alt : e.top)
      if (!top.contains(alt.bytes)) top[alt.bytes] = alt.logprob;  // two ids with one text: the likelier
    top_logprobs.push_back(top);
    offsets.push_back(e.text_offset);
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top_logprobs},
          {"text_offset", offsets}};
}

json completion_response(const ParsedRequest& r, const std::string& id, int64_t created,
                         const std::vector<Choice>& choices, const Timings& t) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    json choice = {{"index", i}, {"logprobs", logprobs_json(r, c.logprobs)}, {"finish_reason", c.finish_reason}};
    if (r.endpoint == Endpoint::Chat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      choice["text"] = c.text;
    list.push_back(std::move(choice));
  }
  return {{"id", id},
          {"object", r.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"system_fingerprint", "kvlab"},
          {"choices", list},
          {"usage", usage_json(t)},
          {"timings", timings_json(t)}};
}

json stream_chunk(const ParsedRequest& r, const std::string& id, int64_t created, int index, const std::string& text,
                  const std::string& finish_reason, bool role, const std::vector<TokenLogprobs>& lps) {
  json choice = {{"index", index}, {"logprobs", lps.empty() ? json(nullptr) : logprobs_json(r, lps)}};
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  if (r.endpoint == Endpoint::Chat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json c = {{"id", id},
            {"object", r.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", r.model},
            {"system_fingerprint", "kvlab"},
            {"choices", json::array({choice})}};
  if (r.include_usage) c["usage"] = nullptr;
  return c;
}

json usage_chunk(const ParsedRequest& r, const std::string& id, int64_t created, const Timings& t) {
  return {{"id", id},
          {"object", r.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"system_fingerprint", "kvlab"},
          {"choices", json::array()},
          {"usage", usage_json(t)},
          {"timings", timings_json(t)}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace kvlab::server
