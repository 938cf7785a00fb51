// Where a forward pass spends its wall time, stage by stage, when asked
// (`kvlab bench --profile`). A stage is one step of Model::forward as the
// main thread runs it: a matmul job, a pool job of per-token element-wise
// work, the attention items. Its time runs from the end of the previous
// stage to its own end, so the stages of a pass add up to the pass, pool
// dispatch and waiting for the slower thread included.
//
// Off by default: the forward pass then pays one null check per stage.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvlab::model {

enum class Stage : uint8_t {
  Embedding,   // token rows and RoPE tables
  AttnNorm,    // RMSNorm before attention
  Qkv,         // the Q, K and V projections, one matmul job
  RopeStore,   // biases, Q/K norms (gemma3), RoPE, K and V into the cache
  Attention,   // scores, softmax and the weighted sum of V, over the cache
  O,           // output projection
  Residual,    // the two residual adds (and gemma3's post-norms)
  FfnNorm,     // RMSNorm before the MLP
  GateUp,      // the gate and up projections, one matmul job (MoE: and the routing)
  Activation,  // silu(gate) * up (gelu for gemma3)
  Down,        // down projection
  LmHead,      // final RMSNorm, logits (and their soft-cap)
  Count
};
inline constexpr size_t kStageCount = size_t(Stage::Count);
std::string_view stage_name(Stage s);

struct StageTimes {
  std::array<double, kStageCount> seconds{};
  double total() const;
};

// Charges the wall time since the previous mark (or since start) to a stage.
class StageClock {
 public:
  using Clock = std::chrono::steady_clock;
  // `times` null: every call is a no-op.
  explicit StageClock(StageTimes* times) : times_(times) {
    if (times_) last_ = Clock::now();
  }
  void mark(Stage s) {
    if (!times_) return;
    const auto now = Clock::now();
    times_->seconds[size_t(s)] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  StageTimes* times_;
  Clock::time_point last_{};
};

}  // namespace kvlab::model
