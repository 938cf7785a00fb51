#include "model/experts.h"

#include <algorithm>
#include <numeric>

#include "kernels/ops.h"

namespace kvlab::model {

void pick_experts(float* logits, int n_expert, int k, bool normalize, ExpertPick* out) {
  kernels::softmax(logits, size_t(n_expert));
  // Insertion into the k kept so far, largest first: k is small (2 to 8),
  // and strictly larger is needed to pass, so equal ones keep the lower expert.
  int kept = 0;
  for (int e = 0; e < n_expert; ++e) {
    const float p = logits[e];
    if (kept == k && !(p > out[k - 1].weight)) continue;
    int j = std::min(kept, k - 1);
    for (; j > 0 && p > out[j - 1].weight; --j) out[j] = out[j - 1];
    out[j] = {int32_t(e), p};
    kept = std::min(kept + 1, k);
  }
  if (!normalize) return;
  float sum = 0.f;
  for (int j = 0; j < k; ++j) sum += out[j].weight;
  constexpr float kSmallestNormalF16 = 6.103515625e-5f;
  sum = std::max(sum, kSmallestNormalF16);
  for (int j = 0; j < k; ++j) out[j].weight /= sum;
}

void ExpertGroups::build(std::span<const ExpertPick> picks, int n_expert) {
  start_.assign(size_t(n_expert) + 1, 0);
  for (const ExpertPick& p : picks) ++start_[size_t(p.expert) + 1];
  std::partial_sum(start_.begin(), start_.end(), start_.begin());
  slots_.resize(picks.size());
  next_.assign(start_.begin(), start_.end() - 1);
  for (size_t s = 0; s < picks.size(); ++s) slots_[next_[size_t(picks[s].expert)]++] = uint32_t(s);
}

}  // namespace kvlab::model
