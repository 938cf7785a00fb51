// Each stage of the forward pass on the roofline by itself (`kvlab bench
// --profile`): its wall time from model/stage_times.h, next to the FLOPs and
// the bytes of the perf::Cost ops it runs, for the same passes. A matmul
// stage that streams its weights at the probed bandwidth is as fast as this
// machine allows; one well below it, or a stage that moves few bytes but
// takes time, is where a pass loses it.
#pragma once
#include <array>
#include <span>

#include "engine/trace.h"
#include "lab/cost/cost.h"
#include "model/model.h"
#include "model/stage_times.h"

namespace kvlab::engine {

struct StageWork {
  double seconds = 0;
  double flops = 0;
  double weight_bytes = 0;  // the matrices' and norm vectors' exact bytes
  double kv_bytes = 0;      // KV cache reads and writes
  double bytes() const { return weight_bytes + kv_bytes; }
};

struct StageProfile {
  int passes = 0;
  double pass_seconds = 0;  // the passes' traced wall time; the stages sum to a little less
  std::array<StageWork, model::kStageCount> stages{};
};

// The perf::Cost ops a stage runs; every op belongs to exactly one stage.
std::span<const perf::Op> stage_ops(model::Stage s);
// Whether a stage is a matmul job, whose arithmetic is the weights' (int8
// dot products for block formats). The others run fp32 (attention scores
// against a q8_0 cache excepted, whose softmax and sum of V are fp32 still).
bool is_matmul(model::Stage s);

// Weight bytes a pass reads in each stage: the matrices' and the norm and
// bias vectors' own bytes (they sum to Weights::matmul_bytes(); of a mixture
// of experts, one token's picks). The
// embedding lookup reads a few rows and is charged none, as in attribute().
std::array<double, model::kStageCount> stage_weight_bytes(const model::Weights& w);

// `times` were collected over exactly the passes of `trace`. Every pass is
// charged its LM head, as perf::Cost and attribute() charge it: a prompt
// longer than one pass (Session's max_batch) runs its LM head in the last
// pass only, so its earlier passes' lm_head bytes are counted but not read.
StageProfile stage_profile(const model::StageTimes& times, const Trace& trace, const model::Model& m,
                           double kv_elem_bytes);

}  // namespace kvlab::engine
