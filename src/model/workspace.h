// A forward pass's activation buffers (Model::forward), kept out of
// model/model.h because they hold the kernels' scratch types.
#pragma once
#include <cstdint>
#include <vector>

#include "common/aligned_vector.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/experts.h"
#include "model/stage_times.h"

namespace kvlab::model {

// Activation buffers for up to `max_tokens` tokens per forward pass, allocated
// once. Shapes are [tokens][features], row-major.
class Workspace {
 public:
  Workspace(const Config& cfg, int max_tokens, int n_ctx, int n_threads);
  int max_tokens() const { return max_tokens_; }
  // Non-null: every forward pass adds its per-stage wall times here.
  StageTimes* stage_times = nullptr;
  // Non-null: every forward pass adds the cache positions its attention
  // scored, one per (token, KV head, layer, position): the work the kernels
  // were handed, counted where they are called rather than recomputed from a
  // formula (the lab's loop picture, server/lab.h).
  uint64_t* attended = nullptr;

 private:
  friend class Model;
  int max_tokens_;
  // Matmul inputs and outputs, on cache-line boundaries (common/aligned_vector.h).
  AlignedVector<float> x;     // (T, n_embd)  residual stream
  AlignedVector<float> xn;    // (T, n_embd)  normalised input of a sub-layer
  AlignedVector<float> q;     // (T, q_dim)
  AlignedVector<float> k;     // (T, kv_dim)
  AlignedVector<float> v;     // (T, kv_dim)
  AlignedVector<float> att;   // (T, q_dim)   attention output, heads concatenated
  AlignedVector<float> gate;  // (T, ffn_width)
  AlignedVector<float> up;    // (T, ffn_width)
  // A mixture-of-experts layer's (Config::is_moe), else empty:
  std::vector<float> router_logits;   // (T, n_expert), then the probabilities
  std::vector<ExpertPick> picks;      // (T, n_expert_used)
  ExpertGroups expert_groups;
  AlignedVector<float> expert_in;     // (T, n_embd) the rows of one expert's tokens
  AlignedVector<float> expert_out;    // (T, n_embd) its down projection's
  AlignedVector<float> expert_sum;    // (T, n_expert_used, n_embd) each pick's weighted output
  AlignedVector<float> shared_out;    // (T, n_embd) the shared expert's output (Config::n_ff_shexp)
  std::vector<float> rope;      // (T, rope_dim) cos/sin pairs per token
  std::vector<float> rope_swa;  // (T, rope_dim) the same for local layers (gemma3), else empty
  std::vector<kernels::AttnItem> attn_items;  // (T * n_head_kv) one per token and KV head
  // Where each run of batch entries that store into the same KV cache block
  // starts, and T last: Model::rope_and_store's K/V stores go one run per
  // task, so no two threads write one block's tiles.
  std::vector<uint32_t> kv_block_runs;
  kernels::AttnScratch attn;
  kernels::MatmulScratch mm;
};

}  // namespace kvlab::model
