// The rows16 kernel on the AMX tile unit (tile_unit.h), for the formats
// with 32-element blocks: q4_0, q4_1, q5_0, q5_1, q8_0.
//
// A rows16 call is one pair of row groups (16 weight rows) against T tokens.
// Each block of the pair unpacks, with the VNNI kernels' own code
// (blocks_vnni.h), to 8 vectors whose lane r holds row r's quants for
// elements 4i..4i+3: written out, those 512 bytes are exactly TDPBSUD's B
// operand (K/4 rows of 16 columns x 4 bytes). The A operand is each token's
// 32 activation quants, read in place from the quantized rows (a stride of
// one row), and C collects the block's exact int32 sum for 16 tokens x 16
// rows. The sums are those vpdpbusd forms (unsigned weights times signed
// activations, no saturation, below 2^24 in magnitude), and each is then
// converted and scaled with the VNNI kernel's float operations, in block
// order. Every result therefore equals the VNNI kernel's bit for bit, and
// the scalar reference's.
//
// The float work cannot fold into the integer sums: each 32-element block
// carries its own weight and activation scales, so C is stored and rescaled
// after every block. K = 32 also fills half of a tile row (TDPBSUD takes up
// to 64 bytes). The stores and vector work of block b run while the unit
// computes block b + 1 (the loop issues b + 1's tile work first).
//
// Tokens go 16 per A tile and up to 4 tiles per pass (64 tokens, C in
// registers 0-3); the last T % 16 tokens take the VNNI kernel.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/dot.h"
#include "kernels/tile_count.h"
#include "kernels/x86_avx512/blocks_vnni.h"
#include "kernels/x86_avx512/tile_unit.h"

namespace kvlab::kernels::avx512 {
namespace {
using namespace vnni;
using V = Lanes<16>;

constexpr size_t kTileTokens = 16;  // A's and C's rows
constexpr int kMaxTokenTiles = 4;   // C registers 0..3
constexpr int kA = 4, kWeights = 6;  // A (4 and 5 alternate), B

constexpr TileShapes kShapes = [] {
  TileShapes s{};
  for (int c = 0; c < kMaxTokenTiles; ++c) s[size_t(c)] = {uint8_t(kTileTokens), 64};  // 16 int32 per token
  s[kA] = s[kA + 1] = {uint8_t(kTileTokens), uint16_t(kQK)};  // one activation block per token
  s[kWeights] = {uint8_t(kQK / 4), 64};  // 8 rows of 16 weight rows x 4 quants
  return s;
}();

template <int N, class Fn>
inline void unrolled(Fn&& fn) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (fn.template operator()<I>(), ...); }(std::make_integer_sequence<int, N>{});
}

// Per pass: the int32 sums of two blocks (the one being rescaled while the
// next is computed), the float accumulators, the unpacked weight tile.
template <int NT>
struct PassBuffers {
  alignas(64) int32_t sums[2][NT * kTileTokens][16];
  alignas(64) float acc[NT * kTileTokens][16] = {};
  alignas(64) uint8_t weights[kQK / 4][64];
};

// Block b's exact sums for NT * 16 tokens into sums.
template <class K, class Tiles, int NT>
void block_sums(const uint8_t* blk, size_t second, const uint8_t* act_qs, size_t a_stride, PassBuffers<NT>& buf,
                int32_t (*sums)[16]) {
  V::I w[8];
  V::template load<K>(blk, second, w);
  for (int i = 0; i < 8; ++i) _mm512_store_si512(buf.weights[i], w[i]);
  Tiles::template load<kWeights>(buf.weights, 64);
  unrolled<NT>([&]<int J>() {
    constexpr int kAct = kA + J % 2;
    Tiles::template zero<J>();
    Tiles::template load<kAct>(act_qs + J * kTileTokens * a_stride, a_stride);
    Tiles::template dpbsud<J, kAct, kWeights>();
    Tiles::template store<J>(sums[J * kTileTokens], 64);
  });
}

// Block b's term added to every token's accumulator: the VNNI kernel's
// float operations on the same integer sums (group_tokens).
template <class K, int NT, class Scales>
void add_block(const int32_t (*sums)[16], const Scales& s, const float* scales, size_t s_stride, size_t b,
               float (*acc)[16]) {
  for (size_t t = 0; t < NT * kTileTokens; ++t) {
    const float* xs = scales + t * s_stride + 2 * b;
    V::F sumf = V::to_float(_mm512_load_si512(sums[t]), _mm512_setzero_si512());
    if constexpr (K::kBias != 0) sumf = V::fnmadd(float(K::kBias), xs[1], sumf);
    _mm512_store_ps(acc[t], K::accumulate(_mm512_load_ps(acc[t]), sumf, s, xs));
  }
}

