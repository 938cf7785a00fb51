// The KV cache: for every layer, the keys and values of every position seen so
// far, written once when the position is processed and read by every later
// step. Contiguous per sequence:
//   k[layer][seq][pos][kv_dim],  v[layer][seq][pos][kv_dim]
// with kv_dim = n_head_kv * head_dim (GQA stores only the shared KV heads).
// Element type f32, f16 or q8_0 (--kv-type): f16 halves the bytes decode
// reads, q8_0 (32-element blocks, 34 bytes) nearly halves them again. For
// q8_0 every head must be whole blocks (head_dim % 32 == 0).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "tensor/dtype.h"

namespace kvlab::kv {

class Cache {
 public:
  // Allocates n_layer * n_seq * n_ctx * kv_dim * 2 elements up front.
  // Throws kvlab::Error for an unsupported type or absurd sizes.
  Cache(const model::Config& cfg, int n_ctx, int n_seq, tensor::DType type);

  int n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  tensor::DType type() const { return type_; }
  size_t kv_dim() const { return kv_dim_; }
  // Bytes per element, averaged over a block (34/32 for q8_0).
  double elem_bytes() const { return double(row_bytes_) / double(kv_dim_); }
  // Byte offset of KV head g inside a row.
  size_t head_offset(int g) const { return size_t(g) * head_bytes_; }

  // Row of kv_dim elements for (layer, seq, pos).
  uint8_t* k(int layer, int seq, int pos) { return base(k_, layer, seq, pos); }
  uint8_t* v(int layer, int seq, int pos) { return base(v_, layer, seq, pos); }
  const uint8_t* k(int layer, int seq, int pos) const { return base(k_, layer, seq, pos); }
  const uint8_t* v(int layer, int seq, int pos) const { return base(v_, layer, seq, pos); }
  size_t row_bytes() const { return row_bytes_; }

  // Stores one f32 row, converting to the cache type.
  void store(uint8_t* dst, const float* src) const;

  // Positions [0, used) of a sequence hold valid entries.
  int used(int seq) const { return used_[size_t(seq)]; }
  void set_used(int seq, int n) { used_[size_t(seq)] = n; }
  void clear(int seq) { used_[size_t(seq)] = 0; }

  size_t bytes_allocated() const { return k_.size() + v_.size(); }
  // K and V bytes one position adds across all layers.
  size_t bytes_per_token() const { return size_t(n_layer_) * 2 * row_bytes(); }
  size_t bytes_used(int seq) const { return bytes_per_token() * size_t(used(seq)); }

 private:
  uint8_t* base(std::vector<uint8_t>& buf, int layer, int seq, int pos) {
    return buf.data() + ((size_t(layer) * n_seq_ + size_t(seq)) * n_ctx_ + size_t(pos)) * row_bytes();
  }
  const uint8_t* base(const std::vector<uint8_t>& buf, int layer, int seq, int pos) const {
    return buf.data() + ((size_t(layer) * n_seq_ + size_t(seq)) * n_ctx_ + size_t(pos)) * row_bytes();
  }

  int n_layer_, n_ctx_, n_seq_;
  size_t kv_dim_, row_bytes_, head_bytes_;
  tensor::DType type_;
  std::vector<uint8_t> k_, v_;
  std::vector<int> used_;
};

}  // namespace kvlab::kv
