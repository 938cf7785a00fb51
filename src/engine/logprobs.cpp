#include "engine/logprobs.h"

#include "sample/sampler.h"

namespace kvlab::engine {
namespace {
double logprob_given(std::span<const float> row, int32_t id, double log_sum_exp) {
  return double(row[size_t(id)]) - log_sum_exp;
}
}  // namespace

double token_logprob(std::span<const float> row, int32_t id) {
  return logprob_given(row, id, sample::log_sum_exp(row));
}

TokenLogprobs logprob_entry(std::span<const float> row, int32_t id, int n_top, const tokenizer::Tokenizer& tok) {
  TokenLogprobs lp;
  lp.id = id;
  const double lse = sample::log_sum_exp(row);
  lp.logprob = logprob_given(row, id, lse);
  for (const sample::TokenLogprob& t : sample::top_logprobs(row, lse, n_top))
    lp.top.push_back({t.id, tok.piece(t.id), t.logprob});
  return lp;
}

}  // namespace kvlab::engine
