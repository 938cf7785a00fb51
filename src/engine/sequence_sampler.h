// How one served sequence picks its tokens: its own sampler (and random
// stream) and, under a grammar (JSON mode, a JSON schema, GBNF), the
// matcher whose state masks the logits before each draw
// (sample/grammar_vocab.h). Logprobs are taken from the raw row, not the
// masked one: they report the model's distribution.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "grammar/matcher.h"
#include "sample/grammar_vocab.h"
#include "sample/sampler.h"

namespace kvlab::engine {

class SequenceSampler {
 public:
  // `grammar` null: unconstrained. Throws kvlab::Error for invalid sampling
  // parameters.
  SequenceSampler(const sample::Params& params, std::shared_ptr<const grammar::Grammar> grammar,
                  const sample::GrammarVocab& vocab);

  // Draws a token from `row` given the sequence so far; nullopt under a
  // grammar when no token of the vocabulary continues the text.
  std::optional<int32_t> draw(std::span<const float> row, std::span<const int32_t> history);
  // Under a grammar: the text is whole and nothing may follow it.
  bool grammar_complete() const { return matcher_ && matcher_->complete(); }

 private:
  sample::Sampler sampler_;
  const sample::GrammarVocab& vocab_;
  std::optional<grammar::Matcher> matcher_;
  std::vector<float> masked_;    // a logits row with the tokens the grammar refuses at -inf
  std::vector<uint8_t> allowed_;  // the mask's scratch
};

}  // namespace kvlab::engine
