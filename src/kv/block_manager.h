// Hands out the blocks of a pooled kv::Cache to sequences, and keeps the full
// blocks of finished sequences so that a later prompt starting with the same
// tokens maps them instead of recomputing them (automatic prefix caching, as
// vLLM does it):
//  - A full block is keyed by a chained hash: key_i = H(key_{i-1}, tokens of
//    block i), key_{-1} = 0, so one key stands for the whole prefix up to the
//    end of block i. Lookup walks a prompt's blocks from the first and stops
//    at the first miss.
//  - A hit is verified against the block's stored tokens and parent key, so a
//    hash collision can only cost a miss, never wrong KV.
//  - Blocks are reference counted. A block nobody uses keeps its key and waits
//    in an LRU list; allocation takes never-keyed free blocks first, then
//    evicts the least recently released keyed block.
//  - Only whole blocks are shared and a sequence never writes into a block it
//    got from the cache (at most prompt - 1 tokens are reused, so the last
//    prompt token is always computed and yields the first logits).
// The KV of a position depends only on the tokens up to it, and the kernels
// give the same bits whatever the batch, so reused KV equals recomputed KV.
#pragma once
#include <algorithm>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/cache.h"

namespace kvlab::kv {

class BlockManager {
 public:
  // `cache` must be pooled (all block tables empty) and outlive the manager.
  explicit BlockManager(Cache& cache);

  struct Stats {
    int total = 0;
    int in_use = 0;  // referenced by at least one sequence
    int cached = 0;  // unreferenced but keyed: reusable until evicted
    int64_t lookups = 0, hits = 0;  // admissions, and those that reused >= 1 block
    int64_t reused_tokens = 0;
  };

  // Admits sequence `seq` (whose table must be empty): maps the longest cached
  // prefix of `prompt`, then fresh blocks for positions up to `n_tokens` (the
  // most the sequence will ever hold), and sets the cache's used count to the
  // reused tokens, which it returns. Returns nullopt, changing nothing, when
  // the pool cannot supply the blocks now. With reuse_prefix false nothing
  // cached is mapped (a request that needs every prompt position computed).
  std::optional<int> admit(int seq, std::span<const int32_t> prompt, int n_tokens, bool reuse_prefix = true);
  // Keys the sequence's blocks that became full: positions [0, n_written)
  // hold the KV of tokens[0, n_written).
  void commit(int seq, std::span<const int32_t> tokens, int n_written);
  // Drops the sequence's blocks: keyed ones stay cached, the others are free.
  void release(int seq);
  // The most leading blocks of a prompt of `prompt_tokens` an admission may
  // map from the cache: whole blocks, leaving its last token to be computed.
  static int max_reused_blocks(int prompt_tokens) { return std::max(0, prompt_tokens - 1) / Cache::kBlockTokens; }
  // Blocks an admission could take now (free plus evictable).
  int available() const { return int(free_.size() + lru_.size()); }
  Stats stats() const;

 private:
  struct Block {
    int ref = 0;
    bool keyed = false;
    uint64_t key = 0, parent = 0;
    std::vector<int32_t> tokens;        // when keyed: the block's tokens, to verify hits
    std::list<int32_t>::iterator lru;   // valid while keyed and unreferenced
  };
  static uint64_t chain(uint64_t parent, std::span<const int32_t> tokens);
  // The physical block holding exactly this prefix block, or -1.
  int32_t find(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const;
  int32_t take_free();
  void add_ref(int32_t b);

  Cache& cache_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                     // never keyed, unreferenced
  std::list<int32_t> lru_;                        // keyed, unreferenced; front = evicted first
  std::unordered_map<uint64_t, int32_t> by_key_;  // key -> physical block
  std::vector<int> n_mapped_;                     // per sequence: blocks in its table
  std::vector<int> n_keyed_;                      // per sequence: leading blocks already keyed
  std::vector<uint64_t> last_key_;                // per sequence: key of its last keyed block
  int64_t lookups_ = 0, hits_ = 0, reused_tokens_ = 0;
};

}  // namespace kvlab::kv
