#include "engine/sequence.h"

namespace kvlab::engine {

Sequence::Sequence(int slot_, GenRequest request, std::shared_ptr<Handle> handle_, Clock::time_point arrival,
                   int reused, const tokenizer::Tokenizer& tok, const sample::GrammarVocab& grammar_vocab)
    : slot(slot_),
      req(std::move(request)),
      handle(std::move(handle_)),
      times{arrival, Clock::now(), {}, {}},
      tokens(req.prompt),
      n_past(reused),
      n_cached(reused),
      sampler(req.sampling, req.grammar, grammar_vocab),
      output(tok, req.stop, req.logprobs >= 0) {
  if (req.scores_prompt()) prompt_logprobs.resize(tokens.size());
}

}  // namespace kvlab::engine