// NT * 16 tokens against the pair, all blocks.
template <class K, class Tiles, int NT>
[[gnu::noinline]] void tile_pass(const uint8_t* group, size_t second, const uint8_t* act, size_t a_stride,
                                 const float* scales, size_t s_stride, size_t n, float* y, size_t pair_rows,
                                 size_t y_stride) {
  using A = typename K::A;
  PassBuffers<NT> buf;
  const auto qs = [&](size_t b) { return act + b * sizeof(A) + offsetof(A, qs); };
  const size_t blocks = n / kQK;
  block_sums<K, Tiles, NT>(group, second, qs(0), a_stride, buf, buf.sums[0]);
  auto s = V::template scales<K>(group, second);
  for (size_t b = 1; b < blocks; ++b) {
    const uint8_t* blk = group + b * K::kBlockBytes;
    V::prefetch(blk, second, K::kBlockBytes);
    block_sums<K, Tiles, NT>(blk, second, qs(b), a_stride, buf, buf.sums[b % 2]);
    add_block<K, NT>(buf.sums[(b - 1) % 2], s, scales, s_stride, b - 1, buf.acc);
    s = V::template scales<K>(blk, second);
  }
  add_block<K, NT>(buf.sums[(blocks - 1) % 2], s, scales, s_stride, blocks - 1, buf.acc);
  for (size_t t = 0; t < NT * kTileTokens; ++t) V::store(y + t * y_stride, pair_rows, _mm512_load_ps(buf.acc[t]));
}

// DotKernel::rows16: whole tiles of 16 tokens on the tile unit, the rest on
// the VNNI set's rows16 for the type.
template <class K, class Tiles, DType kType>
void rows16_tiles(const void* group, size_t pair_bytes, const void* act, size_t a_stride, const float* scales,
                  size_t s_stride, size_t n_tokens, size_t n, float* y, size_t pair_rows, size_t y_stride) {
  const auto* g = static_cast<const uint8_t*>(group);
  const auto* a = static_cast<const uint8_t*>(act);
  const size_t tiled = n_tokens / kTileTokens * kTileTokens;
  if (tiled > 0) {
    Tiles::configure(kShapes);
    for (size_t t = 0; t < tiled; t += kMaxTokenTiles * kTileTokens)
      with_tile_count<kMaxTokenTiles>((tiled - t) / kTileTokens, [&]<int NT>() {
        tile_pass<K, Tiles, NT>(g, pair_bytes, a + t * a_stride, a_stride, scales + t * s_stride, s_stride, n,
                                y + t * y_stride, pair_rows, y_stride);
      });
    Tiles::release();
  }
  if (tiled < n_tokens)
    avx512::find(kType)->rows16(g, pair_bytes, a + tiled * a_stride, a_stride, scales + tiled * s_stride, s_stride,
                                n_tokens - tiled, n, y + tiled * y_stride, pair_rows, y_stride);
}

template <class Tiles>
const DotKernel* find_with(tensor::DType w) {
  auto tiled = [](tensor::DType t, decltype(DotKernel::rows16) rows16) {
    DotKernel k = *avx512::find(t);
    k.rows16 = rows16;
    return std::pair{t, k};
  };
  static const std::pair<DType, DotKernel> sets[] = {
      tiled(DType::Q4_0, rows16_tiles<Q4_0Vnni, Tiles, DType::Q4_0>),
      tiled(DType::Q4_1, rows16_tiles<Q4_1Vnni, Tiles, DType::Q4_1>),
      tiled(DType::Q8_0, rows16_tiles<Q8_0Vnni, Tiles, DType::Q8_0>),
      tiled(DType::Q5_0, rows16_tiles<Q5_0Vnni, Tiles, DType::Q5_0>),
      tiled(DType::Q5_1, rows16_tiles<Q5_1Vnni, Tiles, DType::Q5_1>),
  };
  for (const auto& [type, kernel] : sets)
    if (type == w) return &kernel;
  return avx512::find(w);
}

}  // namespace

const DotKernel* find_tiled(tensor::DType w, bool emulated) {
  return emulated ? find_with<EmulatedTiles>(w) : find_with<AmxTiles>(w);
}

}  // namespace kvlab::kernels::avx512
