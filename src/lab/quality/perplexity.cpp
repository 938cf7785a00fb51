#include "lab/quality/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace kvlab::engine {

PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens, int32_t bos, int max_chunks,
                            const std::function<void(int, double)>& on_chunk) {
  const int n_ctx = session.options().n_ctx;
  if (n_ctx < 4) throw Error("perplexity needs a context of at least 4 tokens, got " + std::to_string(n_ctx));
  if (tokens.size() < 2 * size_t(n_ctx))
    throw Error("the text has " + std::to_string(tokens.size()) + " tokens; perplexity at a context of " +
                std::to_string(n_ctx) + " needs at least " + std::to_string(2 * n_ctx) + " (lower -c)");
  int n_chunks = int(tokens.size() / size_t(n_ctx));
  if (max_chunks >= 0) n_chunks = std::min(n_chunks, max_chunks);
  if (n_chunks < 1) throw Error("no chunk to score (--chunks 0)");

  PerplexityResult r;
  r.tokens_per_chunk = n_ctx;
  const size_t first = size_t(n_ctx) / 2;
  double sum = 0, sum_sq = 0;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int c = 0; c < n_chunks; ++c) {
    const auto begin = tokens.begin() + std::ptrdiff_t(size_t(c) * size_t(n_ctx));
    std::copy(begin, begin + n_ctx, chunk.begin());
    if (bos >= 0) chunk[0] = bos;
    session.reset();
    const size_t passes_before = session.trace().steps.size();
    // lp[j] = log p(chunk[first+j+1] | chunk[0 .. first+j]).
    const std::vector<double> lp = session.score(chunk, first);
    for (size_t s = passes_before; s < session.trace().steps.size(); ++s) r.seconds += session.trace().steps[s].seconds;
    for (size_t j = 0; j < lp.size(); ++j) {
      r.token_nll.push_back(-lp[j]);
      sum += -lp[j];
      sum_sq += lp[j] * lp[j];
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
  session.reset();
  return r;
}

}  // namespace kvlab::engine
