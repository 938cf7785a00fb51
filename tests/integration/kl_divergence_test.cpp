// KL divergence against a base (lab/quality/kl_divergence.h) on a real
// model: a base written by `perplexity` and read back by the comparison,
// the model against itself (nothing but the file's rounding apart) and
// against another KV format (a small, nonzero difference), and the
// refusals of a base from another model.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "common/models.h"
#include "common/scratch_dir.h"
#include "lab/quality/kl_divergence.h"
#include "lab/quality/perplexity.h"

namespace kvlab {
namespace {

constexpr int kCtx = 128, kChunks = 2;

std::vector<int32_t> text_tokens(const test::LoadedModel& lm) {
  std::ifstream in(test::kGoldenDir + "/perplexity-text.txt", std::ios::binary);
  return lm.tok->encode(std::string(std::istreambuf_iterator<char>(in), {}), true, false);
}

engine::SessionOptions options(tensor::DType kv_type) {
  engine::SessionOptions o;
  o.n_ctx = o.max_batch = kCtx;
  o.n_threads = 2;
  o.kv_type = kv_type;
  return o;
}

// perplexity's run with the base written along, as `kvlab perplexity
// --kl-divergence-base` does it.
engine::PerplexityResult write_base(const test::LoadedModel& lm, const std::string& path) {
  const std::vector<int32_t> ids = text_tokens(lm);
  engine::Session s(*lm.model, options(tensor::DType::F16));
  engine::LogitsFileWriter w(path, {kCtx, lm.model->config().n_vocab, kChunks}, ids);
  return engine::perplexity(
      s, ids, lm.tok->vocab().bos, kChunks, [&](int, double) { w.write_chunk(); },
      [&](size_t j, std::span<const float> logits) { engine::quantize_log_probs(logits, w.row(j)); });
}

engine::KldStats compare(const test::LoadedModel& lm, const std::string& base_path, tensor::DType kv_type) {
  engine::LogitsFileReader base(base_path);
  engine::Session s(*lm.model, options(kv_type));
  const engine::KldResult r = engine::kl_divergence(s, base, lm.tok->vocab().bos, -1);
  EXPECT_EQ(r.chunks.count, kChunks);
  return engine::kld_stats(r.tokens);
}

TEST(KlDivergence, AModelAgainstItsOwnBase) {
  const test::ScratchDir dir;
  const auto& lm = test::load_model(test::kDefaultModel);
  const engine::PerplexityResult ppl = write_base(lm, dir.file("base.bin"));
  const engine::KldStats same = compare(lm, dir.file("base.bin"), tensor::DType::F16);
  EXPECT_EQ(same.count, int64_t(kChunks) * (kCtx - 1 - kCtx / 2));
  // Only the file's rounding (a 2.4e-4-nat step) separates the two.
  EXPECT_LT(same.kld.value, 1e-5);
  EXPECT_EQ(same.same_top.value, 1.0);
  EXPECT_NEAR(same.ppl.value, ppl.ppl, 1e-9 * ppl.ppl);  // the same logits, the same NLLs
  EXPECT_NEAR(same.ppl_base.value, ppl.ppl, 1e-3 * ppl.ppl);
  EXPECT_LT(std::abs(same.ln_ppl_ratio.value), 1e-4);
  // An f32 KV cache moves the distributions a little, not a lot.
  const engine::KldStats f32_kv = compare(lm, dir.file("base.bin"), tensor::DType::F32);
  EXPECT_GT(f32_kv.kld.value, 10 * same.kld.value);
  EXPECT_LT(f32_kv.kld.value, 1e-2);
}

TEST(KlDivergence, RefusesABaseOfAnotherModel) {
  const test::ScratchDir dir;
  write_base(test::load_model(test::kDefaultModel), dir.file("base.bin"));
  const auto& other = test::load_model(test::kStories);
  engine::LogitsFileReader base(dir.file("base.bin"));
  engine::Session s(*other.model, options(tensor::DType::F16));
  try {
    engine::kl_divergence(s, base, other.tok->vocab().bos, -1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the KL-divergence base has a vocabulary of 49152 tokens, the model 512 (not the same tokenizer)");
  }
}

}  // namespace
}  // namespace kvlab
