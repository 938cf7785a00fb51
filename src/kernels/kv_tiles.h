// Where one position's K and V live in a KV head's run of rows, per KV type.
//
// f32: rows, position p at k0 + p * head_bytes (V likewise).
// f16 and q8_0: K in tiles of kKvTileRows positions, position-minor. A tile
// takes the bytes its 16 rows would, at the address of its first row, so
// the KV cache's blocks (kv::Cache::kBlockTokens positions) and views
// (kernels::KvView) address it as they address rows. For head_dim D:
//   f16 K:  f16 k[D][16]            element d of slot s at (d*16 + s) * 2
//   f16 V:  rows (a tile is its 16 rows)
// q8_0 (D a multiple of 32; 16 * 34 bytes per 32 elements), K and V both:
//   scales  f16  d[D/32][16]        block b of slot s at (b*16 + s) * 2
// (the scales take D bytes), then
//   K: quants int8 q[D/4][16][4]    elements 4c .. 4c+3 of slot s at D + (c*16 + s) * 4
//   V: quants int8 q[16][D]         slot s's row at D + s * D
// Why K: a decode step's scores are one dot product per position, and with
// a row per position every dot ends in a horizontal sum (and, for q8_0, a
// scalar block scale per position). Here one vector holds the same
// elements of 16 positions (f16: one element, 32 bytes; q8_0: 4 elements,
// 64 bytes), so each multiply-add per head adds to all 16 scores, the lanes
// are the positions, and q8_0's 16 block scales of a block are one vector.
// At position 2048 the q8_0 scores took a third of a decode step's
// attention with rows (perf on attend_batch q8_0), the f16 ones over half
// of it in cache (perf on attend/f16/pos:1024: scores 54%, P·V 29%).
// Why q8_0's V: P·V weighs each position's row by p times the row's block
// scale, one multiply per head and block; with 16 scales in a vector these
// are vector multiplies ahead of the loop, and the loop's multiply-adds take
// their weights straight from memory. An f16 V row has no scale, so rows
// serve P·V as they are.
// The kernels read the tiles in order, each line asked for a fixed distance
// ahead as they go (attention_rows.h, prefetch_stream). Bursts of
// prefetches at the start of each tile, as the row kernels issue them
// (attention_rows.h, score_tiles), made the tiled score kernel slower from
// DRAM than the row kernel it replaced on Zen 4 (attend_batch q8_0
// layers:90, AVX-512, medians of 7 alternating rounds: K rows 5.10 ms, K
// tiles with those bursts 5.69 ms, without any prefetch 3.89 ms).
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace kvlab::kernels {

inline constexpr int kKvTileRows = 16;

// K in tiles (the scores kernels read tiles); V in tiles (P·V reads q8_0's
// grouped scales; an f16 V tile is plain rows, read as rows).
constexpr bool k_tiled(tensor::DType t) { return t == tensor::DType::F16 || t == tensor::DType::Q8_0; }
constexpr bool v_tiled(tensor::DType t) { return t == tensor::DType::Q8_0; }

inline size_t tile_scale_at(size_t block, int slot) { return (block * kKvTileRows + size_t(slot)) * 2; }
inline size_t k_tile_quad_at(size_t head_dim, size_t quad, int slot) {
  return head_dim + (quad * kKvTileRows + size_t(slot)) * 4;
}
inline size_t k_tile_f16_at(size_t elem, int slot) { return (elem * kKvTileRows + size_t(slot)) * 2; }
inline size_t v_tile_row_at(size_t head_dim, int slot) { return head_dim + size_t(slot) * head_dim; }

// Slot `slot` of a K or V tile of type t (f16 or q8_0) from and into the
// position's row in t's own format (head_dim halves, or head_dim / 32 q8_0
// blocks).
void tile_put(tensor::DType t, bool key, uint8_t* tile, int slot, const void* row, size_t head_dim);
void tile_get(tensor::DType t, bool key, const uint8_t* tile, int slot, void* row, size_t head_dim);

// Converts head_dim floats (the active ISA's activation converter: the
// scalar codec's bytes) and stores them as position `pos` of a run of one
// KV head's K (or V) rows from k0, laid out as above. A run of tiles starts
// at a tile and holds whole tiles.
void store_k(tensor::DType t, uint8_t* k0, int pos, const float* src, size_t head_dim);
void store_v(tensor::DType t, uint8_t* v0, int pos, const float* src, size_t head_dim);
// Asks the caches, for writing, for the lines that store_k (key) or store_v
// will write for position `pos` of the run from `run`. A decode step stores
// its position into lines that the weights streamed out of the caches since
// the last step, and a tiled K spreads one position over many of them (f16:
// head_dim / 2 lines, one per two elements), so the stores, if they come
// first, wait on those misses one after another.
void prefetch_store(tensor::DType t, bool key, const uint8_t* run, int pos, size_t head_dim);

}  // namespace kvlab::kernels
