// AVX2 dot products of the K-quants (Q4_K, Q5_K, Q6_K) against Q8_K
// activations. Per super-block the integer sum is computed with vpmaddubsw
// (unsigned quants x signed activation bytes) and vpmaddwd by the sub-block
// scales; the float terms then repeat dot_scalar.cpp's operations in its
// order, so every result equals the scalar reference bit for bit.
//
// Bounds: vpmaddubsw lanes are at most 2*63*127 = 16002 (6-bit quants), and
// a super-block's int32 sum at most 256*63*63*127 (Q5_K) or 256*128*63*127
// (Q6_K), well inside int32.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/dot.h"
#include "kernels/dot_shapes.h"
#include "tensor/blocks.h"
#include "tensor/codecs.h"
#include "tensor/half.h"

namespace kvlab::kernels::avx2 {
namespace {
using namespace tensor;

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// One super-block's weights, decoded once and met by 1..4 activation rows:
// q[k] holds weights 32k..32k+31 as unsigned bytes, multiplied by scale[k]
// (two int16 scales per vector for Q6_K's 16-weight sub-blocks).
struct Unpacked {
  __m256i q[8];
  __m256i scale[8];
};

// Q4_K / Q5_K: q in 0..15 (0..31), sub-block k = weights 32k.., scales 6-bit.
template <class Block>
void unpack_q45(const Block& b, Unpacked& u, int mins[8]) {
  const __m256i nib = _mm256_set1_epi8(0x0f);
  __m256i high = _mm256_setzero_si256();
  if constexpr (std::is_same_v<Block, BlockQ5_K>) high = load32(b.qh);
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load32(b.qs + 32 * c);
    u.q[2 * c] = _mm256_and_si256(v, nib);
    u.q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
    if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      // Bit 2c (2c+1) of qh[l] is bit 4 of weight 64c + l (64c + 32 + l).
      const __m256i one = _mm256_set1_epi8(1);
      const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(high, 2 * c), one);
      const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(high, 2 * c + 1), one);
      u.q[2 * c] = _mm256_or_si256(u.q[2 * c], _mm256_slli_epi16(h0, 4));
      u.q[2 * c + 1] = _mm256_or_si256(u.q[2 * c + 1], _mm256_slli_epi16(h1, 4));
    }
  }
  for (int k = 0; k < 8; ++k) {
    const ScaleMin sm = kquant_scale_min(b.scales, k);
    u.scale[k] = _mm256_set1_epi16(sm.scale);
    mins[k] = sm.min;
  }
}

// Q6_K: q in 0..63 (the -32 is applied through the activation block sums).
// Vector k of half h covers weights 128h + 32k.., sub-blocks 8h + 2k, +1.
void unpack_q6(const BlockQ6_K& b, Unpacked& u) {
  const __m256i nib = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m256i lo0 = load32(b.ql + 64 * h), lo1 = load32(b.ql + 64 * h + 32), hi = load32(b.qh + 32 * h);
    __m256i* q = u.q + 4 * h;
    q[0] = _mm256_or_si256(_mm256_and_si256(lo0, nib), _mm256_and_si256(_mm256_slli_epi16(hi, 4), two));
    q[1] = _mm256_or_si256(_mm256_and_si256(lo1, nib), _mm256_and_si256(_mm256_slli_epi16(hi, 2), two));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), nib), _mm256_and_si256(hi, two));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo1, 4), nib),
                           _mm256_and_si256(_mm256_srli_epi16(hi, 2), two));
  }
  for (int k = 0; k < 8; ++k)
    u.scale[k] = _mm256_set_m128i(_mm_set1_epi16(b.scales[2 * k + 1]), _mm_set1_epi16(b.scales[2 * k]));
}

// sum_k scale[k] . (q[k] x y[32k..32k+31]) as one int.
inline int scaled_sum(const Unpacked& u, const int8_t* y) {
  __m256i acc = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k) {
    const __m256i p = _mm256_maddubs_epi16(u.q[k], load32(y + 32 * k));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, u.scale[k]));
  }
  return hsum_i32(acc);
}

template <class Block>
struct Q45K {
  using W = Block;
  struct Header {
    float d, dmin;
    int mins[8];
  };
  static Header unpack(const W& b, Unpacked& u) {
    Header h{f16_to_f32(b.d), f16_to_f32(b.dmin), {}};
    unpack_q45(b, u, h.mins);
    return h;
  }
  static float term(const Header& h, const Unpacked& u, const BlockQ8_K& y) {
    int summ = 0;
    for (int j = 0; j < 8; ++j) summ += h.mins[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
    return (h.d * y.d) * float(scaled_sum(u, y.qs)) - (h.dmin * y.d) * float(summ);
  }
};

struct Q6K {
  using W = BlockQ6_K;
  struct Header {
    float d;
    __m256i scales16;  // the 16 sub-block scales widened to int16
  };
  static Header unpack(const W& b, Unpacked& u) {
    unpack_q6(b, u);
    return {f16_to_f32(b.d), _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)))};
  }
  // sum sc_i * (q - 32) * y = scaled_sum - 32 * sum_i sc_i * bsum_i.
  static float term(const Header& h, const Unpacked& u, const BlockQ8_K& y) {
    const __m256i bs = load32(y.bsums);
    const int offset = hsum_i32(_mm256_madd_epi16(bs, h.scales16));
    return (h.d * y.d) * float(scaled_sum(u, y.qs) - 32 * offset);
  }
};

// NR weight rows x NT activation rows; each pair accumulates its super-block
// terms in order, as the scalar reference does.
template <class K>
struct SuperBlocks {
  template <int NR, int NT>
  static void run(const void* w, size_t w_stride, const void* a, size_t a_stride, size_t n, float* out) {
    float acc[NR * NT] = {};
    Unpacked u;
    for (size_t b = 0; b < n / kQK_K; ++b)
      for (int r = 0; r < NR; ++r) {
        const auto& x = reinterpret_cast<const typename K::W*>(static_cast<const uint8_t*>(w) + size_t(r) * w_stride)[b];
        if constexpr (NR > 1) _mm_prefetch(reinterpret_cast<const char*>(&x) + NR * w_stride, _MM_HINT_T0);
        const auto header = K::unpack(x, u);
        for (int t = 0; t < NT; ++t) {
          const auto& y = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + size_t(t) * a_stride)[b];
          acc[r * NT + t] += K::term(header, u, y);
        }
      }
    for (int i = 0; i < NR * NT; ++i) out[i] = acc[i];
  }
};

template <class K>
constexpr DotKernel kernel_of() {
  using T = SuperBlocks<K>;
  return {ActFormat::Q8_K, quantize_row_q8_k, dot_1x1<T>, dot_1x4<T>, dot_4x1<T>};
}
const DotKernel kQ4_K = kernel_of<Q45K<BlockQ4_K>>();
const DotKernel kQ5_K = kernel_of<Q45K<BlockQ5_K>>();
const DotKernel kQ6_K = kernel_of<Q6K>();

}  // namespace

const DotKernel* find_kquant(DType w) {
  switch (w) {
    case DType::Q4_K: return &kQ4_K;
    case DType::Q5_K: return &kQ5_K;
    case DType::Q6_K: return &kQ6_K;
    default: return nullptr;
  }
}

}  // namespace kvlab::kernels::avx2
