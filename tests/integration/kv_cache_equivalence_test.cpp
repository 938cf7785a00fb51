// Cached decoding equals full recomputation. Two sessions advance in lockstep
// on the same tokens: one appends to its KV cache, the other clears the cache
// and recomputes the whole sequence at every step. At every step their logits
// must agree and their greedy choice must be the same.
//
// Tolerance: both modes run the same kernels on the same inputs. Every matmul
// output element is one dot product of one weight row with one activation row
// (kernels/matmul.h), independent of how many tokens share the pass, and the
// attention of position p reads the same p+1 cache rows in the same order. So
// the logits are expected to be bit-identical; the bound below (1e-5 of the
// largest |logit|) only leaves room for a compiler contracting a multiply-add
// differently in two inlined copies, and is far below the smallest
// top-1/top-2 gap the golden fixtures record (8.6e-3 on logits of ~20).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/models.h"
#include "common/arch_graft.h"
#include "common/scratch_dir.h"
#include "common/tiny_model.h"
#include "tensor/blocks.h"
#include "engine/session.h"
#include "kernels/attention.h"
#include "common/error.h"
#include "sample/sampler.h"

namespace kvlab {
namespace {

struct Divergence {
  std::vector<int32_t> tokens;
  double max_rel_diff = 0;
};

// Greedy decoding on two sessions, fed the same tokens, comparing their
// logits and picks at every step.
Divergence in_lockstep(engine::Session& one, engine::Session& other, const std::vector<int32_t>& prompt, int n_gen) {
  Divergence d;
  std::span<const float> a = one.prefill(prompt), b = other.prefill(prompt);
  for (int step = 0; step < n_gen; ++step) {
    float scale = 0, diff = 0;
    for (size_t i = 0; i < a.size(); ++i) scale = std::max(scale, std::fabs(a[i])), diff = std::max(diff, std::fabs(a[i] - b[i]));
    d.max_rel_diff = std::max(d.max_rel_diff, double(diff / scale));
    EXPECT_LE(diff, 1e-5f * scale) << "step " << step;
    const int32_t ia = sample::argmax(a), ib = sample::argmax(b);
    EXPECT_EQ(ia, ib) << "step " << step;
    d.tokens.push_back(ia);
    if (step + 1 < n_gen) {
      a = one.decode(ia);
      b = other.decode(ia);
    }
  }
  return d;
}

Divergence lockstep(const model::Model& m, const std::vector<int32_t>& prompt, int n_gen, tensor::DType kv_type,
                    int threads, int max_batch = 512) {
  engine::SessionOptions o;
  o.n_ctx = int(prompt.size()) + n_gen + 1;
  o.n_threads = threads;
  o.kv_type = kv_type;
  o.max_batch = max_batch;
  engine::Session cached(m, o);
  o.kv_cache = false;
  engine::Session naive(m, o);
  return in_lockstep(cached, naive, prompt, n_gen);
}

TEST(KvCacheEquivalence, DefaultModel128TokensSeveralPrompts) {
  const auto& lm = test::load_model(test::kDefaultModel);
  for (const std::string p : {"The quick brown fox", "def fibonacci(n):", "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"}) {
    const auto ids = lm.tok->encode(p, true, true);
    const Divergence d = lockstep(*lm.model, ids, 128, tensor::DType::F16, 2);
    lockstep(*lm.model, ids, 16, tensor::DType::Q8_0, 2);
    EXPECT_EQ(d.tokens.size(), 128u);
    std::printf("  [%s] max |logit diff| / max |logit| = %.3g over 128 steps\n", p.substr(0, 20).c_str(), d.max_rel_diff);
  }
}

TEST(KvCacheEquivalence, StoriesModel128Tokens) {
  const auto& lm = test::load_model(test::kStories);
  for (const std::string p : {"Once upon a time", "The little dog", "Tom and Sue went to the park."}) {
    const auto ids = lm.tok->encode(p, true, true);
    for (auto kv : {tensor::DType::F16, tensor::DType::F32}) lockstep(*lm.model, ids, 128, kv, 2);
    // stories260K's heads are 8 wide: q8_0 (32-blocks) cannot store them.
    EXPECT_THROW(lockstep(*lm.model, ids, 4, tensor::DType::Q8_0, 2), Error);
  }
  // A prompt past one attention chunk, so the cached steps split each KV
  // head's chunks over the threads and merge them (kernels/attention.h: with
  // 3 threads, this model's 4 KV heads are under the split's threshold of
  // 2 per thread), and still match.
  std::string text;
  std::vector<int32_t> ids;
  while (ids.size() <= size_t(kernels::kAttnChunk) + 8) {
    text += "Once upon a time, a little dog ran to the park with Tom. ";
    ids = lm.tok->encode(text, true, true);
  }
  EXPECT_EQ(lockstep(*lm.model, ids, 24, tensor::DType::F16, 3).tokens.size(), 24u);
}

// A real gemma3 model (head_dim 256, one KV head for 4 query heads, five
// sliding-window layers in six, Q4_K/Q5_0/Q6_K/Q8_0 matrices), f16 and q8_0
// caches. 32 tokens: every no-cache step recomputes up to ~60 positions of a
// 270M model.
TEST(KvCacheEquivalence, Gemma3_270M32Tokens) {
  const auto& lm = test::load_model(test::kGemma3);
  const auto ids = lm.tok->encode("<start_of_turn>user\nName three colours.<end_of_turn>\n<start_of_turn>model\n",
                                  true, true);
  for (auto kv : {tensor::DType::F16, tensor::DType::Q8_0})
    EXPECT_EQ(lockstep(*lm.model, ids, 32, kv, 2).tokens.size(), 32u);
}

// qwen2: biases and NeoX RoPE (tests/common/arch_graft.h).
TEST(KvCacheEquivalence, Qwen2Graft64Tokens) {
  test::ScratchDir dir;
  const std::string path = dir.file("stories260K-qwen2.gguf");
  test::qwen2_graft(gguf::File::open(test::kStories), test::kQwen2GraftBias).write(path);
  const auto m = model::Model::load(path);
  const auto& stories = test::load_model(test::kStories);
  const auto ids = stories.tok->encode("Once upon a time", true, true);
  for (int threads : {1, 2}) EXPECT_EQ(lockstep(*m, ids, 64, tensor::DType::F16, threads).tokens.size(), 64u);
}

// A graft of stories260K (tests/common/arch_graft.h), loaded.
std::unique_ptr<model::Model> graft_model(const gguf::Writer& graft) {
  const test::ScratchDir dir;
  const std::string path = dir.file("graft.gguf");
  graft.write(path);
  return model::Model::load(path);
}

// 96 greedy tokens of "Once upon a time", cached and recomputed, on 1 and 2 threads.
void expect_graft_in_lockstep(const gguf::Writer& graft) {
  const auto m = graft_model(graft);
  const auto ids = test::load_model(test::kStories).tok->encode("Once upon a time", true, true);
  for (int threads : {1, 2}) EXPECT_EQ(lockstep(*m, ids, 96, tensor::DType::F16, threads).tokens.size(), 96u);
}

// mistral3: the queries' attention temperature depends on each token's
// position (a step past 64 positions), which a cached step and a
// recomputation must give alike; and YaRN's blended angles.
TEST(KvCacheEquivalence, Mistral3Graft96Tokens) {
  expect_graft_in_lockstep(test::mistral3_graft(gguf::File::open(test::kStories)));
}

// qwen3moe: a recomputation runs each expert over all the tokens that
// picked it, a cached step over one.
TEST(KvCacheEquivalence, Qwen3MoeGraft96Tokens) {
  expect_graft_in_lockstep(test::qwen3moe_graft(gguf::File::open(test::kStories)));
}

// gemma3: sliding-window layers read only the last 24 cached positions, and
// recomputation must see the same window (69 positions here).
TEST(KvCacheEquivalence, Gemma3Graft64Tokens) {
  const auto m = graft_model(test::gemma3_graft(gguf::File::open(test::kStories), test::kGemma3GraftWindow));
  ASSERT_EQ(m->config().swa_window, test::kGemma3GraftWindow);
  const auto& stories = test::load_model(test::kStories);
  const auto ids = stories.tok->encode("Once upon a time", true, true);
  for (int threads : {1, 2})
    for (auto kv : {tensor::DType::F16, tensor::DType::F32})
      EXPECT_EQ(lockstep(*m, ids, 64, kv, threads).tokens.size(), 64u);
}

// gemma3's local layers keep a ring of window + max_batch positions
// (kv/cache.h). With passes of 4 tokens the graft's ring is 2 blocks (32
// positions for the 24 + 4 - 1 a pass needs) and wraps three times in 105
// positions: the logits equal those of a cache that keeps every position,
// at every step, and recomputation through the same rings (prompt and
// history in passes of 4) equals both.
TEST(KvCacheEquivalence, Gemma3RingsEqualAFullCache) {
  const auto m = graft_model(test::gemma3_graft(gguf::File::open(test::kStories), test::kGemma3GraftWindow));
  const auto& stories = test::load_model(test::kStories);
  const auto ids = stories.tok->encode("Once upon a time", true, true);
  constexpr int kGen = 100;
  engine::SessionOptions o;
  o.n_ctx = int(ids.size()) + kGen + 1;
  o.n_threads = 2;
  engine::Session full(*m, o);  // one pass may fill the context: no ring is smaller
  o.max_batch = 4;
  engine::Session ring(*m, o);
  ASSERT_EQ(full.cache().ring_blocks(), 0);
  ASSERT_EQ(ring.cache().ring_blocks(), 2);
  EXPECT_LT(ring.cache().bytes_allocated(), full.cache().bytes_allocated());
  EXPECT_EQ(in_lockstep(full, ring, ids, kGen).tokens.size(), size_t(kGen));
  EXPECT_LT(ring.kv_bytes_in_use(), full.kv_bytes_in_use());
  EXPECT_EQ(lockstep(*m, ids, kGen, tensor::DType::F16, 2, 4).tokens.size(), size_t(kGen));
}

// The rings with a q8_0 cache, whose blocks are tiles (kernels/kv_tiles.h):
// a wrapped ring's tile holds positions the window still sees next to
// overwritten ones, and the kernels score the whole tile. stories260K's
// heads are 8 wide, too narrow for q8_0's 32-blocks, so the graft here is
// of a random tiny llama with heads of 32 (5 local layers and the global
// one the graft appends). Same checks as above: ring = full cache =
// recomputation, at every step.
TEST(KvCacheEquivalence, Gemma3RingsOfQ8_0TilesEqualAFullCache) {
  test::TinySpec spec;
  spec.n_layer = 5;
  spec.n_embd = 64;
  spec.n_head = 2;  // head_dim 32
  spec.n_head_kv = 1;
  const test::ScratchDir dir;
  const std::string llama_path = dir.file("tiny-llama.gguf"), path = dir.file("tiny-gemma3.gguf");
  test::tiny_llama(spec).write(llama_path);
  test::gemma3_graft(gguf::File::open(llama_path), test::kGemma3GraftWindow).write(path);
  const auto m = model::Model::load(path);
  ASSERT_EQ(m->config().head_dim, 32);
  ASSERT_EQ(m->config().swa_window, test::kGemma3GraftWindow);
  const std::vector<int32_t> ids = {1, 7, 3, 22, 9, 14, 5};
  constexpr int kGen = 100;
  engine::SessionOptions o;
  o.n_ctx = int(ids.size()) + kGen + 1;
  o.n_threads = 2;
  o.kv_type = tensor::DType::Q8_0;
  engine::Session full(*m, o);
  o.max_batch = 4;
  engine::Session ring(*m, o);
  ASSERT_EQ(ring.cache().ring_blocks(), 2);
  EXPECT_EQ(in_lockstep(full, ring, ids, kGen).tokens.size(), size_t(kGen));
  EXPECT_EQ(lockstep(*m, ids, kGen, tensor::DType::Q8_0, 2, 4).tokens.size(), size_t(kGen));
}

// Synthetic models cover shapes the real ones do not: tied embeddings,
// multi-head (no GQA), every weight format, odd thread counts.
TEST(KvCacheEquivalence, SyntheticModelsEveryFormat) {
  for (const auto& info : tensor::all_dtypes()) {
    for (bool mha : {false, true}) {
      test::TinySpec s;
      s.wtype = info.type;
      if (info.block_size == tensor::kQK_K) s.n_embd = 256, s.n_ff = 512;  // whole K-quant super-blocks
      s.tied = mha;
      s.n_head_kv = mha ? 4 : 2;
      const auto bytes = test::tiny_llama(s).serialize();
      const test::ScratchDir dir;
      const std::string path = dir.file("tiny.gguf");
      {
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
      }
      const auto m = model::Model::load(path);
      lockstep(*m, {1, 5, 9, 3}, 40, tensor::DType::F16, mha ? 3 : 1);
    }
  }
}

// The rows-of-8 layout a resident model's q8_0, q4_0 and q4_1 matrices get
// (kernels/rows8.h) changes only the order of float additions against the
// row-major kernels a mapped file runs: the same model both ways gives the
// same greedy tokens, and logits that agree to float rounding amplified by
// the 8-bit activations: one element landing on the other side of a rounding
// step moves the logits by ~1e-3 of their scale (2.4e-3 seen here). A wrong
// layout moves them by their whole scale. A vocabulary of 41 keeps the tied
// embedding / LM head row-major next to re-laid-out layers; 48 re-lays it
// out too.
TEST(KvCacheEquivalence, ResidentRowsOf8MatchesMappedRowMajor) {
  for (auto wt : {tensor::DType::Q8_0, tensor::DType::Q4_0, tensor::DType::Q4_1, tensor::DType::Q5_0, tensor::DType::Q5_1})
    for (int vocab : {41, 48}) {
      test::TinySpec s;
      s.wtype = wt;
      s.tied = true;
      s.n_vocab = vocab;
      const auto bytes = test::tiny_llama(s).serialize();
      const test::ScratchDir dir;
      const std::string path = dir.file("tiny.gguf");
      {
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
      }
      const auto resident = model::Model::load(path, gguf::Residency::Resident);
      const auto mapped = model::Model::load(path, gguf::Residency::Mapped);
      engine::SessionOptions o;
      o.n_ctx = 64;
      o.n_threads = 2;
      engine::Session a_s(*resident, o), b_s(*mapped, o);
      const std::vector<int32_t> prompt{1, 5, 9, 3};
      std::span<const float> a = a_s.prefill(prompt), b = b_s.prefill(prompt);
      for (int step = 0; step < 24; ++step) {
        float scale = 0, diff = 0;
        for (size_t i = 0; i < a.size(); ++i) scale = std::max(scale, std::fabs(a[i])), diff = std::max(diff, std::fabs(a[i] - b[i]));
        EXPECT_LE(diff, 1e-2f * scale) << tensor::dtype_info(wt).name << " vocab " << vocab << " step " << step;
        const int32_t next = sample::argmax(a);
        ASSERT_EQ(next, sample::argmax(b)) << tensor::dtype_info(wt).name << " vocab " << vocab << " step " << step;
        a = a_s.decode(next);
        b = b_s.decode(next);
      }
    }
}

}  // namespace
}  // namespace kvlab
