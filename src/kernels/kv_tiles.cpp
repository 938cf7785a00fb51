#include "kernels/kv_tiles.h"

#include <cstring>

#include "common/error.h"
#include "kernels/dot.h"

namespace kvlab::kernels {

using tensor::BlockQ8_0;
using tensor::kQK;

// Element offsets of slot `slot`'s 4-element groups: K's are scattered, V's in one row.
static size_t quad_at(bool key, size_t head_dim, size_t quad, int slot) {
  return key ? k_tile_quad_at(head_dim, quad, slot) : v_tile_row_at(head_dim, slot) + 4 * quad;
}

void tile_put(bool key, uint8_t* tile, int slot, const BlockQ8_0* row, size_t head_dim) {
  for (size_t b = 0; b < head_dim / kQK; ++b) {
    std::memcpy(tile + tile_scale_at(b, slot), &row[b].d, 2);
    for (size_t c = 0; c < kQK / 4; ++c)
      std::memcpy(tile + quad_at(key, head_dim, b * (kQK / 4) + c, slot), row[b].qs + 4 * c, 4);
  }
}

void tile_get(bool key, const uint8_t* tile, int slot, BlockQ8_0* row, size_t head_dim) {
  for (size_t b = 0; b < head_dim / kQK; ++b) {
    std::memcpy(&row[b].d, tile + tile_scale_at(b, slot), 2);
    for (size_t c = 0; c < kQK / 4; ++c)
      std::memcpy(row[b].qs + 4 * c, tile + quad_at(key, head_dim, b * (kQK / 4) + c, slot), 4);
  }
}

namespace {

void store(bool key, tensor::DType t, uint8_t* run, int pos, const float* src, size_t head_dim) {
  const size_t row_bytes = *tensor::row_bytes(t, head_dim);
  if (!kv_tiled(t)) return dot_kernel(t).quantize_act(src, run + size_t(pos) * row_bytes, head_dim);
  constexpr size_t kMaxBlocks = 64;  // head_dim up to 2048
  if (head_dim % kQK != 0 || head_dim / kQK > kMaxBlocks)
    throw Error("KV cache: q8_0 needs head_dim a multiple of 32 up to 2048, got " + std::to_string(head_dim));
  BlockQ8_0 row[kMaxBlocks];
  dot_kernel(t).quantize_act(src, row, head_dim);
  tile_put(key, run + size_t(pos / kKvTileRows) * kKvTileRows * row_bytes, pos % kKvTileRows, row, head_dim);
}

}  // namespace

void store_k(tensor::DType t, uint8_t* k0, int pos, const float* src, size_t head_dim) {
  store(true, t, k0, pos, src, head_dim);
}

void store_v(tensor::DType t, uint8_t* v0, int pos, const float* src, size_t head_dim) {
  store(false, t, v0, pos, src, head_dim);
}

}  // namespace kvlab::kernels
