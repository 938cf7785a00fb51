#include "lab/simulate/parallel.h"

namespace kvlab::perf {

double allreduce_seconds(double bytes, int n, const Link& link) {
  if (n <= 1) return 0.0;
  const double steps = 2.0 * (n - 1);
  return steps / n * bytes / link.bytes_per_s + steps * link.hop_latency_s;
}

double comm_seconds(const model::Config& c, const Pass& p, const Layout& l, double act_bytes) {
  if (l.devices() == 1 || !l.link) return 0.0;
  const double activations = double(p.new_tokens * p.batch) * double(c.n_embd) * act_bytes;
  // Megatron's split needs one all-reduce after the attention output
  // projection and one after the MLP down projection of every layer.
  const double tp = 2.0 * double(c.n_layer) * allreduce_seconds(activations, l.tp, *l.link);
  const double pp = double(l.pp - 1) * (activations / l.link->bytes_per_s + l.link->hop_latency_s);
  return tp + pp;
}

double activation_bytes(Precision compute) {
  return compute == Precision::FP32 || compute == Precision::TF32 ? 4.0 : 2.0;
}

PassTime time_layout_pass(const model::Config& c, const Pass& p, const Machine& m, const Layout& l) {
  if (l.devices() == 1) return time_pass(c, p, m);
  // The stages of a pass of one batch run one after another (the pipeline
  // bubble at batch 1): their times add up to the whole shard's.
  PassTime t = time_pass(tp_shard(c, l.tp), p, m);
  t.comm_s = comm_seconds(c, p, l, activation_bytes(m.precision));
  t.seconds += t.comm_s;
  return t;
}

}  // namespace kvlab::perf
