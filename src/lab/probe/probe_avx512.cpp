// AVX-512 VNNI loops of `kvlab probe` (Ice Lake, Sapphire Rapids, Zen 4 and
// later: the kernels' Avx512 level, kernels/cpu.h), and the int8 loop of
// the tile unit for the Amx level. Compiled with -mavx512f/bw/vl/dq/vnni;
// only called after kernels::active_isa() >= Avx512 (Amx for the tiles).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86_avx512/tile_unit.h"
#include "lab/probe/probe.h"

namespace kvlab::perf::probe_kernels {
namespace {

// The sum of a vector's lanes of type Lane, through memory (GCC 12's
// _mm512_reduce_* trip -Wuninitialized).
template <class Lane, class Sum = double, class Vec>
Sum lane_sum(Vec v) {
  Lane l[sizeof(Vec) / sizeof(Lane)];
  std::memcpy(l, &v, sizeof v);
  Sum s = 0;
  for (Lane x : l) s += Sum(x);
  return s;
}

// Streaming read: 8 x 64-byte loads per 512-byte step, 4 accumulators.
uint64_t read_sum(const void* p, size_t bytes) {
  const __m512i* v = static_cast<const __m512i*>(p);
  const size_t n = bytes / 64;
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    s0 = _mm512_add_epi64(s0, _mm512_load_si512(v + i + 0));
    s1 = _mm512_add_epi64(s1, _mm512_load_si512(v + i + 1));
    s2 = _mm512_add_epi64(s2, _mm512_load_si512(v + i + 2));
    s3 = _mm512_add_epi64(s3, _mm512_load_si512(v + i + 3));
    s0 = _mm512_add_epi64(s0, _mm512_load_si512(v + i + 4));
    s1 = _mm512_add_epi64(s1, _mm512_load_si512(v + i + 5));
    s2 = _mm512_add_epi64(s2, _mm512_load_si512(v + i + 6));
    s3 = _mm512_add_epi64(s3, _mm512_load_si512(v + i + 7));
  }
  return lane_sum<uint64_t, uint64_t>(_mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
}

// 16 independent vfmadd231ps zmm chains (latency 4 x 2 FMA ports needs 8;
// 16 also covers longer latencies), out of 32 zmm registers.
constexpr int kAcc = 16;

double fp32(uint64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  __m512 c[kAcc];
  for (int j = 0; j < kAcc; ++j) c[j] = _mm512_set1_ps(0.1f * float(j + 1));
  for (uint64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kAcc; ++j) c[j] = _mm512_fmadd_ps(c[j], a, b);
  }
  __m512 s = _mm512_setzero_ps();
  for (int j = 0; j < kAcc; ++j) s = _mm512_add_ps(s, c[j]);
  return lane_sum<float>(s);
}

// Eight vpdpbusd, one into each accumulator. Written in asm: with
// intrinsics GCC 12 copies every accumulator once per iteration (vpdpbusd
// overwrites its accumulator operand), doubling the uops. Inlined, the
// references stay registers. AT&T order: vpdpbusd s8, u8, acc.
[[gnu::always_inline]] inline void vpdpbusd8(__m512i& a0, __m512i& a1, __m512i& a2, __m512i& a3, __m512i& a4,
                                             __m512i& a5, __m512i& a6, __m512i& a7, __m512i x, __m512i y) {
  __asm__ volatile(
      "vpdpbusd %[y], %[x], %[a0]\n\t"
      "vpdpbusd %[y], %[x], %[a1]\n\t"
      "vpdpbusd %[y], %[x], %[a2]\n\t"
      "vpdpbusd %[y], %[x], %[a3]\n\t"
      "vpdpbusd %[y], %[x], %[a4]\n\t"
      "vpdpbusd %[y], %[x], %[a5]\n\t"
      "vpdpbusd %[y], %[x], %[a6]\n\t"
      "vpdpbusd %[y], %[x], %[a7]"
      : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), [a5] "+v"(a5), [a6] "+v"(a6),
        [a7] "+v"(a7)
      : [x] "v"(x), [y] "v"(y));
}

