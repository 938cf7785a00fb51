// Speculative decoding with prompt-lookup drafts (engine/generate.h) gives
// the tokens of plain decoding, greedy or sampled, and stops where it stops.
// The ground for it: a verify pass's logits rows equal, bit for bit, the
// logits decode() gives at the same positions (each matmul output element is
// one weight row against one activation row, and each position's attention
// reads its own prefix: kernels/matmul.h, kv_cache_equivalence_test.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "common/arch_graft.h"
#include "common/error.h"
#include "common/models.h"
#include "common/scratch_dir.h"
#include "engine/generate.h"
#include "engine/session.h"

namespace kvlab {
namespace {

// Code that repeats itself: the default model continues it with more of the
// same, which prompt lookup drafts well.
const char* kRepetitive =
    "class Vector3:\n    def __init__(self, x, y, z):\n        self.x = x\n        self.y = y\n        self.z = z\n\n"
    "    def __add__(self, other):\n        return Vector3(self.x + other.x, self.y + other.y, self.z + other.z)\n\n"
    "    def __sub__(self, other):\n        return Vector3(self.x - other.x, self.y - other.y, self.z - other.z)\n\n"
    "    def __mul__(self, other):\n";

engine::GenerateResult run(const model::Model& m, const tokenizer::Tokenizer& tok, const std::vector<int32_t>& prompt,
                           engine::GenerateOptions g, int draft, engine::SessionOptions so = {}) {
  so.n_threads = 2;
  engine::Session s(m, so);
  g.draft.max_tokens = draft;
  return engine::generate(s, prompt, g, [&](int32_t id) { return tok.is_end_of_generation(id); });
}

void expect_same_tokens(const test::LoadedModel& lm, const std::vector<int32_t>& prompt, const engine::GenerateOptions& g,
                        engine::SessionOptions so = {}, int min_accepted = 0) {
  const engine::GenerateResult plain = run(*lm.model, *lm.tok, prompt, g, 0, so);
  for (int draft : {1, 3, 8}) {
    const engine::GenerateResult spec = run(*lm.model, *lm.tok, prompt, g, draft, so);
    EXPECT_EQ(spec.tokens, plain.tokens) << "draft " << draft;
    EXPECT_EQ(spec.stop, plain.stop) << "draft " << draft;
    EXPECT_EQ(spec.token_seconds.size(), spec.tokens.size());
    EXPECT_LE(spec.accepted, spec.drafted);
    EXPECT_GE(spec.accepted, min_accepted) << "draft " << draft;
    std::printf("  draft %d: %d of %d drafts kept, %d verify passes for %zu tokens\n", draft, spec.accepted,
                spec.drafted, spec.verify_passes, spec.tokens.size());
  }
}

TEST(Speculative, VerifyRowsAreTheDecodeLogits) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  const std::vector<int32_t> prompt = lm.tok->encode(kRepetitive, true, true);
  const std::vector<int32_t> next = {1, 2, 3, 4, 5};
  engine::SessionOptions so;
  so.n_threads = 2;
  engine::Session a(*lm.model, so), b(*lm.model, so);
  a.prefill(prompt);
  b.prefill(prompt);
  const std::span<const float> rows = a.verify(next);
  const size_t V = size_t(lm.model->config().n_vocab);
  ASSERT_EQ(rows.size(), next.size() * V);
  for (size_t i = 0; i < next.size(); ++i) {
    const std::span<const float> d = b.decode(next[i]);
    EXPECT_EQ(std::memcmp(d.data(), rows.data() + i * V, V * sizeof(float)), 0) << "row " << i;
  }
  // Dropping the last three and feeding others gives what a session that
  // never saw them gives.
  a.truncate(int(prompt.size()) + 2);
  b.truncate(int(prompt.size()) + 2);
  EXPECT_EQ(a.history(), b.history());
  const std::vector<float> after_a(a.decode(9).begin(), a.decode(9).end());
  engine::Session c(*lm.model, so);
  c.prefill(prompt);
  c.decode(1);
  c.decode(2);
  c.decode(9);
  const std::span<const float> after_c = c.decode(9);
  EXPECT_EQ(std::memcmp(after_a.data(), after_c.data(), V * sizeof(float)), 0);
  EXPECT_THROW(a.truncate(a.n_past() + 1), Error);
}

TEST(Speculative, GreedyAndSampledTokensAreThoseOfPlainDecoding) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  const std::vector<int32_t> prompt = lm.tok->encode(kRepetitive, true, true);
  engine::GenerateOptions g;
  g.n_predict = 96;
  g.ignore_eos = true;
  g.sampling.temperature = 0;
  expect_same_tokens(lm, prompt, g, {}, 30);  // measured: 36 (one draft a step) to 64 of the 96 tokens
  // Sampling: each token is still one draw on its own prefix's logits, in
  // the same order. At a low temperature the text stays close to the
  // repetitive greedy one, so drafts are kept.
  g.sampling.temperature = 0.3f;
  g.sampling.top_k = 40;
  g.sampling.top_p = 0.95f;
  g.sampling.seed = 1234;
  expect_same_tokens(lm, prompt, g, {}, 1);
  // With penalties over a window that the drafts extend. They push the text
  // off its repetition, and how many drafts are kept then turns on the
  // logits' last bits (none, once attention's summation order changed), so
  // only the tokens are held to: a rejected draft must leave no trace in
  // the window.
  g.sampling.temperature = 0.7f;
  g.sampling.repeat_penalty = 1.1f;
  g.sampling.presence_penalty = 0.3f;
  expect_same_tokens(lm, prompt, g);
}

