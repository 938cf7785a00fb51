#include "lab/quality/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace kvlab::engine {
namespace {

// Below this log-probability the base's terms are left out of the KLD
// (llama.cpp's cut: the stored range is 16 nats).
constexpr float kLogProbFloor = -16.f;

struct Sums {
  double n = 0, nll = 0, nll2 = 0, base = 0, base2 = 0, nll_base = 0;
  double kld = 0, kld2 = 0, dp = 0, dp2 = 0, dp4 = 0, same_top = 0;
};

Sums sums_of(std::span<const KldToken> tokens) {
  Sums s;
  for (const KldToken& t : tokens) {
    s.n += 1;
    s.nll += t.nll, s.nll2 += t.nll * t.nll;
    s.base += t.nll_base, s.base2 += t.nll_base * t.nll_base;
    s.nll_base += t.nll * t.nll_base;
    s.kld += t.kld, s.kld2 += t.kld * t.kld;
    const double dp2 = t.p_diff * t.p_diff;
    s.dp += t.p_diff, s.dp2 += dp2, s.dp4 += dp2 * dp2;
    s.same_top += t.same_top ? 1 : 0;
  }
  return s;
}

// Mean and its standard error; llama.cpp reports no error below 11 values.
MeanErr mean_and_error(double sum, double sum2, double n) {
  if (n < 1) return {};
  const double mean = sum / n, var = sum2 / n - mean * mean;
  return {mean, var > 0 && n > 10 ? std::sqrt(var / (n - 1)) : 0.0};
}

// Covariance of two means (llama.cpp: none below 10 values).
double covariance_of_means(double sum_a, double sum_b, double sum_ab, double n) {
  if (n < 10) return 0;
  return (sum_ab / n - (sum_a / n) * (sum_b / n)) / (n - 1);
}

}  // namespace

KldToken compare_row(std::span<const float> logits, std::span<const uint16_t> base_row, int32_t next) {
  const size_t top = size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const float max_logit = logits[top];
  double sum_exp = 0;
  for (const float l : logits) sum_exp += std::exp(l - max_logit);
  const double log_norm = double(max_logit) + std::log(sum_exp);  // log Q(i) = logit[i] - log_norm
  KldToken t;
  t.nll = log_norm - double(logits[size_t(next)]);
  t.nll_base = -double(row_log_prob(base_row, size_t(next)));
  size_t top_base = 0;
  float top_base_lp = row_log_prob(base_row, 0);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float lp_base = row_log_prob(base_row, i);
    if (lp_base > top_base_lp) top_base_lp = lp_base, top_base = i;
    if (lp_base > kLogProbFloor) t.kld += std::exp(double(lp_base)) * (double(lp_base) - (logits[i] - log_norm));
  }
  t.same_top = top == top_base;
  t.p_diff = std::exp(-t.nll) - std::exp(-t.nll_base);
  return t;
}

KldStats kld_stats(std::span<const KldToken> tokens) {
  const Sums s = sums_of(tokens);
  KldStats r;
  r.count = int64_t(s.n);
  const MeanErr nll = mean_and_error(s.nll, s.nll2, s.n), base = mean_and_error(s.base, s.base2, s.n);
  const double cov = covariance_of_means(s.nll, s.base, s.nll_base, s.n);
  r.ppl = {std::exp(nll.value), std::exp(nll.value) * nll.err};
  r.ppl_base = {std::exp(base.value), std::exp(base.value) * base.err};
  r.ln_ppl_correlation = nll.err > 0 && base.err > 0 ? cov / (nll.err * base.err) : 0.0;
  const double ln_ratio_var = nll.err * nll.err + base.err * base.err - 2 * cov;
  r.ln_ppl_ratio = {nll.value - base.value, std::sqrt(std::max(0.0, ln_ratio_var))};
  r.ppl_ratio = {std::exp(r.ln_ppl_ratio.value), std::exp(r.ln_ppl_ratio.value) * r.ln_ppl_ratio.err};
  const double ppl_diff_var =
      r.ppl.err * r.ppl.err + r.ppl_base.err * r.ppl_base.err - 2 * r.ppl.value * r.ppl_base.value * cov;
  r.ppl_diff = {r.ppl.value - r.ppl_base.value, std::sqrt(std::max(0.0, ppl_diff_var))};
  r.kld = mean_and_error(s.kld, s.kld2, s.n);
  r.p_diff = mean_and_error(s.dp, s.dp2, s.n);
  const MeanErr mse = mean_and_error(s.dp2, s.dp4, s.n);
  const double rms = std::sqrt(mse.value);
  r.rms_p_diff = {rms, rms > 0 ? 0.5 / rms * mse.err : 0.0};
  const double same = s.n > 0 ? s.same_top / s.n : 0.0;
  r.same_top = {same, s.n > 1 ? std::sqrt(same * (1 - same) / (s.n - 1)) : 0.0};
  return r;
}

double quantile(std::span<const double> sorted, double fraction) {
  if (sorted.empty()) throw Error("no values to take a quantile of");
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  const double at = fraction * double(sorted.size() - 1);
  const size_t i = size_t(at);
  const double w = at - double(i);
  return (1 - w) * sorted[i] + w * sorted[std::min(i + 1, sorted.size() - 1)];
}

KldResult kl_divergence(Session& session, LogitsFileReader& base, int32_t bos, int max_chunks,
                        const std::function<void(int, std::span<const KldToken>)>& on_chunk) {
  const LogitsFileHeader& h = base.header();
  const size_t n_vocab = size_t(session.model().config().n_vocab);
  if (size_t(h.n_vocab) != n_vocab)
    throw Error("the KL-divergence base has a vocabulary of " + std::to_string(h.n_vocab) + " tokens, the model " +
                std::to_string(n_vocab) + " (not the same tokenizer)");
  if (session.options().n_ctx != h.n_ctx)
    throw Error("the KL-divergence base has chunks of " + std::to_string(h.n_ctx) + " tokens, the session a context of " +
                std::to_string(session.options().n_ctx));
  KldResult r;
  r.chunks = plan_chunks(h.n_ctx, base.tokens().size(), max_chunks);
  const std::span<const int32_t> tokens = base.tokens();
  const size_t words = row_words(h.n_vocab), per_chunk = r.chunks.scored_per_chunk();
  for (int c = 0; c < r.chunks.count; ++c) {
    const std::span<const uint16_t> rows = base.next_chunk();
    const size_t next = size_t(c) * size_t(h.n_ctx) + r.chunks.first_scored() + 1, at = r.tokens.size();
    r.tokens.resize(at + per_chunk);
    r.seconds += score_chunk(session, r.chunks, tokens, c, bos, [&](size_t j, std::span<const float> logits) {
      r.tokens[at + j] = compare_row(logits, rows.subspan(j * words, words), tokens[next + j]);
    });
    if (on_chunk) on_chunk(c, r.tokens);
  }
  return r;
}

}  // namespace kvlab::engine
