// The time of one pass of the serving scheduler (engine/scheduler.h), which
// mixes rows of many sequences: a decode row for each running sequence, at
// its own position, then chunks of the prompts still prefilling. Each group
// of rows is costed by perf::forward_cost as a pass of its own, and the
// groups are summed with the weights counted once, as the engine's one
// batched forward pass reads them once (cost.h's convention); the sum is
// timed by time_cost on one device's shard plus the links' time
// (lab/simulate/parallel.h).
#pragma once
#include <vector>

#include "lab/cost/cost.h"
#include "lab/simulate/layout.h"
#include "lab/simulate/simulate.h"
#include "model/config.h"

namespace kvlab::perf {

struct PassRows {
  struct Chunk {
    int past = 0;         // prompt positions already in the cache
    int tokens = 0;       // prompt tokens this pass computes
    bool logits = false;  // the chunk ends the prompt: its last row gives the first token
  };
  std::vector<int> decode_positions;  // the position each decode row (or draft) feeds
  std::vector<Chunk> chunks;
  int tokens() const;
};

// `shape` gives the dtypes (weight_bytes, kv_bytes, act_bytes); its token
// counts are ignored.
PassTime time_serve_pass(const model::Config& c, const Pass& shape, const PassRows& rows, const Machine& m,
                         const Layout& l);

}  // namespace kvlab::perf
