// What the KV cache needs to know of a model, and nothing more: its own
// struct rather than model::Config, so the cache sits below the model
// (the model builds one with model::kv_shape, model/kv_shape.h).
#pragma once
#include <cstddef>
#include <vector>

namespace kvlab::kv {

struct Shape {
  int n_layer = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  // A sliding-window layer's query at position p sees p-swa_window+1 .. p;
  // 0: no sliding-window layers.
  int swa_window = 0;
  std::vector<char> swa;  // [layer]: a sliding-window layer; empty: none is

  int kv_dim() const { return n_head_kv * head_dim; }
  bool is_swa(int layer) const { return !swa.empty() && swa[size_t(layer)]; }
};

}  // namespace kvlab::kv
