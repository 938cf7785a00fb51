// The response side of server/openai_api.h: ids, usage, logprobs and the
// completion and chunk objects (the request side is openai_request.cpp).
#include "server/openai_api.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "server/tool_calls.h"

namespace kvlab::server {

using nlohmann::json;

json ApiError::body() const {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return json{{"error", e}};
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

namespace {

// The fields every completion object and chunk starts with.
json envelope(const ParsedRequest& r, const std::string& id, int64_t created, const char* object) {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", r.model}, {"system_fingerprint", "kvlab"}};
}

const char* chunk_object(const ParsedRequest& r) {
  return r.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion";
}

}  // namespace

json completion_response(const ParsedRequest& r, const std::string& id, int64_t created,
                         const std::vector<Choice>& choices, const Timings& t) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    json choice = {{"index", i}, {"logprobs", logprobs_json(r, c.logprobs)}, {"finish_reason", c.finish_reason}};
    if (r.endpoint != Endpoint::Chat) {
      choice["text"] = c.text;
    } else if (auto calls = r.tool_format && c.finish_reason == "stop" ? tool_calls_of(c.text, *r.tool_format)
                                                                  : std::nullopt) {
      choice["message"] = {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", std::move(*calls)}};
      choice["finish_reason"] = "tool_calls";
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    }
    list.push_back(std::move(choice));
  }
  json out = envelope(r, id, created, r.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion");
  out["choices"] = list;
  out["usage"] = usage_json(t);
  out["timings"] = timings_json(t);
  return out;
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
  json c = envelope(r, id, created, chunk_object(r));
  c["choices"] = json::array({choice});
  if (r.include_usage) c["usage"] = nullptr;
  return c;
}

json tool_call_chunk(const ParsedRequest& r, const std::string& id, int64_t created, int index, const json& entry) {
  json choice = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  choice["delta"] = {{"tool_calls", json::array({entry})}};
  json c = envelope(r, id, created, chunk_object(r));
  c["choices"] = json::array({std::move(choice)});
  if (r.include_usage) c["usage"] = nullptr;
  return c;
}

json usage_chunk(const ParsedRequest& r, const std::string& id, int64_t created, const Timings& t) {
  json c = envelope(r, id, created, chunk_object(r));
  c["choices"] = json::array();
  c["usage"] = usage_json(t);
  c["timings"] = timings_json(t);
  return c;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace kvlab::server
