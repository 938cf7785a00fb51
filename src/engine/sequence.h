// One request while the serving engine runs it: what the scheduler tracks
// (slot, tokens, positions in the KV cache, drafts), how its tokens are
// chosen (SequenceSampler) and what its client sees (OutputProcessor).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/handle.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/sequence_sampler.h"
#include "engine/trace.h"

namespace kvlab::engine {

struct RequestTimes {
  Clock::time_point arrival, admitted, first_token, last_token;
};

struct Sequence {
  Sequence(int slot, GenRequest request, std::shared_ptr<Handle> handle, Clock::time_point arrival, int reused,
           const tokenizer::Tokenizer& tok, const sample::GrammarVocab& grammar_vocab);

  int slot;
  GenRequest req;
  std::shared_ptr<Handle> handle;
  RequestTimes times;
  // Scheduling: the prompt and the tokens generated so far, how many of
  // their positions the KV cache holds, and how many came from the prefix
  // cache.
  std::vector<int32_t> tokens;
  int n_past = 0, n_cached = 0, n_generated = 0;
  bool prefilling = true;
  std::vector<int32_t> draft;  // this step's drafts: the tokens fed after tokens.back()
  int drafted = 0, draft_accepted = 0;
  SequenceSampler sampler;
  OutputProcessor output;
  std::vector<TokenLogprobs> prompt_logprobs;  // echo with logprobs: the prompt's entries, as its chunks run
};

}  // namespace kvlab::engine
