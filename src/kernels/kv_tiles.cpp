#include "kernels/kv_tiles.h"

#include <cstddef>
#include <cstring>
#include <string>

#include "common/error.h"
#include "kernels/dot.h"

namespace kvlab::kernels {

using tensor::BlockQ8_0;
using tensor::DType;
using tensor::kQK;

namespace {

// fn(tile offset, row offset, bytes) for every piece of slot `slot`'s row
// in a K or V tile of type t (the layouts of kv_tiles.h), so that storing
// and loading a slot are the same walk.
template <class Fn>
void for_each_piece(DType t, bool key, int slot, size_t head_dim, Fn&& fn) {
  if (t == DType::F16) {
    if (!key) return fn(size_t(slot) * head_dim * 2, size_t(0), head_dim * 2);  // a row, as without tiles
    for (size_t d = 0; d < head_dim; ++d) fn(k_tile_f16_at(d, slot), 2 * d, size_t(2));
    return;
  }
  if (t != DType::Q8_0) throw Error("KV cache: no tile layout for " + std::string(tensor::dtype_info(t).name));
  for (size_t b = 0; b < head_dim / kQK; ++b) {
    const size_t blk = b * sizeof(BlockQ8_0);
    fn(tile_scale_at(b, slot), blk + offsetof(BlockQ8_0, d), size_t(2));
    for (size_t c = 0; c < kQK / 4; ++c) {
      const size_t quad = b * (kQK / 4) + c;
      const size_t at = key ? k_tile_quad_at(head_dim, quad, slot) : v_tile_row_at(head_dim, slot) + 4 * quad;
      fn(at, blk + offsetof(BlockQ8_0, qs) + 4 * c, size_t(4));
    }
  }
}

}  // namespace

void tile_put(DType t, bool key, uint8_t* tile, int slot, const void* row, size_t head_dim) {
  const auto* r = static_cast<const uint8_t*>(row);
  for_each_piece(t, key, slot, head_dim, [&](size_t at, size_t from, size_t n) { std::memcpy(tile + at, r + from, n); });
}

void tile_get(DType t, bool key, const uint8_t* tile, int slot, void* row, size_t head_dim) {
  auto* r = static_cast<uint8_t*>(row);
  for_each_piece(t, key, slot, head_dim, [&](size_t at, size_t to, size_t n) { std::memcpy(r + to, tile + at, n); });
}

namespace {

void store(bool key, DType t, uint8_t* run, int pos, const float* src, size_t head_dim) {
  const size_t row_bytes = *tensor::row_bytes(t, head_dim);
  const DotKernel& convert = dot_kernel(t);
  if (!k_tiled(t)) return convert.quantize_act(src, run + size_t(pos) * row_bytes, head_dim);
  constexpr size_t kMaxRowBytes = 4096;  // an f16 head of 2048, a q8_0 head of 2048 (2176 bytes)
  if (row_bytes > kMaxRowBytes || (t == DType::Q8_0 && head_dim % kQK != 0))
    throw Error("KV cache: a " + std::string(tensor::dtype_info(t).name) +
                " cache needs head_dim up to 2048 (q8_0: a multiple of 32), got " + std::to_string(head_dim));
  alignas(64) uint8_t row[kMaxRowBytes];
  convert.quantize_act(src, row, head_dim);
  tile_put(t, key, run + size_t(pos / kKvTileRows) * kKvTileRows * row_bytes, pos % kKvTileRows, row, head_dim);
}

}  // namespace

// prefetchw (PRFCHW), written out so that it needs no target flag: a CPU
// without it runs the opcode as a no-op.
inline void prefetch_for_write(const uint8_t* p) { asm volatile("prefetchw %0" : : "m"(*p)); }

void prefetch_store(DType t, bool key, const uint8_t* run, int pos, size_t head_dim) {
  const size_t row_bytes = *tensor::row_bytes(t, head_dim);
  // One prefetch per line: a slot's pieces in a tile are 2 or 4 bytes, and
  // pieces one after another mostly share a line (f16 K: two elements a
  // line, so 32 prefetches for a head of 64 rather than two per element).
  uintptr_t last = ~uintptr_t(0);
  auto lines = [&](const uint8_t* p, size_t n) {
    for (uintptr_t line = uintptr_t(p) / 64; line <= (uintptr_t(p) + n - 1) / 64; ++line)
      if (line != last) prefetch_for_write(reinterpret_cast<const uint8_t*>((last = line) * 64));
  };
  if (!k_tiled(t)) return lines(run + size_t(pos) * row_bytes, row_bytes);
  const uint8_t* tile = run + size_t(pos / kKvTileRows) * kKvTileRows * row_bytes;
  for_each_piece(t, key, pos % kKvTileRows, head_dim, [&](size_t at, size_t, size_t n) { lines(tile + at, n); });
}

void store_k(DType t, uint8_t* k0, int pos, const float* src, size_t head_dim) { store(true, t, k0, pos, src, head_dim); }

void store_v(DType t, uint8_t* v0, int pos, const float* src, size_t head_dim) { store(false, t, v0, pos, src, head_dim); }

}  // namespace kvlab::kernels
