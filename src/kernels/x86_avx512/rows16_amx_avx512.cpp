// The rows16 kernel on the AMX tile unit (tile_unit.h), for every format
// with a rows-of-8 layout: q4_0, q4_1, q5_0, q5_1, q8_0 (32-element
// blocks) and q4_k, q5_k, q6_k (256-element super-blocks).
//
// A rows16 call is one pair of row groups (16 weight rows) against T tokens.
// A pass walks the weights in steps of K elements (a block, or a
// super-block's sub-block: K = 32, or 16 for q6_k). Each step unpacks, with
// the VNNI kernels' own code (blocks_vnni.h, q4_k_rows8.h, q6_k_rows8.h),
// to vectors whose lane r holds row r's quants for elements 4i..4i+3:
// written out, those bytes are exactly TDPBSUD's B operand (K/4 rows of 16
// columns x 4 bytes). The A operand is each token's K activation quants,
// read in place from the quantized rows (a stride of one row), and C
// collects the step's exact int32 sums for 16 tokens x 16 rows. The sums
// are those vpdpbusd forms (unsigned weights times signed activations, no
// saturation), and the vector unit then finishes them as the VNNI kernel
// does: a block's sum is converted and scaled at once; a sub-block's is
// multiplied by its integer scale into the super-block's int32 sum, whose
// float term follows the last sub-block. Integer sums are exact in any
// order, and the float operations are the VNNI kernel's in its order, so
// every result equals it bit for bit, and the scalar reference's.
//
// The float (or scale) work cannot fold into the integer sums: each step
// carries its own scales, so C is stored and finished after every step.
// K = 32 also fills half of a tile row (TDPBSUD takes up to 64 bytes). The
// stores and vector work of step s run while the unit computes step s + 1
// (the loop issues s + 1's tile work first).
//
// Tokens go 16 per A tile and up to 4 tiles per pass (64 tokens, C in
// registers 0-3); the last T % 16 tokens take the VNNI kernels.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/dot.h"
#include "kernels/q4_k_rows8.h"
#include "kernels/q6_k_rows8.h"
#include "kernels/tile_count.h"
#include "kernels/x86_avx512/blocks_vnni.h"
#include "kernels/x86_avx512/tile_unit.h"

namespace kvlab::kernels::avx512 {
namespace {
using namespace vnni;
using V = Lanes<16>;
struct Tag {};  // this file's instances of the shared SIMD templates (q4_k_rows8.h)

constexpr size_t kTileTokens = 16;  // A's and C's rows
constexpr int kMaxTokenTiles = 4;   // C registers 0..3
constexpr int kA = 4, kWeights = 6;  // A (4 and 5 alternate), B

// C: 16 int32 per token; A: one step's kStepK quants per token; B: kStepK/4
// rows of 16 weight rows x 4 quants.
template <size_t kStepK>
constexpr TileShapes tile_shapes() {
  TileShapes s{};
  for (int c = 0; c < kMaxTokenTiles; ++c) s[size_t(c)] = {uint8_t(kTileTokens), 64};
  s[kA] = s[kA + 1] = {uint8_t(kTileTokens), uint16_t(kStepK)};
  s[kWeights] = {uint8_t(kStepK / 4), 64};
  return s;
}

template <int N, class Fn>
inline void unrolled(Fn&& fn) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (fn.template operator()<I>(), ...); }(std::make_integer_sequence<int, N>{});
}

// What a tile pass is given: the pair, the pass's tokens, the sizes.
struct Operands {
  const uint8_t* group;
  size_t second;  // the pair's second group, this many bytes after the first
  const uint8_t* act;
  size_t a_stride;
  const float* scales;  // rows8_act_scales (the 32-element formats)
  size_t s_stride;
  size_t n;
};

// A plan is a format's side of a pass of NT tiles of tokens:
//   kStepK                  elements per step;
//   steps()                 steps per pass;
//   weights(s)              step s's B operand (kStepK/4 rows of 64 bytes);
//   act(s)                  token 0's kStepK activation quants of step s;
//   add(s, sums)            step s's int32 sums of each token (16 lanes:
//                           the first group's rows, then the second's)
//                           into the accumulators;
//   store(y, pair_rows, y_stride)  the results.

