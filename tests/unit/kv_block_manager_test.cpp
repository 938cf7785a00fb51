// Paged KV cache and prefix caching: block tables, reference counts, chained
// block keys, LRU eviction and admission control, on a small pool whose
// outcomes can be worked out by hand (16 positions per block).
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "common/error.h"
#include "kv/block_manager.h"
#include "kv/cache.h"

namespace kvlab::kv {
namespace {

constexpr int B = Cache::kBlockTokens;

Shape tiny_shape() {
  Shape s;
  s.n_layer = 2;
  s.n_head_kv = 2;
  s.head_dim = 16;
  return s;
}

std::vector<int32_t> tokens(int n, int32_t first = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> table_of(const Cache& c, int seq, int n_blocks) {
  return {c.block_table(seq), c.block_table(seq) + n_blocks};
}

TEST(KvCache, DedicatedLayoutMapsEverySequenceInOrder) {
  const Cache c(tiny_shape(), 40, 2, tensor::DType::F16);
  EXPECT_EQ(c.n_blocks(), 2 * 3);  // 40 positions -> 3 blocks per sequence
  EXPECT_EQ(table_of(c, 1, 3), (std::vector<int32_t>{3, 4, 5}));
  EXPECT_TRUE(c.mapped(1, 39));
}

TEST(KvCache, RowsOfAPositionLandInItsMappedBlock) {
  Cache c(tiny_shape(), 64, 2, tensor::DType::F32, 8);
  EXPECT_FALSE(c.mapped(0, 0));
  c.map_block(0, 0, 5);
  c.map_block(0, 1, 2);
  // Head-major: [layer][kv head][block][position in block][head_dim].
  const size_t head_region = size_t(8) * c.head_block_bytes();
  const int heads = int(c.row_bytes() / c.head_bytes());
  EXPECT_EQ(c.k(1, 0, 0, 17) - c.k_head(1, 0), std::ptrdiff_t(2 * c.head_block_bytes() + 1 * c.head_bytes()));
  EXPECT_EQ(c.k_head(1, 0) - c.k_head(0, 0), std::ptrdiff_t(size_t(heads) * head_region));
  EXPECT_EQ(c.v(0, 1, 0, 3) - c.v_head(0, 0), std::ptrdiff_t(head_region + 5 * c.head_block_bytes() + 3 * c.head_bytes()));
  c.unmap(0);
  EXPECT_FALSE(c.mapped(0, 17));
}

TEST(BlockManager, SecondPromptReusesWholeBlocksButAlwaysComputesItsLastToken) {
  Cache c(tiny_shape(), 128, 2, tensor::DType::F16, 16);
  BlockManager m(c);
  const auto p = tokens(50);  // blocks 0..2 full, block 3 holds 2 tokens
  ASSERT_EQ(m.admit(0, p, 60), 0);
  EXPECT_EQ(m.stats().in_use, 4);  // blocks for 60 positions
  const auto first = table_of(c, 0, 4);
  m.commit(0, p, 50);
  m.release(0);
  EXPECT_EQ(m.stats().in_use, 0);
  EXPECT_EQ(m.stats().cached, 3);  // the partial block is not kept

  // Same prompt: 3 whole blocks (48 tokens) reused, the same physical blocks.
  ASSERT_EQ(m.admit(1, p, 50), 48);
  EXPECT_EQ(c.used(1), 48);
  EXPECT_EQ(table_of(c, 1, 3), std::vector<int32_t>(first.begin(), first.begin() + 3));
  m.release(1);

  // A prompt of exactly 48 tokens may reuse only 32: token 47 must run to give logits.
  ASSERT_EQ(m.admit(0, tokens(48), 48), 32);
  m.release(0);
  const auto st = m.stats();
  EXPECT_EQ(st.lookups, 3);
  EXPECT_EQ(st.hits, 2);
  EXPECT_EQ(st.reused_tokens, 80);
}

TEST(BlockManager, KeysChainThePrefixNotJustTheBlock) {
  Cache c(tiny_shape(), 128, 1, tensor::DType::F16, 16);
  BlockManager m(c);
  auto a = tokens(64);
  ASSERT_EQ(m.admit(0, a, 64), 0);
  m.commit(0, a, 64);
  m.release(0);
  // b's second block equals a's second block, but its first block differs:
  // no reuse at all, because block 1's key covers block 0 too.
  auto b = a;
  b[3] = 999;
  EXPECT_EQ(m.admit(0, b, 64), 0);
  m.release(0);
  // a diverging inside block 2 reuses blocks 0 and 1.
  auto d = a;
  d[40] = 999;
  EXPECT_EQ(m.admit(0, d, 64), 32);
  m.release(0);
}

TEST(BlockManager, SharedBlocksStayInUseUntilTheLastReaderLeaves) {
  Cache c(tiny_shape(), 64, 2, tensor::DType::F16, 8);
  BlockManager m(c);
  const auto p = tokens(40);
  ASSERT_EQ(m.admit(0, p, 40), 0);
  m.commit(0, p, 40);  // blocks 0, 1 keyed while sequence 0 still runs
  ASSERT_EQ(m.admit(1, p, 40), 32);
  EXPECT_EQ(c.block_table(1)[0], c.block_table(0)[0]);
  EXPECT_EQ(m.stats().in_use, 4);  // 3 for sequence 0, 1 fresh for sequence 1
  m.release(0);
  EXPECT_EQ(m.stats().in_use, 3);  // the 2 shared blocks and sequence 1's own
  m.release(1);
  EXPECT_EQ(m.stats().in_use, 0);
  EXPECT_EQ(m.stats().cached, 2);
}

TEST(BlockManager, AdmissionWaitsForBlocksAndChangesNothingWhenRefused) {
  Cache c(tiny_shape(), 64, 3, tensor::DType::F16, 6);
  BlockManager m(c);
  ASSERT_EQ(m.admit(0, tokens(10), 64), 0);  // 4 blocks
  EXPECT_EQ(m.available(), 2);
  EXPECT_FALSE(m.admit(1, tokens(10, 500), 40));  // needs 3
  EXPECT_FALSE(c.mapped(1, 0));
  EXPECT_EQ(m.available(), 2);
  ASSERT_EQ(m.admit(1, tokens(10, 500), 32), 0);  // 2 fit
  m.release(0);
  EXPECT_EQ(m.admit(2, tokens(10, 900), 64), 0);
  EXPECT_THROW(m.admit(2, tokens(10), 10), Error);  // already holds blocks
  EXPECT_THROW(m.admit(0, tokens(10), 65), Error);  // beyond the context
}

TEST(BlockManager, EvictsLeastRecentlyReleasedTailFirst) {
  Cache c(tiny_shape(), 64, 1, tensor::DType::F16, 4);
  BlockManager m(c);
  const auto a = tokens(64);
  ASSERT_EQ(m.admit(0, a, 64), 0);
  m.commit(0, a, 64);
  m.release(0);
  EXPECT_EQ(m.stats().cached, 4);
  // A different prompt that needs 2 blocks evicts a's last two blocks: a's
  // head stays reusable.
  ASSERT_EQ(m.admit(0, tokens(20, 700), 32), 0);
  m.release(0);
  EXPECT_EQ(m.stats().cached, 2);
  EXPECT_EQ(m.admit(0, a, 64), 32);
  // Every physical block is distinct within one table.
  const auto t = table_of(c, 0, 4);
  EXPECT_EQ(std::set<int32_t>(t.begin(), t.end()).size(), 4u);
  m.release(0);
}

TEST(BlockManager, RefusesACacheThatIsNotPooled) {
  Cache dedicated(tiny_shape(), 32, 1, tensor::DType::F16);
  EXPECT_THROW(BlockManager{dedicated}, Error);
}

}  // namespace
}  // namespace kvlab::kv
