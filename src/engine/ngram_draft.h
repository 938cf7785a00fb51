// Draft tokens for speculative decoding without a draft model: prompt lookup
// (A. Saxena, "Prompt Lookup Decoding", 2023; vLLM's "ngram" method,
// llama.cpp's lookup decoding). Text that repeats its context (code being
// edited, a summary quoting its source, a list continuing its pattern) is
// often continued by whatever followed the same few tokens the last time
// they appeared.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kvlab::engine {

constexpr int kMaxDraftTokens = 64;  // --draft's limit

struct DraftOptions {
  int max_tokens = 0;  // tokens drafted per step (--draft); 0: no speculation
  int ngram_max = 3;   // the longest suffix looked up (--draft-ngram)
  // The shortest: one token repeats too often by chance (in prose, drafts
  // after a lone repeated token were kept 3% of the time, bench/speculative).
  int ngram_min = 2;
};

// The tokens that followed the most recent earlier occurrence of the
// longest suffix of `history` (ngram_max tokens down to ngram_min, or
// ngram_max alone when it is the shorter) that occurred before: at most
// `max_tokens` of them, and none when no suffix of those lengths has
// occurred before.
std::vector<int32_t> ngram_draft(std::span<const int32_t> history, int max_tokens, int ngram_max, int ngram_min);

}  // namespace kvlab::engine
