#include "lab/quality/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "engine/logprobs.h"

namespace kvlab::engine {

Chunks plan_chunks(int n_ctx, size_t n_tokens, int max_chunks) {
  if (n_ctx < 4) throw Error("perplexity needs a context of at least 4 tokens, got " + std::to_string(n_ctx));
  if (n_tokens < 2 * size_t(n_ctx))
    throw Error("the text has " + std::to_string(n_tokens) + " tokens; perplexity at a context of " +
                std::to_string(n_ctx) + " needs at least " + std::to_string(2 * n_ctx) + " (lower -c)");
  Chunks chunks{n_ctx, int(n_tokens / size_t(n_ctx))};
  if (max_chunks >= 0) chunks.count = std::min(chunks.count, max_chunks);
  if (chunks.count < 1) throw Error("no chunk to score (--chunks 0)");
  return chunks;
}

double score_chunk(Session& session, const Chunks& chunks, std::span<const int32_t> tokens, int c, int32_t bos,
                   const Session::ScoredRow& row) {
  std::vector<int32_t> chunk(tokens.begin() + std::ptrdiff_t(size_t(c) * size_t(chunks.n_ctx)),
                             tokens.begin() + std::ptrdiff_t(size_t(c + 1) * size_t(chunks.n_ctx)));
  if (bos >= 0) chunk[0] = bos;
  session.reset();
  const size_t passes_before = session.trace().steps.size();
  session.score_rows(chunk, chunks.first_scored(), row);
  double seconds = 0;
  for (size_t s = passes_before; s < session.trace().steps.size(); ++s) seconds += session.trace().steps[s].seconds;
  session.reset();
  return seconds;
}

PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens, int32_t bos, int max_chunks,
                            const std::function<void(int, double)>& on_chunk, const Session::ScoredRow& on_row) {
  const Chunks chunks = plan_chunks(session.options().n_ctx, tokens.size(), max_chunks);
  PerplexityResult r;
  r.tokens_per_chunk = chunks.n_ctx;
  double sum = 0, sum_sq = 0;
  std::vector<double> nll(chunks.scored_per_chunk());
  for (int c = 0; c < chunks.count; ++c) {
    const size_t next = size_t(c) * size_t(chunks.n_ctx) + chunks.first_scored() + 1;
    r.seconds += score_chunk(session, chunks, tokens, c, bos, [&](size_t j, std::span<const float> logits) {
      nll[j] = -token_logprob(logits, tokens[next + j]);
      if (on_row) on_row(j, logits);
    });
    for (const double v : nll) {
      r.token_nll.push_back(v);
      sum += v;
      sum_sq += v * v;
      ++r.scored;
    }
    r.running_ppl.push_back(std::exp(sum / double(r.scored)));
    ++r.chunks;
    if (on_chunk) on_chunk(c, r.running_ppl.back());
  }
  r.nll = sum / double(r.scored);
  r.ppl = std::exp(r.nll);
  const double var = sum_sq / double(r.scored) - r.nll * r.nll;
  r.ppl_err = var > 0 && r.scored > 1 ? r.ppl * std::sqrt(var / double(r.scored - 1)) : 0.0;
  return r;
}

}  // namespace kvlab::engine
