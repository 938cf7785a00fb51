#include "lab/simulate/serve_pass.h"

#include <algorithm>

#include "lab/simulate/parallel.h"

namespace kvlab::perf {
namespace {

// Adds `g`'s cost to `sum`: FLOPs, KV and activation bytes add up, weight
// bytes do not (every group multiplies by the same matrices in one pass),
// except the embedding rows each token looks up.
void add_group(Cost& sum, const Cost& g) {
  for (size_t i = 0; i < kOpCount; ++i) {
    OpCost& s = sum.ops[i];
    const OpCost& o = g.ops[i];
    s.flops += o.flops;
    s.kv_bytes += o.kv_bytes;
    s.act_bytes += o.act_bytes;
    s.weight_bytes = Op(i) == Op::Embedding ? s.weight_bytes + o.weight_bytes : std::max(s.weight_bytes, o.weight_bytes);
  }
}

Cost serve_pass_cost(const model::Config& c, const Pass& shape, const PassRows& rows) {
  Cost sum;
  for (int pos : rows.decode_positions) {
    Pass p = shape;
    p.batch = 1;
    p.new_tokens = 1;
    p.past = pos;
    add_group(sum, forward_cost(c, p));
  }
  for (const PassRows::Chunk& ch : rows.chunks) {
    Pass p = shape;
    p.batch = 1;
    p.new_tokens = ch.tokens;
    p.past = ch.past;
    Cost g = forward_cost(c, p);
    // A chunk that does not end its prompt asks for no logits
    // (Scheduler::add_prefill_rows), so the output norm and LM head skip it.
    if (!ch.logits) g.ops[size_t(Op::OutputNorm)] = g.ops[size_t(Op::LmHead)] = OpCost{};
    add_group(sum, g);
  }
  return sum;
}

}  // namespace

int PassRows::tokens() const {
  int n = int(decode_positions.size());
  for (const Chunk& ch : chunks) n += ch.tokens;
  return n;
}

PassTime time_serve_pass(const model::Config& c, const Pass& shape, const PassRows& rows, const Machine& m,
                         const Layout& l) {
  const model::Config& dev = l.devices() == 1 ? c : tp_shard(c, l.tp);
  int64_t context = 1;
  for (int pos : rows.decode_positions) context = std::max<int64_t>(context, pos + 1);
  for (const PassRows::Chunk& ch : rows.chunks) context = std::max<int64_t>(context, ch.past + ch.tokens);
  const AttentionShape attn{double(rows.tokens()), context, rows.chunks.empty()};
  PassTime t = time_cost(dev, serve_pass_cost(dev, shape, rows), attn, m);
  // The links carry the pass's activations whatever sequences they are
  // from: comm_seconds counts new_tokens x batch of them.
  Pass all = shape;
  all.new_tokens = rows.tokens();
  all.batch = 1;
  t.comm_s = comm_seconds(c, all, l, activation_bytes(m.precision));
  t.seconds += t.comm_s;
  return t;
}

}  // namespace kvlab::perf
