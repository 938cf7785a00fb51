#include "lab/bench/stage_profile.h"

#include "lab/bench/attribution.h"

namespace kvlab::engine {

using model::Stage;
using perf::Op;

std::span<const Op> stage_ops(Stage s) {
  static constexpr Op kEmbedding[] = {Op::Embedding}, kAttnNorm[] = {Op::AttnNorm}, kQkv[] = {Op::Q, Op::K, Op::V},
                      kRope[] = {Op::Rope}, kAttention[] = {Op::Scores, Op::Softmax, Op::AttnV}, kO[] = {Op::O},
                      kResidual[] = {Op::Residual}, kFfnNorm[] = {Op::FfnNorm}, kGateUp[] = {Op::Gate, Op::Up},
                      kActivation[] = {Op::SiluMul}, kDown[] = {Op::Down}, kLmHead[] = {Op::OutputNorm, Op::LmHead};
  switch (s) {
    case Stage::Embedding: return kEmbedding;
    case Stage::AttnNorm: return kAttnNorm;
    case Stage::Qkv: return kQkv;
    case Stage::RopeStore: return kRope;
    case Stage::Attention: return kAttention;
    case Stage::O: return kO;
    case Stage::Residual: return kResidual;
    case Stage::FfnNorm: return kFfnNorm;
    case Stage::GateUp: return kGateUp;
    case Stage::Activation: return kActivation;
    case Stage::Down: return kDown;
    case Stage::LmHead: return kLmHead;
    case Stage::Count: break;
  }
  return {};
}

bool is_matmul(Stage s) {
  return s == Stage::Qkv || s == Stage::O || s == Stage::GateUp || s == Stage::Down || s == Stage::LmHead;
}

std::array<double, model::kStageCount> stage_weight_bytes(const model::Weights& w) {
  std::array<double, model::kStageCount> b{};
  auto add = [&](Stage s, double bytes) { b[size_t(s)] += bytes; };
  auto floats = [](const std::vector<float>& v) { return double(v.size() * sizeof(float)); };
  for (const auto& l : w.layers) {
    add(Stage::AttnNorm, floats(l.attn_norm));
    add(Stage::Qkv, double(l.wq.bytes() + l.wk.bytes() + l.wv.bytes()) + floats(l.bq) + floats(l.bk) + floats(l.bv));
    add(Stage::RopeStore, floats(l.q_norm) + floats(l.k_norm));
    add(Stage::O, double(l.wo.bytes()));
    add(Stage::Residual, floats(l.attn_post_norm) + floats(l.ffn_post_norm));
    add(Stage::FfnNorm, floats(l.ffn_norm));
    add(Stage::GateUp, double(l.gate_up_bytes(w.experts_per_token)));
    add(Stage::Down, double(l.down_bytes(w.experts_per_token)));
  }
  add(Stage::LmHead, double(w.output.bytes()) + floats(w.output_norm));
  return b;
}

StageProfile stage_profile(const model::StageTimes& times, const Trace& trace, const model::Model& m,
                           double kv_elem_bytes) {
  StageProfile p;
  const auto weight_bytes = stage_weight_bytes(m.weights());
  for (size_t s = 0; s < model::kStageCount; ++s) p.stages[s].seconds = times.seconds[s];
  for (const Step& step : trace.steps) {
    const perf::Cost c = perf::forward_cost(
        m.config(), cost_pass(step.n_tokens, step.n_past, kv_elem_bytes, step.logits_for_all, step.n_seq));
    ++p.passes;
    p.pass_seconds += step.seconds;
    for (size_t s = 0; s < model::kStageCount; ++s) {
      StageWork& w = p.stages[s];
      w.weight_bytes += weight_bytes[s];
      for (Op op : stage_ops(Stage(s))) {
        w.flops += c[op].flops;
        w.kv_bytes += c[op].kv_bytes;
      }
    }
  }
  return p;
}

}  // namespace kvlab::engine
