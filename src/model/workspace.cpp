#include "model/workspace.h"

namespace kvlab::model {

Workspace::Workspace(const Config& c, int max_tokens, int n_ctx, int n_threads)
    : max_tokens_(max_tokens), attn(c.gqa_group(), size_t(c.head_dim), n_threads, n_ctx) {
  const size_t T = size_t(max_tokens);
  x.resize(T * size_t(c.n_embd));
  xn.resize(T * size_t(c.n_embd));
  q.resize(T * size_t(c.q_dim()));
  k.resize(T * size_t(c.kv_dim()));
  v.resize(T * size_t(c.kv_dim()));
  att.resize(T * size_t(c.q_dim()));
  gate.resize(T * size_t(c.max_ffn_width()));
  up.resize(T * size_t(c.max_ffn_width()));
  if (c.is_moe()) {
    router_logits.resize(T * size_t(c.n_expert));
    picks.resize(T * size_t(c.n_expert_used));
    expert_in.resize(T * size_t(c.n_embd));
    expert_out.resize(T * size_t(c.n_embd));
    expert_sum.resize(T * size_t(c.n_expert_used) * size_t(c.n_embd));
    if (c.n_ff_shexp > 0) shared_out.resize(T * size_t(c.n_embd));
  }
  rope.resize(T * size_t(c.rope_dim));
  if (c.swa_window > 0) rope_swa.resize(T * size_t(c.rope_dim));
  attn_items.reserve(T * size_t(c.n_head_kv));
  kv_block_runs.reserve(T + 1);
}

}  // namespace kvlab::model
