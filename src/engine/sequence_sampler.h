// How one served sequence picks its tokens: its own sampler (and random
// stream) and, in JSON mode, the grammar state that masks the logits before
// each draw (sample/json_mode.h). Logprobs are taken from the raw row, not
// the masked one: they report the model's distribution.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sample/json_mode.h"
#include "sample/sampler.h"

namespace kvlab::engine {

class SequenceSampler {
 public:
  // Throws kvlab::Error for invalid sampling parameters.
  SequenceSampler(const sample::Params& params, const sample::JsonVocab* json_vocab);

  // Draws a token from `row` given the sequence so far; nullopt in JSON
  // mode when no token of the vocabulary continues the JSON.
  std::optional<int32_t> draw(std::span<const float> row, std::span<const int32_t> history);
  // JSON mode: the object has closed, so nothing may follow.
  bool json_complete() const { return json_ && json_->complete(); }

 private:
  sample::Sampler sampler_;
  const sample::JsonVocab* json_vocab_;  // null: no JSON mode
  std::optional<sample::JsonPrefix> json_;
  std::vector<float> masked_;  // a logits row with the tokens the grammar refuses at -inf
};

}  // namespace kvlab::engine