// 32-element blocks: a step is a block, finished with group_tokens's float
// operations (blocks_vnni.h).
template <class K, int NT>
class BlockPlan {
 public:
  static constexpr size_t kStepK = kQK;
  explicit BlockPlan(const Operands& o) : o_(o) {}
  size_t steps() const { return o_.n / kQK; }
  const uint8_t* weights(size_t s) {
    const uint8_t* blk = o_.group + s * K::kBlockBytes;
    V::prefetch(blk, o_.second, K::kBlockBytes);
    V::I w[8];
    V::template load<K>(blk, o_.second, w);
    for (int i = 0; i < 8; ++i) _mm512_store_si512(weights_[i], w[i]);
    return weights_[0];
  }
  const uint8_t* act(size_t s) const {
    using A = typename K::A;
    return o_.act + s * sizeof(A) + offsetof(A, qs);
  }
  void add(size_t s, const int32_t (*sums)[16]) {
    const auto scales = V::template scales<K>(o_.group + s * K::kBlockBytes, o_.second);
    for (size_t t = 0; t < NT * kTileTokens; ++t) {
      const float* xs = o_.scales + t * o_.s_stride + 2 * s;
      V::F sumf = V::to_float(_mm512_load_si512(sums[t]), _mm512_setzero_si512());
      if constexpr (K::kBias != 0) sumf = V::fnmadd(float(K::kBias), xs[1], sumf);
      _mm512_store_ps(acc_[t], K::accumulate(_mm512_load_ps(acc_[t]), sumf, scales, xs));
    }
  }
  void store(float* y, size_t pair_rows, size_t y_stride) const {
    for (size_t t = 0; t < NT * kTileTokens; ++t) V::store(y + t * y_stride, pair_rows, _mm512_load_ps(acc_[t]));
  }

 private:
  Operands o_;
  alignas(64) float acc_[NT * kTileTokens][16] = {};
  alignas(64) uint8_t weights_[kQK / 4][64];
};

// Shared by the super-block plans: each token's int32 sum of the current
// super-block per row and its float accumulators, per group as the 8-lane
// VNNI kernels keep them (group g: lanes 8g..8g+7).
template <int NT>
struct SuperBlockSums {
  alignas(64) int32_t sumi[NT * kTileTokens][16] = {};
  alignas(64) float acc[NT * kTileTokens][16] = {};

  static __m256i half(const int32_t* v, int g) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(v + 8 * g)); }
  __m256i sumi_of(size_t t, int g) const { return half(sumi[t], g); }
  void set_sumi(size_t t, int g, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(sumi[t] + 8 * g), v); }
  // acc = add(acc): the super-block's float term, as the VNNI kernel adds
  // it; the super-block's sums reset.
  template <class Add>
  void finish(size_t t, int g, Add&& add) {
    _mm256_store_ps(acc[t] + 8 * g, add(_mm256_load_ps(acc[t] + 8 * g)));
    set_sumi(t, g, _mm256_setzero_si256());
  }
  void store(float* y, size_t pair_rows, size_t y_stride) const {
    for (size_t t = 0; t < NT * kTileTokens; ++t) V::store(y + t * y_stride, pair_rows, _mm512_load_ps(acc[t]));
  }
};

// One B row of the pair: the first group's 8 rows' quants, then the second's.
inline void put_pair_row(uint8_t* row, __m256i first, __m256i second) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(row), first);
  _mm256_store_si256(reinterpret_cast<__m256i*>(row + 32), second);
}

// Token t's activation super-block b, and token 0's quants of block b.
inline const tensor::BlockQ8_K& q8_k(const Operands& o, size_t t, size_t b) {
  return reinterpret_cast<const tensor::BlockQ8_K*>(o.act + t * o.a_stride)[b];
}
inline const uint8_t* q8_k_quants(const Operands& o, size_t b) {
  return o.act + b * sizeof(tensor::BlockQ8_K) + offsetof(tensor::BlockQ8_K, qs);
}

