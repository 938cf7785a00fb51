// The Amx kernel set gives real models' logits bit for bit as the
// AVX-512 set does (kernels/x86_avx512/rows16_amx_avx512.cpp: the tile
// unit forms the same integer block sums, and the float work is the VNNI
// kernel's). Run on the tile unit where the CPU has a usable one, else on
// its scalar model (test::IsaGuard), so every AVX-512 machine checks the
// packing and the order of the tile kernels.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/isa.h"
#include "common/models.h"
#include "engine/session.h"

namespace kvlab {
namespace {

using kernels::Isa;

// The logits after every id, from one pass (the LM head runs on all rows).
std::vector<float> logits_of_one_pass(const model::Model& m, const std::vector<int32_t>& ids) {
  engine::SessionOptions o;
  o.n_ctx = 256;
  o.n_threads = 2;
  engine::Session s(m, o);
  const std::span<const float> l = s.verify(ids);
  return {l.begin(), l.end()};
}

const char* const kText =
    "The tile unit multiplies a block of sixteen tokens by a block of sixteen weight rows in one instruction, "
    "and the vector unit scales each block's sums. The same bits must come out either way, for every token "
    "of a prompt, whether it falls in a whole tile or in the few that are left over at the end of the pass. "
    "Long prompts go through in tiles of sixty-four tokens, short batches through one call per pair of row groups.";

// 40 ids: a pass split by rows over the threads (2 tiles + 8 left to the
// VNNI kernels); 72: prefill's 64-token tiles (4 tiles, then 8).
void expect_tiles_equal_vnni(const std::string& path) {
  if (int(kernels::cpu().best()) < int(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 set on this CPU";
  const auto& lm = test::load_model(path);
  const std::vector<int32_t> text = lm.tok->encode(kText, true, false);
  for (size_t n : {size_t(40), size_t(72)}) {
    ASSERT_GE(text.size(), n);
    const std::vector<int32_t> ids(text.begin(), text.begin() + std::ptrdiff_t(n));
    std::vector<float> want, got;
    const char* unit = "";
    {
      test::IsaGuard vnni(Isa::Avx512);
      want = logits_of_one_pass(*lm.model, ids);
    }
    {
      test::IsaGuard tiles(Isa::Amx);
      unit = kernels::tiles_emulated() ? "the unit's model" : "the unit";
      got = logits_of_one_pass(*lm.model, ids);
    }
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << n << " ids, on " << unit;
  }
}

// Q4_1 (and Q8_0 in the LM head): the 32-element block formats.
TEST(TileKernels, DefaultModelLogitsEqualTheAvx512SetsBitForBit) { expect_tiles_equal_vnni(test::kDefaultModel); }

// Q4_K_M: Q4_K, Q6_K and Q5_0 matrices, so the super-block formats'
// sub-block steps too.
TEST(TileKernels, Gemma3KQuantLogitsEqualTheAvx512SetsBitForBit) { expect_tiles_equal_vnni(test::kGemma3); }

}  // namespace
}  // namespace kvlab
