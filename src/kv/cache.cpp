#include "kv/cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "kernels/kv_tiles.h"

namespace kvlab::kv {

namespace {
// Ring blocks a sliding-window layer needs. Logical block b goes to slot
// b % R, so position p shares its row with p - 16R and no other: a ring of
// R blocks holds any 16R consecutive positions. A pass of max_batch tokens
// starting at p0 stores up to p0 + max_batch - 1 while its first token still
// sees p0 - window + 1: window + max_batch - 1 positions. 0: no ring (no
// sliding-window layer, or a ring no smaller than the whole context).
int ring_blocks_for(const Shape& shape, int n_ctx, int max_batch) {
  bool any = false;
  for (int l = 0; l < shape.n_layer; ++l) any = any || shape.is_swa(l);
  if (!any || max_batch <= 0) return 0;
  const int ring = Cache::blocks_for(shape.swa_window + max_batch - 1);
  return ring < Cache::blocks_for(n_ctx) ? ring : 0;
}
}  // namespace

Cache::Cache(const Shape& shape, int n_ctx, int n_seq, tensor::DType type, PassLimit limit)
    : Cache(shape, n_ctx, n_seq, type, n_seq * blocks_for(std::max(n_ctx, 1)), ring_blocks_for(shape, n_ctx, limit.max_batch),
            limit.max_batch) {
  for (int s = 0; s < n_seq_; ++s)
    for (int b = 0; b < blocks_per_seq_; ++b) map_block(s, b, s * blocks_per_seq_ + b);
  if (ring_blocks_ == 0) return;
  ring_table_.resize(table_.size());
  for (int s = 0; s < n_seq_; ++s)
    for (int b = 0; b < blocks_per_seq_; ++b)
      ring_table_[size_t(s) * size_t(blocks_per_seq_) + size_t(b)] = s * ring_blocks_ + b % ring_blocks_;
}

Cache::Cache(const Shape& shape, int n_ctx, int n_seq, tensor::DType type, int n_blocks)
    : Cache(shape, n_ctx, n_seq, type, n_blocks, 0, 0) {}

Cache::Cache(const Shape& shape, int n_ctx, int n_seq, tensor::DType type, int n_blocks, int ring_blocks,
             int max_batch)
    : n_layer_(shape.n_layer),
      n_head_kv_(shape.n_head_kv),
      n_ctx_(n_ctx),
      n_seq_(n_seq),
      n_blocks_(n_blocks),
      blocks_per_seq_(blocks_for(n_ctx)),
      ring_blocks_(ring_blocks),
      max_batch_(ring_blocks > 0 ? max_batch : 0),
      kv_dim_(size_t(shape.kv_dim())),
      head_dim_(size_t(shape.head_dim)),
      type_(type) {
  if (type != tensor::DType::F32 && type != tensor::DType::F16 && type != tensor::DType::Q8_0)
    throw Error("KV cache type must be f32, f16 or q8_0, got " + std::string(tensor::dtype_info(type).name));
  if (n_ctx < 1 || n_seq < 1 || n_blocks < 1) throw Error("KV cache needs a context, sequences and blocks >= 1");
  const auto head = tensor::row_bytes(type, uint64_t(shape.head_dim));
  if (!head)
    throw Error("KV cache type " + std::string(tensor::dtype_info(type).name) + " needs a head size that is a multiple of " +
                std::to_string(tensor::dtype_info(type).block_size) + " (this model: " + std::to_string(shape.head_dim) + ")");
  head_bytes_ = *head;
  row_bytes_ = head_bytes_ * size_t(shape.n_head_kv);
  const double total = double(n_layer_) * double(n_blocks) * double(kBlockTokens) * double(row_bytes_) * 2;
  if (total > 64.0 * (1ull << 30))
    throw Error("KV cache of " + std::to_string(uint64_t(total / (1 << 20))) + " MiB is too large; lower -c");
  swa_.resize(size_t(n_layer_));
  layer_offset_.assign(size_t(n_layer_) + 1, 0);
  for (int l = 0; l < n_layer_; ++l) {
    swa_[size_t(l)] = shape.is_swa(l);
    layer_offset_[size_t(l) + 1] = layer_offset_[size_t(l)] + size_t(n_head_kv_) * layer_blocks(l) * head_block_bytes();
  }
  k_ = HugeBuffer(layer_offset_.back());
  v_ = HugeBuffer(layer_offset_.back());
  // The mapping reads as zeros already; writing them faults every page in
  // now (as a zero-filled vector did) rather than in the first decode steps.
  std::memset(k_.data(), 0, k_.size());
  std::memset(v_.data(), 0, v_.size());
  table_.assign(size_t(n_seq) * size_t(blocks_per_seq_), -1);
  used_.assign(size_t(n_seq), 0);
}

size_t Cache::bytes_used(int seq) const {
  const size_t n = size_t(used(seq));
  size_t positions = 0;  // summed over layers
  for (int l = 0; l < n_layer_; ++l)
    positions += ring_layer(l) ? std::min(n, size_t(ring_blocks_) * size_t(kBlockTokens)) : n;
  return positions * 2 * row_bytes_;
}

void Cache::unmap(int seq) {
  std::fill_n(table_.begin() + std::ptrdiff_t(size_t(seq) * size_t(blocks_per_seq_)), blocks_per_seq_, -1);
  used_[size_t(seq)] = 0;
}

// The KV types are activation formats too (f32, f16, q8_0), so the active
// ISA's activation converter writes them: the same bytes as the scalar
// codec, without its per-element f16 rounding in software (~2% of a decode
// step in perf). K and V go into their block's tiles, which start at the
// block's first row.
static_assert(Cache::kBlockTokens == kernels::kKvTileRows, "a block's K and V rows are one tile each");

void Cache::store_k(int layer, int head, int seq, int pos, const float* src) {
  const int slot = pos % kBlockTokens;
  kernels::store_k(type_, k(layer, head, seq, pos - slot), slot, src, head_dim_);
}

void Cache::store_v(int layer, int head, int seq, int pos, const float* src) {
  const int slot = pos % kBlockTokens;
  kernels::store_v(type_, v(layer, head, seq, pos - slot), slot, src, head_dim_);
}

void Cache::prefetch_store(int layer, int seq, int pos) const {
  const int slot = pos % kBlockTokens;
  for (int h = 0; h < n_head_kv_; ++h) {
    const size_t at = row_at(layer, h, seq, pos - slot);
    kernels::prefetch_store(type_, true, k_.data() + at, slot, head_dim_);
    kernels::prefetch_store(type_, false, v_.data() + at, slot, head_dim_);
  }
}

}  // namespace kvlab::kv
