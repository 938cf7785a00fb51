// KL divergence against a base (lab/quality/kl_divergence.h) and the base
// file (lab/quality/logits_file.h): the file's bytes and round trip, its
// refusals, and the statistics on cases worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/scratch_dir.h"
#include "lab/quality/kl_divergence.h"
#include "lab/quality/logits_file.h"

namespace kvlab {
namespace {

using engine::KldToken;

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// Two chunks of 4 tokens over a vocabulary of 5: one scored row per chunk
// (after position 2), each 2 * 3 + 4 = 10 uint16 words.
const engine::LogitsFileHeader kHeader{4, 5, 2};
const std::vector<int32_t> kTokens = {1, 2, 3, 4, 0, 1, 2, 3};
const std::vector<std::vector<float>> kRows = {{2.f, 1.f, 0.f, -1.f, -30.f}, {0.5f, 0.5f, 0.5f, 3.f, 0.f}};

std::string write_base(const test::ScratchDir& dir) {
  const std::string path = dir.file("base.bin");
  engine::LogitsFileWriter w(path, kHeader, kTokens);
  for (const auto& row : kRows) {
    engine::quantize_log_probs(row, w.row(0));
    w.write_chunk();
  }
  return path;
}

double log_softmax(const std::vector<float>& row, size_t i) {
  double sum = 0;
  for (const float l : row) sum += std::exp(double(l));
  return double(row[i]) - std::log(sum);
}

TEST(LogitsFile, HasLlamaPerplexitysLayout) {
  const test::ScratchDir dir;
  const std::vector<char> b = bytes_of(write_base(dir));
  EXPECT_EQ(engine::row_words(5), 10u);
  EXPECT_EQ(engine::row_words(6), 10u);
  ASSERT_EQ(b.size(), 8 + 3 * 4 + 8 * 4 + 2 * 10 * 2u);
  EXPECT_EQ(std::string(b.data(), 8), "_logits_");
  int32_t header[3], first_token;
  std::memcpy(header, b.data() + 8, sizeof header);
  std::memcpy(&first_token, b.data() + 20, sizeof first_token);
  EXPECT_EQ(header[0], 4);
  EXPECT_EQ(header[1], 5);
  EXPECT_EQ(header[2], 2);
  EXPECT_EQ(first_token, 1);
  // Row 0: max 2, min clamped to 2 - 16 = -14: scale 16 / 65535, the top
  // logit at 65535, one 16th of the range per nat below, -30 at the floor.
  float scale;
  uint16_t q[5];
  std::memcpy(&scale, b.data() + 52, sizeof scale);
  std::memcpy(q, b.data() + 52 + 8, sizeof q);
  EXPECT_FLOAT_EQ(scale, 16.f / 65535.f);
  EXPECT_EQ(q[0], 65535);
  EXPECT_EQ(q[2], 57343);  // (0 + 14) / 16 * 65535 = 57343.1, rounded
  EXPECT_EQ(q[4], 0);
}

TEST(LogitsFile, RoundTripsTheLogProbabilities) {
  const test::ScratchDir dir;
  engine::LogitsFileReader r(write_base(dir));
  EXPECT_EQ(r.header().n_ctx, 4);
  EXPECT_EQ(r.header().n_vocab, 5);
  EXPECT_EQ(r.header().n_chunk, 2);
  EXPECT_EQ(r.tokens(), kTokens);
  for (const auto& row : kRows) {
    const std::span<const uint16_t> got = r.next_chunk();
    ASSERT_EQ(got.size(), 10u);
    for (size_t i = 0; i < 5; ++i) {
      // Half a step of 16 / 65535 nats, where the logit is within the range.
      if (row[i] > *std::max_element(row.begin(), row.end()) - 16) {
        EXPECT_NEAR(engine::row_log_prob(got, i), log_softmax(row, i), 1.3e-4) << i;
      }
    }
  }
  EXPECT_THROW(r.next_chunk(), Error);
}

std::string refusal(const std::string& path) {
  try {
    engine::LogitsFileReader r(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LogitsFile, RefusesBadFiles) {
  const test::ScratchDir dir;
  const std::vector<char> good = bytes_of(write_base(dir));
  const std::string path = dir.file("bad.bin");
  std::vector<char> b = good;
  b[1] = 'L';
  write_bytes(path, b);
  EXPECT_EQ(refusal(path), path + " is not a llama-perplexity logits file (no \"_logits_\" header)");
  b = good;
  b.pop_back();
  write_bytes(path, b);
  EXPECT_EQ(refusal(path), path + " has 91 bytes; its header (n_ctx 4, n_vocab 5, 2 chunks) needs 92 (truncated)");
  b = good;
  b[20] = 9;  // the first token, past the vocabulary of 5
  write_bytes(path, b);
  EXPECT_EQ(refusal(path), path + ": token 9 outside its vocabulary of 5");
  b = good;
  b[19] = 0x7f;  // n_chunk of 2^31 - ...: out of range, not a huge allocation
  write_bytes(path, b);
  EXPECT_NE(refusal(path).find("header out of range"), std::string::npos);
  write_bytes(path, std::vector<char>(good.begin(), good.begin() + 10));
  EXPECT_NE(refusal(path).find("is not a llama-perplexity logits file"), std::string::npos);
}

// Base P = (1/2, 1/2), model Q = (3/4, 1/4), the next token the second:
// KLD = 1/2 ln(2/3) + 1/2 ln 2 = 1/2 ln(4/3); Δp = 1/4 - 1/2. All-equal
// logits encode exactly (scale 0, every log p at -ln 2).
TEST(KlDivergence, ComparesARowByHand) {
  std::vector<uint16_t> base(engine::row_words(2));
  engine::quantize_log_probs(std::vector<float>{1.f, 1.f}, base);
  const KldToken t = engine::compare_row(std::vector<float>{float(std::log(3.0)), 0.f}, base, 1);
  EXPECT_NEAR(t.kld, 0.5 * std::log(4.0 / 3.0), 1e-6);
  EXPECT_NEAR(t.nll, std::log(4.0), 1e-6);
  EXPECT_NEAR(t.nll_base, std::log(2.0), 1e-6);
  EXPECT_NEAR(t.p_diff, -0.25, 1e-6);
  EXPECT_TRUE(t.same_top);  // both first at index 0 (the base's tie goes to the first)
  // The base's tokens more than 16 nats down are left out of the sum: a
  // model that moves all of their mass still scores KLD 0 on the rest.
  engine::quantize_log_probs(std::vector<float>{0.f, -40.f}, base);
  const KldToken far = engine::compare_row(std::vector<float>{0.f, 0.f}, base, 0);
  EXPECT_NEAR(far.kld, std::log(2.0), 1e-4);  // P(0) ln(P(0) / Q(0)), P(0) ~ 1
  EXPECT_FALSE(engine::compare_row(std::vector<float>{0.f, 1.f}, base, 0).same_top);
}

// 11 predictions: ten alike, one off. KLD 0 x10 and 1.1: mean 0.1, variance
// 1.21/11 - 0.01 = 0.1, error sqrt(0.1 / 10) = 0.1. Same top 10 of 11: error
// sqrt(10/11 * 1/11 / 10) = 1/11. NLL 1 x10 and 2.1, the base's the same:
// mean 1.1 ± 0.1, ratio exactly 1 ± 0.
TEST(KlDivergence, StatisticsByHand) {
  std::vector<KldToken> tokens(10, KldToken{0, 0, 1, 1, true});
  tokens.push_back(KldToken{1.1, 0.11, 2.1, 2.1, false});
  const engine::KldStats s = engine::kld_stats(tokens);
  EXPECT_EQ(s.count, 11);
  EXPECT_NEAR(s.kld.value, 0.1, 1e-12);
  EXPECT_NEAR(s.kld.err, 0.1, 1e-12);
  EXPECT_NEAR(s.same_top.value, 10.0 / 11, 1e-12);
  EXPECT_NEAR(s.same_top.err, 1.0 / 11, 1e-12);
  EXPECT_NEAR(s.ppl.value, std::exp(1.1), 1e-9);
  EXPECT_NEAR(s.ppl.err, std::exp(1.1) * 0.1, 1e-9);
  EXPECT_NEAR(s.ln_ppl_ratio.value, 0, 1e-12);
  EXPECT_NEAR(s.ln_ppl_ratio.err, 0, 1e-6);
  EXPECT_NEAR(s.ppl_ratio.value, 1, 1e-12);
  EXPECT_NEAR(s.ln_ppl_correlation, 1, 1e-9);
  // Δp: 0 x10 and 0.11: mean 0.01; mean Δp² = 0.0121 / 11 = 0.0011.
  EXPECT_NEAR(s.p_diff.value, 0.01, 1e-12);
  EXPECT_NEAR(s.rms_p_diff.value, std::sqrt(0.0011), 1e-12);
  // Fewer than 11 values: no errors (llama.cpp's rule).
  EXPECT_EQ(engine::kld_stats(std::span(tokens).first(10)).kld.err, 0);
}

TEST(KlDivergence, QuantilesInterpolate) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(engine::quantile(v, 0), 1);
  EXPECT_DOUBLE_EQ(engine::quantile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(engine::quantile(v, 0.99), 3.97);
  EXPECT_DOUBLE_EQ(engine::quantile(v, 1), 4);
  EXPECT_THROW(engine::quantile({}, 0.5), Error);
}

}  // namespace
}  // namespace kvlab
