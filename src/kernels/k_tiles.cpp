#include "kernels/k_tiles.h"

#include <cstring>

#include "common/error.h"
#include "kernels/dot.h"

namespace kvlab::kernels {

using tensor::BlockQ8_0;
using tensor::kQK;

void k_tile_put(uint8_t* tile, int slot, const BlockQ8_0* row, size_t head_dim) {
  for (size_t b = 0; b < head_dim / kQK; ++b) {
    std::memcpy(tile + k_tile_scale_at(b, slot), &row[b].d, 2);
    for (size_t c = 0; c < kQK / 4; ++c)
      std::memcpy(tile + k_tile_quad_at(head_dim, b * (kQK / 4) + c, slot), row[b].qs + 4 * c, 4);
  }
}

void k_tile_get(const uint8_t* tile, int slot, BlockQ8_0* row, size_t head_dim) {
  for (size_t b = 0; b < head_dim / kQK; ++b) {
    std::memcpy(&row[b].d, tile + k_tile_scale_at(b, slot), 2);
    for (size_t c = 0; c < kQK / 4; ++c)
      std::memcpy(row[b].qs + 4 * c, tile + k_tile_quad_at(head_dim, b * (kQK / 4) + c, slot), 4);
  }
}

void store_v(tensor::DType t, uint8_t* v0, int pos, const float* src, size_t head_dim) {
  dot_kernel(t).quantize_act(src, v0 + size_t(pos) * *tensor::row_bytes(t, head_dim), head_dim);
}

void store_k(tensor::DType t, uint8_t* k0, int pos, const float* src, size_t head_dim) {
  if (!k_tiled(t)) return store_v(t, k0, pos, src, head_dim);
  constexpr size_t kMaxBlocks = 64;  // head_dim up to 2048
  if (head_dim % kQK != 0 || head_dim / kQK > kMaxBlocks)
    throw Error("KV cache: q8_0 K needs head_dim a multiple of 32 up to 2048, got " + std::to_string(head_dim));
  BlockQ8_0 row[kMaxBlocks];
  dot_kernel(t).quantize_act(src, row, head_dim);
  const size_t tile_bytes = size_t(kKTileRows) * *tensor::row_bytes(t, head_dim);
  k_tile_put(k0 + size_t(pos / kKTileRows) * tile_bytes, pos % kKTileRows, row, head_dim);
}

}  // namespace kvlab::kernels
