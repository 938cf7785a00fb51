// Log-probabilities from a row of raw logits: the one path behind perplexity
// (Session::score) and the API's logprobs (ServingEngine). log p(id) =
// logit[id] - log(sum_j exp(logit[j])), in double, before temperature or any
// other sampling transform (vLLM's default for reported logprobs).
#pragma once
#include <cstdint>
#include <span>

#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::engine {

// log p(id) under the row's softmax.
double token_logprob(std::span<const float> row, int32_t id);
// The API's entry for `id`: its logprob and the `n_top` most likely tokens
// with theirs (bytes and text offset are the output processor's to fill).
TokenLogprobs logprob_entry(std::span<const float> row, int32_t id, int n_top, const tokenizer::Tokenizer& tok);

}  // namespace kvlab::engine
