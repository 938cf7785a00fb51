#include "model/kv_shape.h"

namespace kvlab::model {

kv::Shape kv_shape(const Config& cfg) {
  kv::Shape s;
  s.n_layer = cfg.n_layer;
  s.n_head_kv = cfg.n_head_kv;
  s.head_dim = cfg.head_dim;
  s.swa_window = cfg.swa_window;
  if (cfg.swa_window > 0) {
    s.swa.resize(size_t(cfg.n_layer));
    for (int l = 0; l < cfg.n_layer; ++l) s.swa[size_t(l)] = cfg.is_swa(l);
  }
  return s;
}

}  // namespace kvlab::model