TEST(Speculative, StopsWhereDecodingStops) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  const std::vector<int32_t> prompt = lm.tok->encode(kRepetitive, true, true);
  engine::GenerateOptions g;
  g.sampling.temperature = 0;
  g.ignore_eos = true;
  // The context fills in the middle of a draft, and -n ends inside one.
  engine::SessionOptions small;
  small.n_ctx = int(prompt.size()) + 21;
  g.n_predict = -1;
  expect_same_tokens(lm, prompt, g, small);
  g.n_predict = 13;
  expect_same_tokens(lm, prompt, g);
  g.n_predict = 1;
  expect_same_tokens(lm, prompt, g);
  // EOS: a chat answer that ends by itself.
  g.ignore_eos = false;
  g.n_predict = 200;
  const std::vector<int32_t> chat =
      lm.tok->encode(lm.tok->apply_chat({{"user", "List three colours, one per line."}}), true, true);
  expect_same_tokens(lm, chat, g);
  EXPECT_EQ(run(*lm.model, *lm.tok, chat, g, 4).stop, engine::StopReason::Eos);
}

// Other layouts of the cache: stories260K, and the gemma3 graft whose
// sliding-window layers keep rings (kv/cache.h) that a rejected draft has
// written into, with passes of at most 4 tokens.
TEST(Speculative, OtherModelsAndSlidingWindowRings) {
  const test::LoadedModel& stories = test::load_model(test::kStories);
  engine::GenerateOptions g;
  g.n_predict = 120;
  g.ignore_eos = true;
  g.sampling.temperature = 0;
  expect_same_tokens(stories, stories.tok->encode("Once upon a time, there was a little girl", true, true), g, {}, 1);

  test::ScratchDir dir;
  const std::string path = dir.file("gemma3-graft.gguf");
  test::gemma3_graft(gguf::File::open(test::kStories), test::kGemma3GraftWindow).write(path);
  test::LoadedModel graft;
  graft.model = model::Model::load(path);
  graft.tok = tokenizer::tokenizer_from_gguf(graft.model->file());
  engine::SessionOptions rings;
  rings.max_batch = 4;
  expect_same_tokens(graft, graft.tok->encode("Once upon a time", true, true), g, rings);
}

TEST(Speculative, NeedsTheKvCache) {
  const test::LoadedModel& lm = test::load_model(test::kStories);
  engine::SessionOptions so;
  so.kv_cache = false;
  engine::GenerateOptions g;
  EXPECT_THROW(run(*lm.model, *lm.tok, {1, 403}, g, 4, so), Error);
  engine::Session s(*lm.model, so);
  s.prefill(std::vector<int32_t>{1, 403});
  EXPECT_THROW(s.verify(std::vector<int32_t>{407, 261}), Error);
}

}  // namespace
}  // namespace kvlab
