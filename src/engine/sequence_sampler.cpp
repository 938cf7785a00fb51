#include "engine/sequence_sampler.h"

namespace kvlab::engine {

SequenceSampler::SequenceSampler(const sample::Params& params, std::shared_ptr<const grammar::Grammar> grammar,
                                 const sample::GrammarVocab& vocab)
    : sampler_(params), vocab_(vocab) {
  if (grammar) matcher_.emplace(std::move(grammar));
}

std::optional<int32_t> SequenceSampler::draw(std::span<const float> row, std::span<const int32_t> history) {
  std::span<const float> drawn = row;
  if (matcher_) {
    masked_.assign(row.begin(), row.end());
    if (vocab_.mask(*matcher_, masked_, allowed_) == 0) return std::nullopt;
    drawn = masked_;
  }
  const int32_t id = sampler_.sample(drawn, history);
  if (matcher_) matcher_->accept(vocab_.bytes(id));
  return id;
}

}  // namespace kvlab::engine