// q4_k and q5_k: a step is a 32-element sub-block; sub-block pair j unpacks
// once (q45_k_unpack: low and high nibbles), and each sub-block's sums are
// multiplied by its 6-bit scale into the super-block's sum, finished by
// q4_k_term after sub-block 7 (the VNNI kernel's arithmetic, dot_avx512.cpp).
template <class Block, int NT>
class Q45_KPlan {
  using L = Q45_KLayout<Block>;

 public:
  static constexpr size_t kStepK = 32;
  explicit Q45_KPlan(const Operands& o) : o_(o) {}
  size_t steps() const { return o_.n / tensor::kQK_K * 8; }
  const uint8_t* weights(size_t s) {
    const size_t sub = s % 8;
    if (sub % 2 == 0) {  // both sub-blocks of pair j
      const uint8_t* blk = o_.group + s / 8 * L::kBlockBytes;
      if (sub == 0) V::prefetch(blk, o_.second, L::kBlockBytes);
      for (int c = 0; c < 8; ++c) {
        __m256i lo[2], hi[2];
        q45_k_unpack<Tag, Block>(blk, int(sub / 2), c, lo[0], hi[0]);
        q45_k_unpack<Tag, Block>(blk + o_.second, int(sub / 2), c, lo[1], hi[1]);
        put_pair_row(weights_[0][c], lo[0], lo[1]);
        put_pair_row(weights_[1][c], hi[0], hi[1]);
      }
    }
    return weights_[sub % 2][0];
  }
  const uint8_t* act(size_t s) const { return q8_k_quants(o_, s / 8) + 32 * (s % 8); }
  void add(size_t s, const int32_t (*sums)[16]) {
    const size_t b = s / 8, sub = s % 8;
    const uint8_t* blk[2] = {o_.group + b * L::kBlockBytes, o_.group + b * L::kBlockBytes + o_.second};
    if (sub == 0)
      for (int g = 0; g < 2; ++g) q4_k_scales_mins<Tag>(blk[g] + L::kScales, sc_[g], m_[g]);
    for (size_t t = 0; t < NT * kTileTokens; ++t)
      for (int g = 0; g < 2; ++g) {
        const __m256i dot = SuperBlockSums<NT>::half(sums[t], g);
        acc_.set_sumi(t, g, _mm256_add_epi32(acc_.sumi_of(t, g), _mm256_mullo_epi32(dot, sc_[g][sub])));
        if (sub == 7)
          acc_.finish(t, g, [&](__m256 acc) {
            return _mm256_add_ps(acc, q4_k_term<Tag>(blk[g], q8_k(o_, t, b), acc_.sumi_of(t, g), m_[g]));
          });
      }
  }
  void store(float* y, size_t pair_rows, size_t y_stride) const { acc_.store(y, pair_rows, y_stride); }

 private:
  Operands o_;
  SuperBlockSums<NT> acc_;
  __m256i sc_[2][8], m_[2][8];
  alignas(64) uint8_t weights_[2][8][64];  // pair j's low and high sub-blocks
};

