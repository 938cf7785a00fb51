// Picks the next token from a row of logits. The chain follows llama.cpp's
// common order: logit bias -> penalties -> top-k -> temperature -> softmax ->
// top-p -> min-p -> draw. Temperature 0 is greedy (argmax, ties to the lower
// id) over the biased and penalized logits, and skips the rest.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace kvlab::sample {

struct Params {
  float temperature = 0.8f;    // 0 = greedy
  int top_k = 40;              // <= 0: all tokens
  float top_p = 0.95f;         // 1: off
  float min_p = 0.05f;         // 0: off; keep p >= min_p * p_max
  float repeat_penalty = 1.0f; // 1: off; CTRL-style (Keskar et al. 2019): logit/r if > 0 else logit*r
  int repeat_last_n = 64;      // window of recent tokens the penalties look at
  // OpenAI's penalties, after the repetition penalty as in llama.cpp: a token
  // seen c times in the window loses c * frequency_penalty + presence_penalty.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint64_t seed = 0;
  // Added to the named tokens' logits before anything else (OpenAI's
  // logit_bias; -inf bans a token).
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// Throws kvlab::Error for out-of-range parameters (e.g. top_p outside (0,1]),
// and for a biased token id outside a vocabulary of n_vocab (when known).
void validate(const Params& p, int n_vocab = -1);

int32_t argmax(std::span<const float> logits);

// The model's own distribution over a row of logits, as log-probabilities
// (for perplexity and the API's logprobs): log p_i = logit_i - log_sum_exp.
// log_sum_exp is computed in double, shifted by the largest logit.
double log_sum_exp(std::span<const float> logits);
struct TokenLogprob {
  int32_t id;
  double logprob;
};
// The n most likely tokens, most likely first (ties: the lower id); `lse`
// is log_sum_exp(logits), which the caller has for the chosen token too.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, double lse, int n);

class Sampler {
 public:
  explicit Sampler(const Params& p);
  // `history`: the tokens so far (prompt + generated), for the penalty.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  // The steps of the chain, in order. adjusted_logits returns the row itself,
  // or penalized_ holding it with the bias and the penalties; the steps from
  // select_candidates on work on cand_.
  std::span<const float> adjusted_logits(std::span<const float> logits, std::span<const int32_t> history);
  void penalize(std::span<const int32_t> history);
  void select_candidates(std::span<const float> logits);
  void softmax();
  void keep_top_p();
  void keep_min_p();
  int32_t draw();

  Params p_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cand_;    // reused between calls
  std::vector<float> penalized_;   // the logits with the bias and penalties applied
  std::vector<int32_t> window_;                  // the penalty window, sorted
  std::vector<std::pair<int32_t, int>> counts_;  // (id, occurrences) in it
};

}  // namespace kvlab::sample
