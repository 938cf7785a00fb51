// The model config the perf tests count by hand: 2 layers, d_model 8,
// d_ff 16, 2 query heads and 1 KV head of width 4, vocabulary 10, untied
// output.
#pragma once
#include "model/config.h"

namespace kvlab::test {

inline model::Config hand_config() {
  model::Config c;
  c.arch = "llama";
  c.n_layer = 2;
  c.n_embd = 8;
  c.n_ff = 16;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = 4;
  c.rope_dim = 4;
  c.n_vocab = 10;
  return c;
}

}  // namespace kvlab::test
