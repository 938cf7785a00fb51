// What happened, step by step: every forward pass a Session runs, with its
// phase, shape and wall time. Metrics (TTFT, tok/s, per-token latency) and
// the roofline attribution are computed from it, never measured twice.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/phase.h"

namespace kvlab::engine {

struct Step {
  Phase phase;
  int n_tokens;    // tokens pushed through the layers in this pass
  int n_past;      // positions already in the cache when the pass started
  double seconds;  // wall time of the forward pass
  bool logits_for_all = false;  // the LM head ran on every token (a speculative verify pass), not just the last
  int n_seq = 1;   // sequences in the pass, n_tokens / n_seq new tokens each (a batched decode step)
};

struct Trace {
  std::vector<Step> steps;
  void clear() { steps.clear(); }
  size_t passes(Phase p) const {
    size_t n = 0;
    for (const Step& s : steps) n += s.phase == p;
    return n;
  }
};

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace kvlab::engine
