#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <limits>

#include "common/error.h"

namespace kvlab::sample {

void validate(const Params& p, int n_vocab) {
  if (!(p.temperature >= 0.f) || !std::isfinite(p.temperature)) throw Error("--temp must be >= 0");
  if (!(p.top_p > 0.f && p.top_p <= 1.f)) throw Error("--top-p must be in (0, 1]");
  if (!(p.min_p >= 0.f && p.min_p < 1.f)) throw Error("--min-p must be in [0, 1)");
  if (!(p.repeat_penalty > 0.f) || !std::isfinite(p.repeat_penalty)) throw Error("--repeat-penalty must be > 0");
  if (p.repeat_last_n < 0) throw Error("--repeat-last-n must be >= 0");
  if (!std::isfinite(p.frequency_penalty)) throw Error("--frequency-penalty must be a finite number");
  if (!std::isfinite(p.presence_penalty)) throw Error("--presence-penalty must be a finite number");
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0) throw Error("logit bias for token id " + std::to_string(id) + ": token ids are >= 0");
    if (n_vocab >= 0 && id >= n_vocab)
      throw Error("logit bias for token id " + std::to_string(id) + ": the vocabulary has ids 0.." +
                  std::to_string(n_vocab - 1));
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity())
      throw Error("logit bias for token id " + std::to_string(id) + " must be a number (or -inf to ban it)");
  }
}

int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const Params& p) : p_(p), rng_(p.seed) { validate(p); }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const std::span<const float> l = adjusted_logits(logits, history);
  if (p_.temperature == 0.f) return argmax(l);
  select_candidates(l);
  softmax();
  keep_top_p();
  keep_min_p();
  return draw();
}

std::span<const float> Sampler::adjusted_logits(std::span<const float> logits, std::span<const int32_t> history) {
  const bool penalties = p_.repeat_last_n > 0 &&
                         (p_.repeat_penalty != 1.0f || p_.frequency_penalty != 0.f || p_.presence_penalty != 0.f);
  if (!penalties && p_.logit_bias.empty()) return logits;
  penalized_.assign(logits.begin(), logits.end());
  for (const auto& [id, bias] : p_.logit_bias) {
    if (size_t(id) >= penalized_.size())
      throw Error("logit bias for token id " + std::to_string(id) + ": the logits have " +
                  std::to_string(penalized_.size()) + " ids");
    penalized_[size_t(id)] += bias;
  }
  if (penalties) penalize(history);
  return penalized_;
}

void Sampler::penalize(std::span<const int32_t> history) {
  // Occurrences of each id in the window: sorted ids, then runs.
  const size_t n = std::min(history.size(), size_t(p_.repeat_last_n));
  window_.assign(history.end() - ptrdiff_t(n), history.end());
  std::sort(window_.begin(), window_.end());
  counts_.clear();
  for (size_t i = 0; i < window_.size();) {
    size_t j = i;
    while (j < window_.size() && window_[j] == window_[i]) ++j;
    counts_.push_back({window_[i], int(j - i)});
    i = j;
  }
  for (const auto& [id, count] : counts_) {
    if (id < 0 || size_t(id) >= penalized_.size()) continue;
    float& v = penalized_[size_t(id)];
    v = v > 0 ? v / p_.repeat_penalty : v * p_.repeat_penalty;
    v -= float(count) * p_.frequency_penalty + p_.presence_penalty;
  }
}

// Candidates in decreasing logit order, ties to the lower id: the top_k of
// them, or all. The top k come from one pass that keeps the k best seen so
// far in a heap (its root the weakest, replaced by any better logit), not
// from building and partially sorting all n: the same set, ~5x faster on
// SmolLM2's 49152 logits.
void Sampler::select_candidates(std::span<const float> l) {
  auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  cand_.clear();
  if (p_.top_k > 0 && size_t(p_.top_k) < l.size()) {
    const size_t k = size_t(p_.top_k);
    for (size_t i = 0; i < k; ++i) cand_.push_back({int32_t(i), l[i], 0.f});
    std::make_heap(cand_.begin(), cand_.end(), by_logit);
    for (size_t i = k; i < l.size(); ++i) {
      // A later id never beats an equal logit: only a strictly greater one enters.
      if (!(l[i] > cand_.front().logit)) continue;
      std::pop_heap(cand_.begin(), cand_.end(), by_logit);
      cand_.back() = {int32_t(i), l[i], 0.f};
      std::push_heap(cand_.begin(), cand_.end(), by_logit);
    }
    std::sort_heap(cand_.begin(), cand_.end(), by_logit);
  } else {
    for (size_t i = 0; i < l.size(); ++i) cand_.push_back({int32_t(i), l[i], 0.f});
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
}

// Softmax at temperature T over the survivors (sorted, so [0] is the max).
void Sampler::softmax() {
  const float mx = cand_[0].logit;
  double sum = 0;
  for (auto& c : cand_) sum += (c.p = std::exp((c.logit - mx) / p_.temperature));
  for (auto& c : cand_) c.p = float(c.p / sum);
}

// top-p (Holtzman et al. 2019): smallest prefix whose mass reaches top_p.
void Sampler::keep_top_p() {
  if (!(p_.top_p < 1.f)) return;
  double cum = 0;
  size_t n = 0;
  while (n < cand_.size()) {
    cum += cand_[n++].p;
    if (cum >= p_.top_p) break;
  }
  cand_.resize(std::max<size_t>(n, 1));
}

// min-p: drop tokens less likely than min_p times the most likely one.
void Sampler::keep_min_p() {
  if (!(p_.min_p > 0.f)) return;
  const float floor = p_.min_p * cand_[0].p;
  size_t n = 1;
  while (n < cand_.size() && cand_[n].p >= floor) ++n;
  cand_.resize(n);
}

int32_t Sampler::draw() {
  double total = 0;
  for (auto& c : cand_) total += c.p;
  // A uniform draw in [0, total) from 53 random bits: the same on every platform
  // for a given seed (std::uniform_real_distribution is not specified that far).
  const double u = double(rng_() >> 11) * (1.0 / 9007199254740992.0) * total;
  double acc = 0;
  for (auto& c : cand_) {
    acc += c.p;
    if (u < acc) return c.id;
  }
  return cand_.back().id;
}

double log_sum_exp(std::span<const float> logits) {
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - m);
  return m + std::log(sum);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, double lse, int n) {
  const size_t k = std::min(size_t(std::max(n, 0)), logits.size());
  // A min-heap of the k best so far: one pass over the vocabulary.
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[size_t(a)], lb = logits[size_t(b)];
    return la > lb || (la == lb && a < b);
  };
  std::vector<int32_t> heap;
  heap.reserve(k + 1);
  for (size_t i = 0; i < logits.size() && k > 0; ++i) {
    if (heap.size() < k) {
      heap.push_back(int32_t(i));
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(int32_t(i), heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = int32_t(i);
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  std::vector<TokenLogprob> out;
  for (int32_t id : heap) out.push_back({id, double(logits[size_t(id)]) - lse});
  return out;
}

}  // namespace kvlab::sample
