// What a client asks of the serving engine (GenRequest) and what it gets back
// per token and per request (TokenLogprobs, Timings). Plain data, shared by
// the engine, its output processor and the server's API layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "sample/sampler.h"

namespace kvlab::engine {

struct GenRequest {
  std::vector<int32_t> prompt;  // at least one token, shorter than n_ctx
  sample::Params sampling;
  int max_tokens = 16;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int logprobs = -1;  // -1: none; else each token's log-probability and this many alternatives (0..20)
  // OpenAI's echo (completions): the text starts with the prompt's, and with
  // logprobs every prompt token has its entry too (the first one's logprob
  // is NaN: nothing predicts it). max_tokens may then be 0.
  bool echo = false;
  bool scores_prompt() const { return echo && logprobs >= 0; }  // every prompt position's logits are needed
  // Constrained decoding (JSON mode, a JSON schema, GBNF): every token keeps
  // the text a prefix of the grammar's language (sample/grammar_vocab.h),
  // and the reply ends, "stop", when nothing more may follow. Null: none.
  std::shared_ptr<const grammar::Grammar> grammar;
};

// One token for the API's logprobs: its bytes, where its text starts in the
// completion (in characters, as OpenAI's text_offset), its log-probability
// under the model's raw distribution (before temperature and the other
// sampling steps, as vLLM reports by default) and the most likely
// alternatives.
struct TokenLogprobs {
  struct Alt {
    int32_t id;
    std::string bytes;
    double logprob;
  };
  int32_t id = 0;
  std::string bytes;
  size_t text_offset = 0;
  double logprob = 0;
  std::vector<Alt> top;
};

struct Timings {
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int completion_tokens = 0;
  double queue_ms = 0;
  double prompt_ms = 0;   // admission -> first token
  double decode_ms = 0;   // first token -> last token
  double ttft_ms = 0;     // arrival -> first token
  int sequences = 1;      // choices summed into these (server/choices.h), each with a first token from its prefill
  int drafted = 0;        // speculative decoding: tokens drafted, and those kept
  int draft_accepted = 0;
};

}  // namespace kvlab::engine
