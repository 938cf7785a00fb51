#include "model/stage_times.h"

#include <numeric>

namespace kvlab::model {

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::Embedding: return "embedding";
    case Stage::AttnNorm: return "attn_norm";
    case Stage::Qkv: return "qkv";
    case Stage::RopeStore: return "rope+kv_store";
    case Stage::Attention: return "attention";
    case Stage::O: return "o";
    case Stage::Residual: return "residual";
    case Stage::FfnNorm: return "ffn_norm";
    case Stage::GateUp: return "gate+up";
    case Stage::Activation: return "activation";
    case Stage::Down: return "down";
    case Stage::LmHead: return "lm_head";
    case Stage::Count: break;
  }
  return "?";
}

double StageTimes::total() const { return std::accumulate(seconds.begin(), seconds.end(), 0.0); }

}  // namespace kvlab::model
