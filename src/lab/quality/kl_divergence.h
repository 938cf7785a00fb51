// How far a model's next-token distributions are from a base model's, over
// a text: llama.cpp's `llama-perplexity --kl-divergence`, whose estimators
// these are, so the two engines' figures compare. The base's
// log-probabilities come from a file (lab/quality/logits_file.h), the text
// and its chunking from the same file (lab/quality/perplexity.h's chunks).
//
// Per scored prediction, with P the base's distribution (as stored) and Q
// the model's:
//   KLD(P || Q) = sum over i with log P(i) > -16 of P(i) (log P(i) - log Q(i))
//   Δp = Q(next) - P(next), the change in the actual next token's probability
//   same top: argmax Q = argmax P (the first index on ties)
// Over all predictions (n of them):
//   mean x ± sqrt((mean x² - (mean x)²) / (n - 1))   the standard error of a
//     mean (0 when n <= 10), for the NLLs, KLD and Δp;
//   ln(PPL(Q)/PPL(base)) = mean NLL_Q - mean NLL_P, its error from both
//     errors and their covariance; PPL ratio = exp of it;
//   RMS Δp = sqrt(mean Δp²), error 0.5 / RMS * err(mean Δp²);
//   same top p = share of same top, error sqrt(p (1 - p) / (n - 1));
//   quantiles by linear interpolation between sorted values.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/session.h"
#include "lab/quality/logits_file.h"
#include "lab/quality/perplexity.h"

namespace kvlab::engine {

struct KldToken {
  double kld = 0, p_diff = 0;
  double nll = 0, nll_base = 0;  // -log Q(next), -log P(next)
  bool same_top = false;
};

// One prediction: the model's raw logits against the base's encoded row.
KldToken compare_row(std::span<const float> logits, std::span<const uint16_t> base_row, int32_t next);

struct MeanErr {
  double value = 0, err = 0;
};

struct KldStats {
  int64_t count = 0;
  MeanErr ppl, ppl_base, ln_ppl_ratio, ppl_ratio, ppl_diff;
  double ln_ppl_correlation = 0;  // of the two mean NLLs' errors
  MeanErr kld, p_diff, rms_p_diff, same_top;  // same_top as a fraction
};

// The means and errors above; no sorting.
KldStats kld_stats(std::span<const KldToken> tokens);

// The value at `fraction` (0: minimum, 0.5: median, 1: maximum) of
// `values`, sorted ascending, interpolating linearly between neighbours.
double quantile(std::span<const double> sorted, double fraction);

struct KldResult {
  Chunks chunks;
  std::vector<KldToken> tokens;  // every scored prediction, chunk after chunk
  double seconds = 0;            // forward passes only
};

// Runs the base file's chunks (at most max_chunks; < 0: all) through
// `session`, whose context must be the file's n_ctx, the first token of
// each chunk replaced by `bos` where bos >= 0 (the compared model's BOS).
// Throws kvlab::Error when the file's vocabulary or context is not the
// model's. `on_chunk(c, tokens so far)` reports progress.
KldResult kl_divergence(Session& session, LogitsFileReader& base, int32_t bos, int max_chunks,
                        const std::function<void(int, std::span<const KldToken>)>& on_chunk = {});

}  // namespace kvlab::engine
