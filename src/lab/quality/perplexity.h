// Perplexity of a model on a text, with llama.cpp's `llama-perplexity`
// method so the two engines' figures compare:
//  - the text's tokens are cut into chunks of n_ctx (the session's context);
//    what is left after the last whole chunk is not scored;
//  - each chunk is a fresh sequence; where the model adds BOS, its first
//    token is replaced by BOS;
//  - only the second half of each chunk is scored: the predictions of the
//    tokens at chunk positions n_ctx/2 + 1 .. n_ctx - 1, each with at least
//    n_ctx/2 tokens before it;
//  - PPL = exp(mean NLL) over every scored token of every chunk, and its
//    uncertainty PPL * sqrt(var(NLL) / (n - 1)), the standard error of the
//    mean NLL carried through exp (first order).
// The chunking (Chunks, score_chunk) is shared with the KL divergence
// against a base model's log-probabilities (lab/quality/kl_divergence.h).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/session.h"

namespace kvlab::engine {

// llama-perplexity's chunks of a token sequence.
struct Chunks {
  int n_ctx = 0;  // tokens per chunk
  int count = 0;  // chunks scored
  size_t first_scored() const { return size_t(n_ctx) / 2; }
  // Predictions scored per chunk: those after positions n_ctx/2 .. n_ctx-2.
  size_t scored_per_chunk() const { return size_t(n_ctx) - 1 - first_scored(); }
};

// `max_chunks` < 0: every whole chunk. Throws kvlab::Error when there are
// fewer than 2 * n_ctx tokens (one chunk would score half a context;
// llama.cpp asks for the same), when n_ctx is under 4, or max_chunks is 0.
Chunks plan_chunks(int n_ctx, size_t n_tokens, int max_chunks);

// Runs chunk `c` of `tokens` as a fresh sequence (its first token replaced
// by `bos` where bos >= 0) and calls row(j, logits) for each scored
// prediction j of it (Session::score_rows: several at once). Returns the
// seconds its forward passes took.
double score_chunk(Session& session, const Chunks& chunks, std::span<const int32_t> tokens, int c, int32_t bos,
                   const Session::ScoredRow& row);

struct PerplexityResult {
  int chunks = 0;
  int tokens_per_chunk = 0;  // n_ctx
  int64_t scored = 0;        // predictions scored, over all chunks
  double nll = 0;            // mean negative log-likelihood (nats per token)
  double ppl = 0, ppl_err = 0;
  std::vector<double> token_nll;    // every scored prediction's NLL, chunk after chunk
  std::vector<double> running_ppl;  // exp(mean NLL) after each chunk, as llama.cpp prints it
  double seconds = 0;               // forward passes only (the tokens' evaluation)
  double tok_s() const { return seconds > 0 ? double(chunks) * tokens_per_chunk / seconds : 0.0; }
};

// `bos` < 0: the model adds no BOS. `max_chunks` and the errors: as
// plan_chunks at the session's context. `on_chunk(i, running ppl)` reports
// progress; `on_row(j, logits)` sees each scored row of the chunk under way
// (as score_chunk's `row`), before that chunk's on_chunk.
PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens, int32_t bos, int max_chunks,
                            const std::function<void(int, double)>& on_chunk = {},
                            const Session::ScoredRow& on_row = {});

}  // namespace kvlab::engine