// VNNI: vpdpbusd multiplies 64 u8 x s8 pairs and adds groups of 4 into 16
// int32 lanes, in one instruction. 16 independent accumulators cover its
// latency (5) on 2 ports.
double int8_vnni(uint64_t iters) {
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
  __m512i c0 = _mm512_set1_epi32(0), c1 = _mm512_set1_epi32(1), c2 = _mm512_set1_epi32(2), c3 = _mm512_set1_epi32(3),
          c4 = _mm512_set1_epi32(4), c5 = _mm512_set1_epi32(5), c6 = _mm512_set1_epi32(6), c7 = _mm512_set1_epi32(7),
          c8 = _mm512_set1_epi32(8), c9 = _mm512_set1_epi32(9), c10 = _mm512_set1_epi32(10),
          c11 = _mm512_set1_epi32(11), c12 = _mm512_set1_epi32(12), c13 = _mm512_set1_epi32(13),
          c14 = _mm512_set1_epi32(14), c15 = _mm512_set1_epi32(15);
  for (uint64_t i = 0; i < iters; ++i) {
    vpdpbusd8(c0, c1, c2, c3, c4, c5, c6, c7, x, y);
    vpdpbusd8(c8, c9, c10, c11, c12, c13, c14, c15, x, y);
  }
  const __m512i s = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                       _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7))),
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)),
                       _mm512_add_epi32(_mm512_add_epi32(c12, c13), _mm512_add_epi32(c14, c15))));
  return lane_sum<int32_t>(s);
}

// AMX: TDPBSUD multiplies a 16 x 64 byte tile by a 64 x 16 one into 16 x 16
// int32 sums (16,384 multiply-adds). Four accumulators (registers 0-3) from
// two A and two B tiles, so no instruction waits on the one before.
using kernels::avx512::AmxTiles;
constexpr double kTileMacs = 16 * 16 * 64;

double int8_amx(uint64_t iters) {
  kernels::avx512::TileShapes shapes{};
  for (auto& s : shapes) s = {16, 64};
  alignas(64) static const int8_t zeros[16 * 64] = {};  // the values do not change the timing
  AmxTiles::configure(shapes);
  AmxTiles::load<4>(zeros, 64);
  AmxTiles::load<5>(zeros, 64);
  AmxTiles::load<6>(zeros, 64);
  AmxTiles::load<7>(zeros, 64);
  for (uint64_t i = 0; i < iters; ++i) {
    AmxTiles::dpbsud<0, 4, 6>();
    AmxTiles::dpbsud<1, 4, 7>();
    AmxTiles::dpbsud<2, 5, 6>();
    AmxTiles::dpbsud<3, 5, 7>();
  }
  alignas(64) int32_t c[16 * 16];
  AmxTiles::store<0>(c, 64);
  AmxTiles::release();
  return double(c[0]);
}

}  // namespace

const Kernels& amx() {
  static const Kernels k = [] {
    Kernels t = avx512();
    t.isa = "amx";
    t.int8 = int8_amx;
    t.int8_ops_per_iter = 4 * kTileMacs * 2.0;  // 4 TDPBSUD x 16,384 multiply-adds x 2 op
    t.int8_method = "tdpbsud (AMX-INT8), 4 independent tile accumulators";
    return t;
  }();
  return k;
}

const Kernels& avx512() {
  static const Kernels k{
      "avx512",
      read_sum,
      fp32,
      kAcc * 16 * 2.0,  // 16 FMAs x 16 lanes x (multiply + add)
      "vfmadd231ps zmm, 16 independent accumulators",
      int8_vnni,
      kAcc * 64 * 2.0,  // 16 vpdpbusd x 64 int8 multiply-adds x 2 op
      "vpdpbusd zmm (AVX-512 VNNI), 16 independent accumulators",
  };
  return k;
}

}  // namespace kvlab::perf::probe_kernels