// q6_k: a step is a 16-element sub-block. For half n of the super-block and
// positions l in [16h, 16h + 16), the four sub-blocks 8n + 2k + h (k = 0..3)
// unpack together (q6_k_rows8::unpack gives all four k of 4 positions), and
// each adds sc * (dot - 32 * bsum) to the super-block's sum, finished by
// add_term after the sixteenth (q6_k_rows8.h).
template <int NT>
class Q6_KPlan {
 public:
  static constexpr size_t kStepK = 16;
  explicit Q6_KPlan(const Operands& o) : o_(o) {}
  size_t steps() const { return o_.n / tensor::kQK_K * 16; }
  // Step s: super-block s / 16; within it half n, h and k as above.
  const uint8_t* weights(size_t s) {
    const size_t u = s % 16, half = u / 8, h = u / 4 % 2;
    if (u % 4 == 0) {
      const uint8_t* blk = o_.group + s / 16 * q6_k_rows8::kBlockBytes;
      if (u == 0) V::prefetch(blk, o_.second, q6_k_rows8::kBlockBytes);
      for (int i = 0; i < 4; ++i) {
        __m256i w[2][4];
        q6_k_rows8::unpack<Tag>(blk, int(half), int(4 * h) + i, w[0]);
        q6_k_rows8::unpack<Tag>(blk + o_.second, int(half), int(4 * h) + i, w[1]);
        for (int k = 0; k < 4; ++k) put_pair_row(weights_[k][i], w[0][k], w[1][k]);
      }
    }
    return weights_[u % 4][0];
  }
  const uint8_t* act(size_t s) const {
    const size_t u = s % 16;
    return q8_k_quants(o_, s / 16) + 128 * (u / 8) + 32 * (u % 4) + 16 * (u / 4 % 2);
  }
  void add(size_t s, const int32_t (*sums)[16]) {
    const size_t b = s / 16, u = s % 16;
    const int sub = int(8 * (u / 8) + 2 * (u % 4) + u / 4 % 2);
    const uint8_t* blk[2] = {o_.group + b * q6_k_rows8::kBlockBytes,
                             o_.group + b * q6_k_rows8::kBlockBytes + o_.second};
    const __m256i sc[2] = {q6_k_rows8::scale<Tag>(blk[0], sub), q6_k_rows8::scale<Tag>(blk[1], sub)};
    for (size_t t = 0; t < NT * kTileTokens; ++t) {
      const tensor::BlockQ8_K& x = q8_k(o_, t, b);
      for (int g = 0; g < 2; ++g) {
        const __m256i dot = SuperBlockSums<NT>::half(sums[t], g);
        acc_.set_sumi(t, g, q6_k_rows8::add_sub_block<Tag>(acc_.sumi_of(t, g), dot, sc[g], x.bsums[sub]));
        if (u == 15)
          acc_.finish(t, g, [&](__m256 acc) { return q6_k_rows8::add_term<Tag>(acc, blk[g], x, acc_.sumi_of(t, g)); });
      }
    }
  }
  void store(float* y, size_t pair_rows, size_t y_stride) const { acc_.store(y, pair_rows, y_stride); }

 private:
  Operands o_;
  SuperBlockSums<NT> acc_;
  alignas(64) uint8_t weights_[4][4][64];  // the four k's sub-blocks, 4 rows each
};

// Step s's exact sums for NT * 16 tokens into sums.
template <class Plan, class Tiles, int NT>
void step_sums(Plan& plan, size_t s, size_t a_stride, int32_t (*sums)[16]) {
  Tiles::template load<kWeights>(plan.weights(s), 64);
  const uint8_t* act = plan.act(s);
  unrolled<NT>([&]<int J>() {
    constexpr int kAct = kA + J % 2;
    Tiles::template zero<J>();
    Tiles::template load<kAct>(act + J * kTileTokens * a_stride, a_stride);
    Tiles::template dpbsud<J, kAct, kWeights>();
    Tiles::template store<J>(sums[J * kTileTokens], 64);
  });
}

// NT * 16 tokens against the pair, every step.
template <template <int> class Plan, class Tiles, int NT>
[[gnu::noinline]] void tile_pass(const Operands& o, float* y, size_t pair_rows, size_t y_stride) {
  Plan<NT> plan(o);
  alignas(64) int32_t sums[2][NT * kTileTokens][16];
  const size_t steps = plan.steps();
  step_sums<Plan<NT>, Tiles, NT>(plan, 0, o.a_stride, sums[0]);
  for (size_t s = 1; s < steps; ++s) {
    step_sums<Plan<NT>, Tiles, NT>(plan, s, o.a_stride, sums[s % 2]);
    plan.add(s - 1, sums[(s - 1) % 2]);
  }
  plan.add(steps - 1, sums[(steps - 1) % 2]);
  plan.store(y, pair_rows, y_stride);
}

