// The one verify path of speculative decoding, shared by engine::generate
// (one sequence) and the ServingEngine (many). A verify pass feeds a sampled
// token and its drafts; row j of its logits follows the fed token and the
// first j drafts. Each row is sampled in turn, exactly as plain decoding
// would sample it once the drafts before it were kept, and drafts are kept
// while they are what was sampled. So the tokens are those of plain
// decoding, sampled or greedy, seed for seed; only the number of passes
// changes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace kvlab::engine {

// `draw(j)` samples row j (called for j > 0 only after drafts[j - 1] was
// kept; nullopt: no token can be drawn, which ends the run). Returns the
// tokens drawn: the kept drafts, then the first token that is not a draft
// (absent when a draw failed).
std::vector<int32_t> accept_drafts(std::span<const int32_t> drafts,
                                   const std::function<std::optional<int32_t>(size_t j)>& draw);

}  // namespace kvlab::engine
