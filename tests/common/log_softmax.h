// The tests' own log-softmax, written out apart from sample::log_sum_exp so
// that what the product computes is checked against a second computation.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

namespace kvlab::test {

// log p(id) under the logits' softmax, in double.
inline double log_softmax_at(std::span<const float> logits, int32_t id) {
  double m = logits[0];
  for (float l : logits) m = std::max(m, double(l));
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - m);
  return double(logits[size_t(id)]) - m - std::log(sum);
}

}  // namespace kvlab::test
