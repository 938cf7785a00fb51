// Seeded test data: n floats from a normal distribution (mean 0).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace kvlab::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

}  // namespace kvlab::test
