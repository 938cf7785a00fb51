#include "engine/sequence_sampler.h"

namespace kvlab::engine {

SequenceSampler::SequenceSampler(const sample::Params& params, const sample::JsonVocab* json_vocab)
    : sampler_(params), json_vocab_(json_vocab) {
  if (json_vocab_) json_.emplace();
}

std::optional<int32_t> SequenceSampler::draw(std::span<const float> row, std::span<const int32_t> history) {
  std::span<const float> drawn = row;
  if (json_) {
    masked_.assign(row.begin(), row.end());
    if (json_vocab_->mask(*json_, masked_) == 0) return std::nullopt;
    drawn = masked_;
  }
  const int32_t id = sampler_.sample(drawn, history);
  if (json_) json_->feed(json_vocab_->bytes(id));
  return id;
}

}  // namespace kvlab::engine
