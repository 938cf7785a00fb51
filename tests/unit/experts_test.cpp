// Mixture-of-experts routing (model/experts.h), against values computed by hand.
#include "model/experts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kvlab::model {
namespace {

std::vector<ExpertPick> picks_of(std::vector<float> logits, int k, bool normalize) {
  std::vector<ExpertPick> out(static_cast<size_t>(k));
  pick_experts(logits.data(), int(logits.size()), k, normalize, out.data());
  return out;
}

TEST(Experts, PicksTheLargestProbabilitiesLargestFirst) {
  // softmax(0, ln 2, ln 4, ln 3) = (1, 2, 4, 3) / 10
  const auto p = picks_of({0.f, std::log(2.f), std::log(4.f), std::log(3.f)}, 2, false);
  EXPECT_EQ(p[0].expert, 2);
  EXPECT_EQ(p[1].expert, 3);
  EXPECT_NEAR(p[0].weight, 0.4f, 1e-6f);
  EXPECT_NEAR(p[1].weight, 0.3f, 1e-6f);
}

TEST(Experts, NormalisedWeightsSumToOne) {
  const auto p = picks_of({0.f, std::log(2.f), std::log(4.f), std::log(3.f)}, 2, true);
  EXPECT_NEAR(p[0].weight, 4.f / 7.f, 1e-6f);
  EXPECT_NEAR(p[1].weight, 3.f / 7.f, 1e-6f);
}

TEST(Experts, EqualProbabilitiesGoToTheLowerExpert) {
  const auto p = picks_of({1.f, 3.f, 1.f, 3.f, 1.f}, 3, false);
  EXPECT_EQ(p[0].expert, 1);
  EXPECT_EQ(p[1].expert, 3);
  EXPECT_EQ(p[2].expert, 0);
}

TEST(Experts, EveryExpertWhenAllArePicked) {
  const auto p = picks_of({0.5f, -1.f, 2.f}, 3, true);
  EXPECT_EQ(p[0].expert, 2);
  EXPECT_EQ(p[1].expert, 0);
  EXPECT_EQ(p[2].expert, 1);
  EXPECT_NEAR(p[0].weight + p[1].weight + p[2].weight, 1.f, 1e-6f);
}

TEST(Experts, GroupsListEachExpertsSlotsInOrder) {
  // Three tokens, two picks each: slots 0..5.
  const std::vector<ExpertPick> picks = {{2, 0.f}, {0, 0.f}, {2, 0.f}, {1, 0.f}, {0, 0.f}, {2, 0.f}};
  ExpertGroups g;
  g.build(picks, 4);
  EXPECT_EQ(std::vector<uint32_t>(g.of(0).begin(), g.of(0).end()), (std::vector<uint32_t>{1, 4}));
  EXPECT_EQ(std::vector<uint32_t>(g.of(1).begin(), g.of(1).end()), (std::vector<uint32_t>{3}));
  EXPECT_EQ(std::vector<uint32_t>(g.of(2).begin(), g.of(2).end()), (std::vector<uint32_t>{0, 2, 5}));
  EXPECT_TRUE(g.of(3).empty());
}

}  // namespace
}  // namespace kvlab::model
