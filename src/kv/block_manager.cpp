#include "kv/block_manager.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace kvlab::kv {

namespace {
constexpr int B = Cache::kBlockTokens;

// The splitmix64 finaliser (Steele, Lea, Flood 2014): every input bit reaches
// every output bit, which a plain multiply-xor chain does not guarantee.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

BlockManager::BlockManager(Cache& cache)
    : cache_(cache),
      blocks_(size_t(cache.n_blocks())),
      n_mapped_(size_t(cache.n_seq()), 0),
      n_keyed_(size_t(cache.n_seq()), 0),
      last_key_(size_t(cache.n_seq()), 0) {
  for (int s = 0; s < cache.n_seq(); ++s)
    if (cache.mapped(s, 0)) throw Error("block manager needs a pooled KV cache with empty block tables");
  // Lowest block ids are handed out first (popped from the back).
  for (int32_t b = cache.n_blocks() - 1; b >= 0; --b) free_.push_back(b);
}

uint64_t BlockManager::chain(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent + 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens) h = mix(h ^ uint64_t(uint32_t(t)));
  return h;
}

int32_t BlockManager::find(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const {
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) return -1;
  const Block& b = blocks_[size_t(it->second)];
  if (b.parent != parent || !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end())) return -1;
  return it->second;
}

int32_t BlockManager::take_free() {
  if (!free_.empty()) {
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  // Evict the least recently released cached block. Blocks keyed after it in
  // its chain become unreachable (lookups stop at the first miss) and age out
  // the same way.
  const int32_t b = lru_.front();
  lru_.pop_front();
  Block& blk = blocks_[size_t(b)];
  by_key_.erase(blk.key);
  blk.keyed = false;
  blk.tokens.clear();
  return b;
}

void BlockManager::add_ref(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (blk.ref++ == 0 && blk.keyed) lru_.erase(blk.lru);
}

std::optional<int> BlockManager::admit(int seq, std::span<const int32_t> prompt, int n_tokens, bool reuse_prefix) {
  if (n_mapped_[size_t(seq)] != 0) throw Error("sequence " + std::to_string(seq) + " already holds KV blocks");
  n_tokens = std::max(n_tokens, int(prompt.size()));
  if (prompt.empty() || n_tokens > cache_.n_ctx())
    throw Error("a sequence of " + std::to_string(n_tokens) + " tokens does not fit the context of " +
                std::to_string(cache_.n_ctx()));
  const int need = Cache::blocks_for(n_tokens);

  std::vector<int32_t> hit;
  uint64_t key = 0;
  int hits_now_cached = 0;  // hit blocks that sit in the LRU list, i.e. count as available
  const size_t reusable = reuse_prefix ? size_t(max_reused_blocks(int(prompt.size()))) : 0;
  for (size_t i = 0; i < reusable; ++i) {
    const auto tokens = prompt.subspan(i * B, B);
    const uint64_t next = chain(key, tokens);
    const int32_t b = find(next, key, tokens);
    if (b < 0) break;
    hit.push_back(b);
    hits_now_cached += blocks_[size_t(b)].ref == 0;
    key = next;
  }
  const int fresh = need - int(hit.size());
  if (available() - hits_now_cached < fresh) return std::nullopt;

  for (size_t i = 0; i < hit.size(); ++i) {
    add_ref(hit[i]);
    cache_.map_block(seq, int(i), hit[i]);
  }
  for (int i = int(hit.size()); i < need; ++i) {
    const int32_t b = take_free();
    blocks_[size_t(b)].ref = 1;
    cache_.map_block(seq, i, b);
  }
  n_mapped_[size_t(seq)] = need;
  n_keyed_[size_t(seq)] = int(hit.size());
  last_key_[size_t(seq)] = key;
  const int reused = int(hit.size()) * B;
  cache_.set_used(seq, reused);
  ++lookups_;
  hits_ += !hit.empty();
  reused_tokens_ += reused;
  return reused;
}

void BlockManager::commit(int seq, std::span<const int32_t> tokens, int n_written) {
  const int full = std::min({n_written / B, int(tokens.size()) / B, n_mapped_[size_t(seq)]});
  const int32_t* table = cache_.block_table(seq);
  for (int i = n_keyed_[size_t(seq)]; i < full; ++i) {
    const auto block_tokens = tokens.subspan(size_t(i) * B, B);
    const uint64_t parent = last_key_[size_t(seq)];
    const uint64_t key = chain(parent, block_tokens);
    // The first block computed for a prefix serves it; a twin computed
    // concurrently by another sequence stays unkeyed and is freed with it.
    if (by_key_.emplace(key, table[i]).second) {
      Block& blk = blocks_[size_t(table[i])];
      blk.keyed = true;
      blk.key = key;
      blk.parent = parent;
      blk.tokens.assign(block_tokens.begin(), block_tokens.end());
    }
    last_key_[size_t(seq)] = key;
    n_keyed_[size_t(seq)] = i + 1;
  }
}

void BlockManager::release(int seq) {
  const int32_t* table = cache_.block_table(seq);
  // Last block first: the tail of a prefix is evicted before its head, which
  // other prompts are likelier to share.
  for (int i = n_mapped_[size_t(seq)] - 1; i >= 0; --i) {
    Block& blk = blocks_[size_t(table[i])];
    if (--blk.ref > 0) continue;
    if (blk.keyed) {
      blk.lru = lru_.insert(lru_.end(), table[i]);
    } else {
      free_.push_back(table[i]);
    }
  }
  cache_.unmap(seq);
  n_mapped_[size_t(seq)] = 0;
  n_keyed_[size_t(seq)] = 0;
  last_key_[size_t(seq)] = 0;
}

BlockManager::Stats BlockManager::stats() const {
  Stats s;
  s.total = int(blocks_.size());
  s.cached = int(lru_.size());
  s.in_use = s.total - int(free_.size()) - s.cached;
  s.lookups = lookups_;
  s.hits = hits_;
  s.reused_tokens = reused_tokens_;
  return s;
}

}  // namespace kvlab::kv
