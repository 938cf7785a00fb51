// The web page's live measurements on the loaded model, free of any HTTP
// library (http_server.cpp wires them to routes):
//
//  GET  /api/race    the same greedy generation with and without the KV cache,
//                    one SSE event per token as it is produced (Race);
//  POST /api/phases  one generation's timeline, token by token, with the
//                    roofline verdict of its prefill and decode (run_phases).
//
// Both run on the HTTP worker thread with their own Sessions (and so their own
// thread pools and KV caches), apart from the scheduler's slots.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/output_processor.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::server {

// Tokens per mode at most: the no-cache mode is quadratic, and a request
// holds an HTTP worker for its whole duration.
inline constexpr int kLabMaxTokens = 256;

struct LabRequest {
  std::vector<int32_t> prompt;  // the user message in the chat template, tokenized
  int n = 16;                   // tokens to generate
  bool kv_cache = true;         // /api/phases only: false recomputes at every step
};

struct LabLimits {
  int n_ctx = 2048;             // the server's context per sequence
  int n_threads = 0;            // as the scheduler's (0: all cores)
  tensor::DType kv_type = tensor::DType::F16;
};

// GET /api/race?prompt=TEXT&n=N (n defaults to 16). Throws ApiException (400)
// for a missing or empty prompt, an n that is not an integer in
// [1, kLabMaxTokens], or a prompt plus n beyond the context.
LabRequest parse_race(const std::optional<std::string>& prompt, const std::optional<std::string>& n,
                      const tokenizer::Tokenizer& tok, const LabLimits& limits);

// POST /api/phases {"prompt": TEXT, "n": N, "no_kv_cache": false}; the same
// checks as parse_race.
LabRequest parse_phases(const std::string& body, const tokenizer::Tokenizer& tok, const LabLimits& limits);

// The race, one token of one mode per next() call so that the caller can send
// each event as soon as it exists and stop when the client has gone.
//
// The modes alternate token by token (cached 0, no-cache 0, cached 1, ...)
// rather than running one after the other: the chart then grows both curves
// over the same positions at once, so the widening gap is visible while it
// happens instead of after a cached run that ends in a second and a long
// no-cache run alone; and both modes share whatever load the machine has at
// each moment, which keeps the comparison fair on a busy machine. Each
// latency is timed around its own step, so the alternation does not enter it.
class Race {
 public:
  Race(const model::Model& m, const tokenizer::Tokenizer& tok, LabRequest req, const LabLimits& limits);
  // The sessions count into their Mode's `attended`: the Race stays put.
  Race(const Race&) = delete;
  Race& operator=(const Race&) = delete;

  // The SSE text of the next event: first the input
  //   {"type":"prompt","tokens":[piece...],"n":N}
  // (the chat-templated prompt, one piece per token, control tokens shown),
  // then a token
  //   {"type":"token","mode":"cached"|"no_cache","index":i,"position":p,
  //    "token":id,"token_text":...,"latency_ms":...,"work":{...}}
  // where work is what the engine ran for that token: rows (tokens pushed
  // through the layers; the first at position first_row), attended (cache
  // positions scored per layer and KV head, counted by the model: see
  // model/workspace.h), attention_flops (Q·K and P·V of every query head),
  // kv_bytes (K and V rows the attention read) and weight_bytes (the
  // matrices, once per forward pass: lab/bench/attribution.h);
  // and after the last one the summary
  //   {"type":"summary","prompt_tokens":P,"n":N,"identical":bool,"text":...,
  //    "cached":{...},"no_cache":{...},"decode_speedup":x}
  // followed by [DONE]. An engine error ends the stream with an OpenAI-style
  // error event and [DONE].
  std::string next();
  bool done() const { return done_; }

 private:
  struct Mode {
    const char* name;
    engine::Session session;
    engine::OutputProcessor output;
    std::vector<int32_t> tokens;
    std::vector<double> latency_s;
    std::string text;
    uint64_t attended = 0;  // the session's count (model/workspace.h)
  };
  std::string step(Mode& m);
  nlohmann::json work_since(const Mode& m, size_t first_pass, uint64_t attended_before) const;
  std::string prompt_event() const;
  std::string summary() const;

  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  LabRequest req_;
  Mode cached_, naive_;
  bool prompt_sent_ = false;
  bool done_ = false;
};

// Runs one generation (greedy, stopping at the end of turn or after n tokens)
// and returns its timeline and roofline attribution as JSON:
//   tokens[]: index, position, phase ("prefill" for the first token, whose
//             time is the prompt's forward pass; "decode" after), text,
//             start_ms, end_ms (from the start of the request)
//   phases[]: per phase (prefill, decode) passes, tokens, ms, flops, bytes,
//             achieved rates and, with a probe profile, the verdict
//   peaks:    the probed peaks, or null with "profile_message" saying why
nlohmann::json run_phases(const model::Model& m, const tokenizer::Tokenizer& tok, const LabRequest& req,
                          const LabLimits& limits);

}  // namespace kvlab::server
