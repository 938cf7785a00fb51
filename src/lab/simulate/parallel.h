// The time of a pass on a tensor/pipeline-parallel layout (lab/simulate/layout.h):
// one device's shard at its rates, plus the activations sent over the links
// (docs/perf-model.md, section 7).
#pragma once
#include "lab/cost/cost.h"
#include "lab/hardware/formats.h"
#include "lab/hardware/interconnect.h"
#include "lab/simulate/layout.h"
#include "lab/simulate/simulate.h"
#include "model/config.h"

namespace kvlab::perf {

// A ring all-reduce of `bytes` over n devices (Patarasuk and Yuan, "Bandwidth
// optimal all-reduce algorithms for clusters of workstations", JPDC 2009): a
// reduce-scatter and an all-gather of n - 1 steps each, every step sending
// 1/n of the bytes to the next device:
//   t = 2(n-1)/n · bytes / link bandwidth + 2(n-1) · hop latency
double allreduce_seconds(double bytes, int n, const Link& link);

// Seconds of one pass spent on the links: 2 all-reduces per layer of the
// pass's activations (tokens x d_model at `act_bytes`), and pp - 1 hand-offs
// of the same activations between stages (bytes / bandwidth + one hop).
double comm_seconds(const model::Config& c, const Pass& p, const Layout& l, double act_bytes);

// Bytes per activation element the all-reduces move: engines keep 16-bit
// activations, 32-bit when the matmuls run in fp32/tf32.
double activation_bytes(Precision compute);

// One pass on the layout: one device's shard (tp_shard) timed on `m`, its
// stages one after another (at batch 1 they add up to the whole shard), plus
// comm_seconds in PassTime::comm_s. With tp = pp = 1 exactly time_pass(c, p, m).
PassTime time_layout_pass(const model::Config& c, const Pass& p, const Machine& m, const Layout& l);

}  // namespace kvlab::perf
