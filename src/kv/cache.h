// The KV cache: for every layer, the keys and values of every position seen so
// far, written once when the position is processed and read by every later
// step. Storage is paged (as in vLLM's PagedAttention): fixed blocks of
// kBlockTokens positions, and each sequence has a block table mapping its
// logical block pos / 16 to a physical block. Each KV head has its own
// region of blocks:
//   k[layer][kv_head][block][pos % kBlockTokens][head_dim]   (v likewise)
// so attention, which reads one KV head's rows, reads contiguous memory
// (one run per block, one run overall for a dedicated sequence). With the
// heads interleaved in each row instead, a head's rows are a strided slice
// that the prefetchers follow poorly: one decode step's attention at
// position 2048 on one thread read its rows from DRAM at 4.3 GB/s that way
// and 7.3 GB/s head-major (bench/micro_attention.cpp, attend_step).
// Two ways to build one:
//  - dedicated: every sequence owns the blocks of n_ctx positions, mapped in
//    order (the engine's sessions: contiguous, nothing to manage);
//  - pooled: a fixed number of blocks shared by all sequences, mapped by a
//    kv::BlockManager, which also lets sequences share the blocks of a common
//    prompt prefix (the server).
// Sliding-window layers (gemma3's local layers) in the dedicated layout
// keep only the positions they can still see: a ring of R blocks per
// sequence, logical block b in slot b % R, so position p reuses the row of
// p - 16R. R covers the window plus the most positions one forward pass adds
// (max_batch) less one: no row a token of the pass still sees is
// overwritten by a later token of the same pass. Global layers, and the
// pooled layout (whose blocks a shared prefix may map into several
// sequences), keep every position.
// Element type f32, f16 or q8_0 (--kv-type): f16 halves the bytes decode
// reads, q8_0 (32-element blocks, 34 bytes) nearly halves them again. For
// q8_0 every head must be whole blocks (head_dim % 32 == 0). In f16 and
// q8_0 each block's K rows and V rows are one tile each
// (kernels/kv_tiles.h).
// K and V live on 2 MiB pages (common/huge_buffer.h), as the weights do: a
// decode step at a long position reads every layer's K/V once, 45 MiB at
// position 2048 for the default model in f16, and on 4 KiB pages that is
// over 11,000 pages a step, far more than the TLB holds, each miss a walk of
// two page tables under virtualisation. On huge pages the step near
// position 2048 is about 6% faster and short positions are unchanged
// (bench/quadratic-trap measures the step by position).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/huge_buffer.h"
#include "kv/shape.h"
#include "tensor/dtype.h"

namespace kvlab::kv {

class Cache {
 public:
  // Positions per block: small enough that a shared prefix wastes little, large
  // enough that the attention loop runs over contiguous rows.
  static constexpr int kBlockTokens = 16;
  static int blocks_for(int n_tokens) { return (n_tokens + kBlockTokens - 1) / kBlockTokens; }

  // The most positions one forward pass adds to a sequence.
  struct PassLimit {
    int max_batch;
  };
  // Dedicated layout; with a PassLimit, sliding-window layers keep window +
  // max_batch positions (above), without, all of them. Throws kvlab::Error
  // for an unsupported type or absurd sizes.
  Cache(const Shape& shape, int n_ctx, int n_seq, tensor::DType type) : Cache(shape, n_ctx, n_seq, type, PassLimit{0}) {}
  Cache(const Shape& shape, int n_ctx, int n_seq, tensor::DType type, PassLimit limit);
  // Pooled layout: n_blocks blocks, every block table empty.
  Cache(const Shape& shape, int n_ctx, int n_seq, tensor::DType type, int n_blocks);

  int n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  int n_blocks() const { return n_blocks_; }
  tensor::DType type() const { return type_; }
  size_t kv_dim() const { return kv_dim_; }
  // Bytes per element, averaged over a block (34/32 for q8_0).
  double elem_bytes() const { return double(row_bytes_) / double(kv_dim_); }
  // One KV head of one position, and all KV heads of one position.
  size_t head_bytes() const { return head_bytes_; }
  size_t row_bytes() const { return row_bytes_; }
  // One KV head's rows of one block.
  size_t head_block_bytes() const { return size_t(kBlockTokens) * head_bytes_; }

