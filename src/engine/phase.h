// The phases of inference: the engine tags each forward pass with one, and
// the lab (perf/) reasons about where a run spends its time in the same terms.
#pragma once

namespace kvlab::engine {

// Prefill: the prompt's tokens; Decode: one new token (or a speculative
// verify pass) against the KV cache; Recompute: a decode step without the
// cache, which runs the whole sequence again.
enum class Phase { Prefill, Decode, Recompute };
const char* phase_name(Phase p);  // "prefill", "decode", "recompute"

}  // namespace kvlab::engine
