// The autoregressive loop: prefill the prompt, then sample a token, feed it
// back, and repeat until EOS, the token budget or the context limit.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/session.h"
#include "sample/sampler.h"

namespace kvlab::engine {

enum class StopReason { Eos, Length, Context };
const char* stop_reason_name(StopReason r);  // "eos", "length", "context"

struct GenerateOptions {
  int n_predict = 128;       // -n; < 0: until EOS or the context is full
  bool ignore_eos = false;
  sample::Params sampling;
};

struct GenerateResult {
  std::vector<int32_t> tokens;   // generated ids, without the prompt
  StopReason stop = StopReason::Length;
  int prompt_tokens = 0;
  double prefill_seconds = 0;    // the prompt's forward passes
  double ttft_seconds = 0;       // start -> first token sampled
  std::vector<double> token_seconds;  // latency of each generated token (first = TTFT)
  double decode_seconds = 0;     // sum of token_seconds after the first

  double prefill_tok_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  // Tokens after the first, over the time they took (the first is the TTFT).
  double decode_tok_s() const {
    return decode_seconds > 0 ? double(tokens.size() - 1) / decode_seconds : 0;
  }
};

// `is_eog(id)`: end-of-generation test (the tokenizer's). `on_token(id)` is
// called as soon as each token is sampled, before the next forward pass.
GenerateResult generate(Session& session, std::span<const int32_t> prompt, const GenerateOptions& opt,
                        const std::function<bool(int32_t)>& is_eog,
                        const std::function<void(int32_t)>& on_token = {});

}  // namespace kvlab::engine