  // Block table of a sequence: blocks_for(n_ctx) entries, -1 where unmapped.
  const int32_t* block_table(int seq) const { return &table_[size_t(seq) * size_t(blocks_per_seq_)]; }
  // The table a layer's rows are found through: the ring's for a
  // sliding-window layer that has one, else block_table(seq).
  const int32_t* layer_table(int layer, int seq) const {
    return ring_layer(layer) ? &ring_table_[size_t(seq) * size_t(blocks_per_seq_)] : block_table(seq);
  }
  // Ring blocks per sequence in a sliding-window layer; 0 when no layer has a ring.
  int ring_blocks() const { return ring_blocks_; }
  // Positions one forward pass may add to a sequence (0: no limit, no ring).
  int max_batch() const { return max_batch_; }
  bool mapped(int seq, int pos) const { return block_table(seq)[pos / kBlockTokens] >= 0; }
  void map_block(int seq, int logical, int32_t physical) {
    table_[size_t(seq) * size_t(blocks_per_seq_) + size_t(logical)] = physical;
  }
  // Unmaps every block of the sequence and empties it.
  void unmap(int seq);

  // Where the row of KV head `head` for (layer, seq, pos) starts (in a
  // tiled type, the row's place in its block); the position's block must
  // be mapped.
  uint8_t* k(int layer, int head, int seq, int pos) { return k_.data() + row_at(layer, head, seq, pos); }
  uint8_t* v(int layer, int head, int seq, int pos) { return v_.data() + row_at(layer, head, seq, pos); }
  // Row 0 of physical block 0 of a layer's KV head: attention walks blocks
  // from here, head_block_bytes() apart.
  const uint8_t* k_head(int layer, int head) const { return k_.data() + region(layer, head); }
  const uint8_t* v_head(int layer, int head) const { return v_.data() + region(layer, head); }

  // Stores one head's head_dim f32 values of K or V for (layer, seq, pos),
  // converted to the cache type and laid out as attention reads them
  // (kernels/kv_tiles.h: an f16 or q8_0 cache keeps the 16 positions of a
  // block in one K tile and one V tile). The position's block must be
  // mapped.
  void store_k(int layer, int head, int seq, int pos, const float* src);
  void store_v(int layer, int head, int seq, int pos, const float* src);
  // Asks for the lines those stores will write, in every KV head
  // (kernels::prefetch_store), so that a decode step can do so before the
  // QKV matmuls and store into cached lines after them.
  void prefetch_store(int layer, int seq, int pos) const;

  // Positions [0, used) of a sequence hold valid entries.
  int used(int seq) const { return used_[size_t(seq)]; }
  void set_used(int seq, int n) { used_[size_t(seq)] = n; }
  void clear(int seq) { used_[size_t(seq)] = 0; }

  size_t bytes_allocated() const { return k_.size() + v_.size(); }
  // K and V bytes one position adds across all layers.
  size_t bytes_per_token() const { return size_t(n_layer_) * 2 * row_bytes(); }
  // K and V bytes holding a sequence's positions (a ring holds at most its size).
  size_t bytes_used(int seq) const;

 private:
  // Both layouts: n_blocks blocks in every global layer's head regions,
  // n_seq * ring_blocks in every sliding-window layer's (0: no rings).
  Cache(const Shape& shape, int n_ctx, int n_seq, tensor::DType type, int n_blocks, int ring_blocks, int max_batch);

  bool ring_layer(int layer) const { return ring_blocks_ > 0 && swa_[size_t(layer)]; }
  // Physical blocks in each KV head's region of a layer.
  size_t layer_blocks(int layer) const { return size_t(ring_layer(layer) ? n_seq_ * ring_blocks_ : n_blocks_); }
  size_t region(int layer, int head) const {
    return layer_offset_[size_t(layer)] + size_t(head) * layer_blocks(layer) * head_block_bytes();
  }
  // Where the row of (layer, head, seq, pos) starts in k_ (and v_).
  size_t row_at(int layer, int head, int seq, int pos) const {
    const size_t block = size_t(layer_table(layer, seq)[pos / kBlockTokens]);
    return region(layer, head) + block * head_block_bytes() + size_t(pos % kBlockTokens) * head_bytes_;
  }

  int n_layer_, n_head_kv_, n_ctx_, n_seq_, n_blocks_, blocks_per_seq_;
  int ring_blocks_ = 0, max_batch_ = 0;
  std::vector<char> swa_;              // [layer]: a sliding-window layer
  std::vector<size_t> layer_offset_;   // [layer + 1]: where each layer's regions start
  std::vector<int32_t> ring_table_;    // [seq][logical block] -> ring block
  size_t kv_dim_, head_dim_, row_bytes_, head_bytes_;
  tensor::DType type_;
  HugeBuffer k_, v_;
  std::vector<int32_t> table_;  // [seq][logical block] -> physical block
  std::vector<int> used_;
};

}  // namespace kvlab::kv
