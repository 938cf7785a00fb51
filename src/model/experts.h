// Routing of a mixture-of-experts layer (Config::is_moe): which of the
// layer's experts each token runs, with what weight, and the batch's tokens
// grouped by expert so that each expert's matrices run once per pass over
// all the tokens that picked it (llama.cpp's mul_mat_id does the same).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kvlab::model {

struct ExpertPick {
  int32_t expert = 0;
  float weight = 0.f;
};

// One token's picks from its n_expert router logits (llama.cpp's
// build_moe_ffn with softmax gating): the softmax's k largest
// probabilities, largest first (equal ones: the lower expert first), as the
// experts' weights; with `normalize`, divided by their sum (clamped below at
// 2^-14, the smallest normal f16, as llama.cpp clamps it). `logits` is
// overwritten with the probabilities.
void pick_experts(float* logits, int n_expert, int k, bool normalize, ExpertPick* out);

// The (token, pick) slots t * k + j of a batch's picks, grouped by expert.
class ExpertGroups {
 public:
  void build(std::span<const ExpertPick> picks, int n_expert);
  std::span<const uint32_t> of(int expert) const {
    return std::span(slots_).subspan(start_[size_t(expert)], start_[size_t(expert) + 1] - start_[size_t(expert)]);
  }

 private:
  std::vector<uint32_t> start_;  // (n_expert + 1) offsets into slots_
  std::vector<uint32_t> slots_;  // slot indices, by expert, in slot order
  std::vector<uint32_t> next_;   // build's fill positions, kept to not allocate per layer
};

}  // namespace kvlab::model
