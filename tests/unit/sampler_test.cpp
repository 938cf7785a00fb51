// The sampler chain (sample/sampler.h): each stage's effect on draws with a
// known distribution, seeded reproducibility, and the fast top-k selection
// against the chain written the plain way (every candidate sorted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/error_text.h"
#include "sample/sampler.h"

namespace kvlab::sample {
namespace {

std::vector<float> random_logits(size_t n, uint32_t seed, float sigma = 3.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<float> l(n);
  for (float& x : l) x = nd(rng);
  return l;
}

// The chain of sampler.h with no shortcut: bias, penalties, every candidate
// sorted by (logit desc, id asc), top-k cut, softmax at T, top-p, min-p, the
// draw.
int32_t reference_sample(const Params& p, std::vector<float> l, const std::vector<int32_t>& history,
                         std::mt19937_64& rng) {
  for (const auto& [id, bias] : p.logit_bias) l[size_t(id)] += bias;
  if (p.repeat_last_n > 0) {
    const size_t n = std::min(history.size(), size_t(p.repeat_last_n));
    std::map<int32_t, int> count;
    for (size_t i = history.size() - n; i < history.size(); ++i) ++count[history[i]];
    for (const auto& [id, c] : count) {
      float& v = l[size_t(id)];
      v = v > 0 ? v / p.repeat_penalty : v * p.repeat_penalty;
      v -= float(c) * p.frequency_penalty + p.presence_penalty;
    }
  }
  std::vector<int32_t> ids(l.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)] || (l[size_t(a)] == l[size_t(b)] && a < b); });
  if (p.temperature == 0.f) return ids[0];
  if (p.top_k > 0 && size_t(p.top_k) < ids.size()) ids.resize(size_t(p.top_k));
  std::vector<float> prob(ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) sum += (prob[i] = std::exp((l[size_t(ids[i])] - l[size_t(ids[0])]) / p.temperature));
  for (float& x : prob) x = float(x / sum);
  size_t keep = ids.size();
  if (p.top_p < 1.f) {
    double cum = 0;
    size_t n = 0;
    while (n < keep) {
      cum += prob[n++];
      if (cum >= p.top_p) break;
    }
    keep = std::max<size_t>(n, 1);
  }
  if (p.min_p > 0.f) {
    size_t n = 1;
    while (n < keep && prob[n] >= p.min_p * prob[0]) ++n;
    keep = n;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i];
  const double u = double(rng() >> 11) * (1.0 / 9007199254740992.0) * total;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += prob[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

TEST(Sampler, EqualsThePlainChainDrawForDraw) {
  constexpr int kVocab = 4096;
  std::vector<Params> settings;
  for (int top_k : {0, 1, 5, 40, kVocab - 1, kVocab, kVocab + 100})
    for (float temp : {0.f, 0.5f, 1.3f}) {
      Params p;
      p.top_k = top_k;
      p.temperature = temp;
      p.seed = uint64_t(top_k) * 7 + uint64_t(temp * 10);
      settings.push_back(p);
    }
  Params pen;
  pen.repeat_penalty = 1.3f;
  pen.top_p = 0.8f;
  pen.min_p = 0.1f;
  settings.push_back(pen);
  Params openai = pen;  // OpenAI's penalties and a bias, with and without the CTRL one
  openai.frequency_penalty = 0.7f;
  openai.presence_penalty = 0.4f;
  openai.logit_bias = {{9, 2.5f}, {17, -std::numeric_limits<float>::infinity()}, {4000, -1.f}};
  settings.push_back(openai);
  openai.repeat_penalty = 1.f;
  openai.temperature = 0.f;
  settings.push_back(openai);
  Params off;
  off.top_p = 1.f;
  off.min_p = 0.f;
  settings.push_back(off);
  for (const Params& p : settings) {
    Sampler s(p);
    std::mt19937_64 rng(p.seed);
    std::vector<int32_t> history = {5, 9, 5, 300};
    for (int step = 0; step < 30; ++step) {
      std::vector<float> l = random_logits(kVocab, uint32_t(step + 1));
      if (step % 3 == 0)  // ties: 60 equal logits above all others, across every top-k border
        for (int i = 100; i < 160; ++i) l[size_t(i)] = 50.f;
      const int32_t want = reference_sample(p, l, history, rng);
      ASSERT_EQ(s.sample(l, history), want) << "top_k " << p.top_k << " T " << p.temperature << " step " << step;
      history.push_back(want);
    }
  }
}

TEST(Sampler, GreedyIsTheArgmaxTiesToTheLowerId) {
  Params p;
  p.temperature = 0.f;
  Sampler s(p);
  EXPECT_EQ(s.sample(std::vector<float>{1.f, 3.f, 3.f, 2.f}, {}), 1);
  EXPECT_EQ(argmax(std::vector<float>{1.f, 3.f, 3.f, 2.f}), 1);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  Params p;
  p.temperature = 0.f;
  p.repeat_penalty = 2.f;
  Sampler s(p);
  // Token 0 (logit 3, seen) drops to 1.5, below token 1's 2.
  EXPECT_EQ(s.sample(std::vector<float>{3.f, 2.f, -1.f}, std::vector<int32_t>{0}), 1);
  // A negative logit seen gets more negative: -1 -> -2, so token 2 stays last.
  Params q = p;
  q.repeat_penalty = 0.25f;  // < 1 favours repeats: -1 * 0.25 = -0.25 beats -0.5
  Sampler r(q);
  EXPECT_EQ(r.sample(std::vector<float>{-0.5f, -0.6f, -1.f}, std::vector<int32_t>{2}), 2);
  // Only the last repeat_last_n tokens count.
  Params w = p;
  w.repeat_last_n = 1;
  Sampler t(w);
  EXPECT_EQ(t.sample(std::vector<float>{3.f, 2.f}, std::vector<int32_t>{0, 1}), 0);
}

// OpenAI's formula: logit - count * frequency_penalty - presence_penalty for
// a token in the window, after logit_bias. Greedy, so the argmax shows it.
TEST(Sampler, FrequencyAndPresencePenaltiesAndLogitBiasByHand) {
  Params p;
  p.temperature = 0.f;
  p.frequency_penalty = 0.5f;
  const std::vector<float> l = {3.f, 2.2f, 1.f};
  // Token 0 seen twice: 3 - 2 x 0.5 = 2, below token 1's 2.2.
  EXPECT_EQ(Sampler(p).sample(l, std::vector<int32_t>{0, 0}), 1);
  // Seen once: 2.5, still first.
  EXPECT_EQ(Sampler(p).sample(l, std::vector<int32_t>{0}), 0);
  // Presence counts once, whatever the count: 3 - 0.9 = 2.1 < 2.2 once or thrice.
  Params q;
  q.temperature = 0.f;
  q.presence_penalty = 0.9f;
  EXPECT_EQ(Sampler(q).sample(l, std::vector<int32_t>{0}), 1);
  EXPECT_EQ(Sampler(q).sample(l, std::vector<int32_t>{0, 0, 0}), 1);
  q.presence_penalty = 0.7f;  // 2.3 > 2.2
  EXPECT_EQ(Sampler(q).sample(l, std::vector<int32_t>{0, 0, 0}), 0);
  // A negative penalty favours what was seen: 1 + 2.5 = 3.5 beats 3.
  q.presence_penalty = -2.5f;
  EXPECT_EQ(Sampler(q).sample(l, std::vector<int32_t>{2}), 2);
  // The bias comes first and is not itself penalized away: 1 + 2.1 = 3.1.
  Params b;
  b.temperature = 0.f;
  b.logit_bias = {{2, 2.1f}};
  EXPECT_EQ(Sampler(b).sample(l, {}), 2);
  // -inf bans a token, even at a temperature where everything else could be drawn.
  Params ban;
  ban.temperature = 1.5f;
  ban.top_k = 0;
  ban.top_p = 1.f;
  ban.min_p = 0.f;
  ban.logit_bias = {{0, -std::numeric_limits<float>::infinity()}};
  Sampler s(ban);
  for (int i = 0; i < 500; ++i) ASSERT_NE(s.sample(l, {}), 0);
  // A bias for an id the logits do not have is an error, not a write past them.
  b.logit_bias = {{3, 1.f}};
  EXPECT_EQ(test::error_of([&] { Sampler(b).sample(l, {}); }), "logit bias for token id 3: the logits have 3 ids");
}

// Draw counts over many draws against the distribution each stage leaves.
std::map<int32_t, int> draw(const Params& p, const std::vector<float>& l, int n) {
  Sampler s(p);
  std::map<int32_t, int> count;
  for (int i = 0; i < n; ++i) ++count[s.sample(l, {})];
  return count;
}

TEST(Sampler, TemperatureDrawsFollowTheSoftmax) {
  const std::vector<float> l = {2.f, 1.f, 0.f, -1.f};
  for (float temp : {0.5f, 1.f, 2.f}) {
    Params p;
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.f;
    p.min_p = 0.f;
    p.seed = 11;
    const int n = 40000;
    const auto count = draw(p, l, n);
    double z = 0;
    for (float x : l) z += std::exp(x / temp);
    for (int32_t id = 0; id < 4; ++id) {
      const double want = std::exp(l[size_t(id)] / temp) / z;
      const double got = double(count.count(id) ? count.at(id) : 0) / n;
      EXPECT_NEAR(got, want, 4 * std::sqrt(want * (1 - want) / n) + 1e-3) << "T " << temp << " id " << id;
    }
  }
}

TEST(Sampler, TopKTopPAndMinPKeepOnlyTheirCandidates) {
  // Softmax at T = 1 of {3, 2, 1, 0, -1}: 0.636, 0.234, 0.086, 0.032, 0.012.
  const std::vector<float> l = {3.f, 2.f, 1.f, 0.f, -1.f};
  auto ids_drawn = [&](Params p) {
    p.temperature = 1.f;
    p.seed = 5;
    std::vector<int32_t> ids;
    for (const auto& [id, c] : draw(p, l, 5000)) ids.push_back(id);
    return ids;
  };
  Params none;
  none.top_k = 0;
  none.top_p = 1.f;
  none.min_p = 0.f;
  EXPECT_EQ(ids_drawn(none), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  Params k2 = none;
  k2.top_k = 2;
  EXPECT_EQ(ids_drawn(k2), (std::vector<int32_t>{0, 1}));
  Params p90 = none;
  p90.top_p = 0.9f;  // 0.636 + 0.234 = 0.870 < 0.9, + 0.086 = 0.956: three
  EXPECT_EQ(ids_drawn(p90), (std::vector<int32_t>{0, 1, 2}));
  Params m10 = none;
  m10.min_p = 0.1f;  // keep p >= 0.0636: the first three
  EXPECT_EQ(ids_drawn(m10), (std::vector<int32_t>{0, 1, 2}));
  Params k1 = none;
  k1.top_k = 1;
  EXPECT_EQ(ids_drawn(k1), (std::vector<int32_t>{0}));
}

TEST(Sampler, ASeedRepeatsItsDrawsAndAnotherSeedDoesNot) {
  const std::vector<float> l = random_logits(1000, 3, 1.f);
  auto run = [&](uint64_t seed) {
    Params p;
    p.seed = seed;
    p.top_k = 0;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(l, out));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  auto error_of = [](Params p) { return test::error_of([&] { validate(p); }); };
  Params p;
  p.temperature = -1.f;
  EXPECT_EQ(error_of(p), "--temp must be >= 0");
  p = Params{};
  p.top_p = 0.f;
  EXPECT_EQ(error_of(p), "--top-p must be in (0, 1]");
  p = Params{};
  p.min_p = 1.f;
  EXPECT_EQ(error_of(p), "--min-p must be in [0, 1)");
  p = Params{};
  p.repeat_penalty = 0.f;
  EXPECT_EQ(error_of(p), "--repeat-penalty must be > 0");
  p = Params{};
  p.frequency_penalty = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(error_of(p), "--frequency-penalty must be a finite number");
  p = Params{};
  p.presence_penalty = std::numeric_limits<float>::infinity();
  EXPECT_EQ(error_of(p), "--presence-penalty must be a finite number");
  p = Params{};
  p.logit_bias = {{7, std::numeric_limits<float>::infinity()}};
  EXPECT_EQ(error_of(p), "logit bias for token id 7 must be a number (or -inf to ban it)");
  p.logit_bias = {{-1, 1.f}};
  EXPECT_EQ(error_of(p), "logit bias for token id -1: token ids are >= 0");
  p.logit_bias = {{49152, 1.f}};
  EXPECT_EQ(test::error_of([&] { validate(p, 49152); }), "logit bias for token id 49152: the vocabulary has ids 0..49151");
  p = Params{};
  p.repeat_penalty = 0.f;
  EXPECT_THROW(Sampler{p}, Error);
}

// Probabilities 1/10, 2/10, 2/10, 5/10: log_sum_exp = log 10, the top three
// are ids 3, 1, 2 (the tie between 1 and 2 goes to the lower id).
TEST(Sampler, LogprobsByHand) {
  const std::vector<float> logits = {std::log(1.f), std::log(2.f), std::log(2.f), std::log(5.f)};
  EXPECT_NEAR(sample::log_sum_exp(logits), std::log(10.0), 1e-6);
  const double lse = sample::log_sum_exp(logits);
  const auto top = sample::top_logprobs(logits, lse, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 3);
  EXPECT_EQ(top[1].id, 1);
  EXPECT_EQ(top[2].id, 2);
  EXPECT_NEAR(top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_NEAR(top[1].logprob, std::log(0.2), 1e-6);
  EXPECT_EQ(sample::top_logprobs(logits, lse, 9).size(), 4u);
  EXPECT_TRUE(sample::top_logprobs(logits, lse, 0).empty());
}

}  // namespace
}  // namespace kvlab::sample