// The tokens after the whole tiles, on the VNNI set's kernels: its rows16
// where it has one, else rows8 on each group.
void leftover_tokens(const DotKernel& vnni, const Operands& o, size_t n_tokens, float* y, size_t pair_rows,
                     size_t y_stride) {
  if (vnni.rows16) {
    vnni.rows16(o.group, o.second, o.act, o.a_stride, o.scales, o.s_stride, n_tokens, o.n, y, pair_rows, y_stride);
    return;
  }
  for (size_t t = 0; t < n_tokens; t += vnni.rows8_tokens)
    for (size_t g = 0; g < 2; ++g)
      vnni.rows8(o.group + g * o.second, o.act + t * o.a_stride, o.a_stride, o.scales + t * o.s_stride, o.s_stride,
                 std::min(vnni.rows8_tokens, n_tokens - t), o.n, y + t * y_stride + g * pair_rows, y_stride);
}

// DotKernel::rows16: whole tiles of 16 tokens on the tile unit, the rest on
// the VNNI set's kernels for the type.
template <template <int> class Plan, class Tiles, DType kType>
void rows16_tiles(const void* group, size_t pair_bytes, const void* act, size_t a_stride, const float* scales,
                  size_t s_stride, size_t n_tokens, size_t n, float* y, size_t pair_rows, size_t y_stride) {
  const Operands all{static_cast<const uint8_t*>(group), pair_bytes, static_cast<const uint8_t*>(act), a_stride,
                     scales, s_stride, n};
  auto from = [&](size_t t) {
    Operands o = all;
    o.act += t * a_stride;
    o.scales += t * s_stride;
    return o;
  };
  const size_t tiled = n_tokens / kTileTokens * kTileTokens;
  if (tiled > 0) {
    Tiles::configure(tile_shapes<Plan<1>::kStepK>());
    for (size_t t = 0; t < tiled; t += kMaxTokenTiles * kTileTokens)
      with_tile_count<kMaxTokenTiles>((tiled - t) / kTileTokens, [&]<int NT>() {
        tile_pass<Plan, Tiles, NT>(from(t), y + t * y_stride, pair_rows, y_stride);
      });
    Tiles::release();
  }
  if (tiled < n_tokens) leftover_tokens(*avx512::find(kType), from(tiled), n_tokens - tiled, y + tiled * y_stride, pair_rows, y_stride);
}

template <class K>
struct Blocks {
  template <int NT>
  using Plan = BlockPlan<K, NT>;
};
template <class Block>
struct Q45_K {
  template <int NT>
  using Plan = Q45_KPlan<Block, NT>;
};

template <class Tiles>
const DotKernel* find_with(tensor::DType w) {
  auto tiled = [](tensor::DType t, decltype(DotKernel::rows16) rows16) {
    DotKernel k = *avx512::find(t);
    k.rows16 = rows16;
    return std::pair{t, k};
  };
  static const std::pair<DType, DotKernel> sets[] = {
      tiled(DType::Q4_0, rows16_tiles<Blocks<Q4_0Vnni>::Plan, Tiles, DType::Q4_0>),
      tiled(DType::Q4_1, rows16_tiles<Blocks<Q4_1Vnni>::Plan, Tiles, DType::Q4_1>),
      tiled(DType::Q8_0, rows16_tiles<Blocks<Q8_0Vnni>::Plan, Tiles, DType::Q8_0>),
      tiled(DType::Q5_0, rows16_tiles<Blocks<Q5_0Vnni>::Plan, Tiles, DType::Q5_0>),
      tiled(DType::Q5_1, rows16_tiles<Blocks<Q5_1Vnni>::Plan, Tiles, DType::Q5_1>),
      tiled(DType::Q4_K, rows16_tiles<Q45_K<tensor::BlockQ4_K>::Plan, Tiles, DType::Q4_K>),
      tiled(DType::Q5_K, rows16_tiles<Q45_K<tensor::BlockQ5_K>::Plan, Tiles, DType::Q5_K>),
      tiled(DType::Q6_K, rows16_tiles<Q6_KPlan, Tiles, DType::Q6_K>),
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
