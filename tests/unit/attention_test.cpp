// Attention against a double-precision reference, for every KV type, ISA,
// group size and odd position counts; and the properties the engine relies
// on: paged == contiguous and split chunks == one thread, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/isa.h"
#include "common/random.h"
#include "kernels/attention.h"
#include "kernels/kv_tiles.h"
#include "kernels/thread_pool.h"

namespace kvlab::kernels {
namespace {

using tensor::DType;
using test::available_isas;
using test::IsaGuard;

using test::randn;

// n_pos positions of n_kv KV heads, laid out as the cache does (each head's
// rows one after another, an f16 or q8_0 K in tiles: kernels/kv_tiles.h, with room
// for whole tiles), K and V from a seeded normal distribution.
struct KvRows {
  DType type;
  size_t head_dim, head_bytes, region;  // region: one head's rows
  std::vector<uint8_t> k, v;
  std::vector<float> kf, vf;  // the stored values, dequantized, [position][head][head_dim]

  KvRows(DType t, size_t hd, int n_pos, int n_kv, uint32_t seed)
      : type(t),
        head_dim(hd),
        head_bytes(*tensor::row_bytes(t, hd)),
        region(head_bytes * size_t((n_pos + kKvTileRows - 1) / kKvTileRows * kKvTileRows)) {
    const auto& info = tensor::dtype_info(t);
    const size_t n = size_t(n_pos) * size_t(n_kv);
    k.resize(region * size_t(n_kv));
    v.resize(k.size());
    kf.resize(n * hd);
    vf.resize(n * hd);
    const auto ks = randn(n * hd, seed, 1.f), vs = randn(n * hd, seed + 1, 1.f);
    std::vector<uint8_t> row(head_bytes);
    for (size_t i = 0; i < n; ++i) {
      const int pos = int(i / size_t(n_kv));
      const size_t head = i % size_t(n_kv);
      store_k(t, k.data() + head * region, pos, &ks[i * hd], hd);
      store_v(t, v.data() + head * region, pos, &vs[i * hd], hd);
      info.quantize(&ks[i * hd], row.data(), hd);
      info.dequantize(row.data(), &kf[i * hd], hd);
      info.quantize(&vs[i * hd], row.data(), hd);
      info.dequantize(row.data(), &vf[i * hd], hd);
    }
  }
  KvView view(int head) const {
    return KvView{k.data() + size_t(head) * region, v.data() + size_t(head) * region, head_bytes, type};
  }
};

// softmax(q·k * scale) v in double, with q as the K type's dot product sees
// it (f16 K: q rounded to f16; q8_0 K: q quantized to q8_0).
std::vector<double> reference(const std::vector<float>& q, int group, const KvRows& kv, int head, int n_kv, int n_pos,
                              float scale, int first = 0, double softcap = 0) {
  const size_t hd = kv.head_dim;
  const DType q_type = kv.type == DType::F32 ? DType::F32 : kv.type;
  const auto& info = tensor::dtype_info(q_type);
  std::vector<double> out(size_t(group) * hd, 0.0);
  for (int g = 0; g < group; ++g) {
    std::vector<uint8_t> qq(*tensor::row_bytes(q_type, hd));
    std::vector<float> qg(hd);
    info.quantize(&q[size_t(g) * hd], qq.data(), hd);
    info.dequantize(qq.data(), qg.data(), hd);
    std::vector<double> s(static_cast<size_t>(n_pos));
    double mx = -1e300, sum = 0;
    for (int j = first; j < n_pos; ++j) {
      const float* kr = &kv.kf[(size_t(j) * size_t(n_kv) + size_t(head)) * hd];
      double dot = 0;
      for (size_t d = 0; d < hd; ++d) dot += double(qg[d]) * kr[d];
      s[size_t(j)] = softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale;
      mx = std::max(mx, s[size_t(j)]);
    }
    for (int j = first; j < n_pos; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - mx));
    for (int j = first; j < n_pos; ++j) {
      const float* vr = &kv.vf[(size_t(j) * size_t(n_kv) + size_t(head)) * hd];
      for (size_t d = 0; d < hd; ++d) out[size_t(g) * hd + d] += s[size_t(j)] / sum * vr[d];
    }
  }
  return out;
}

// How far a kernel may be from the double-precision reference, absolute and
// relative: f32 sums in another order, 2e-5 for up to 300 positions. The
// AVX-512 P·V of a q8_0 V rounds each weight to int16 against the largest
// of its tile (attention_avx512.cpp): up to 2^-16 of it per weight, ~1e-4
// of the output over the 16 rows of a peaked tile (observed: 4e-5).
double attn_tolerance(DType t, Isa isa) { return t == DType::Q8_0 && isa >= Isa::Avx512 ? 1e-4 : 2e-5; }

// Gemma 2's soft cap, c·tanh(s/c) on every scaled score, on scores large
// enough for the cap to bend them (q 3 sigma: |s| up to ~10 against c = 2),
// through both the one-item path and a split batch of chunks.
TEST(Attention, SoftCapBendsEveryScore) {
  const int n_kv = 2, head = 1, group = 2, n_pos = kAttnChunk + 37;
  const size_t hd = 64;
  const float scale = 0.125f, cap = 2.f;
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    const KvRows kv(t, hd, n_pos, n_kv, 5);
    const auto q = randn(size_t(group) * hd, 13, 3.f);
    const auto want = reference(q, group, kv, head, n_kv, n_pos, scale, 0, cap);
    const auto uncapped = reference(q, group, kv, head, n_kv, n_pos, scale);
    double moved = 0;
    for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::abs(want[i] - uncapped[i]));
    EXPECT_GT(moved, 0.05) << tensor::dtype_info(t).name;  // the cap changes the answer
    for (Isa isa : available_isas()) {
      IsaGuard guard(isa);
      std::vector<float> scratch(attn_scratch_floats(group, hd)), one(size_t(group) * hd), split(one.size());
      attend(q.data(), group, kv.view(head), 0, n_pos, hd, {scale, cap}, scratch.data(), one.data());
      ThreadPool pool(2);
      AttnScratch as(group, hd, 2, n_pos);
      const AttnItem item{q.data(), kv.view(head), n_pos, split.data()};
      attend_batch({&item, 1}, group, hd, {scale, cap}, pool, as);
      const double tol = attn_tolerance(t, isa);
      for (size_t i = 0; i < one.size(); ++i) {
        ASSERT_NEAR(one[i], want[i], tol + tol * std::abs(want[i])) << tensor::dtype_info(t).name << " " << isa_name(isa);
        ASSERT_EQ(split[i], one[i]) << tensor::dtype_info(t).name << " " << isa_name(isa);
      }
    }
  }
}

TEST(Attention, MatchesDoublePrecisionReference) {
  const int n_kv = 2, head = 1;
  // 40: not a multiple of 16 (the generic pieces); 80: 64 + 16, the
  // AVX-512 f16 P·V's pass of 64 dimensions, then one of 16.
  for (DType t : {DType::F32, DType::F16, DType::Q8_0})
    for (size_t hd : t == DType::Q8_0 ? std::vector<size_t>{64, 96} : std::vector<size_t>{64, 40, 80})
      for (float q_scale : {0.5f, 3.f}) {  // soft and peaked distributions
        const int max_pos = 2 * kAttnChunk + 44;  // three chunks, the last one short
        const KvRows kv(t, hd, max_pos, n_kv, uint32_t(hd));
        for (int group : {1, 3, 4, 5}) {
          const auto q = randn(size_t(group) * hd, 11, q_scale);
          std::vector<float> scratch(attn_scratch_floats(group, hd)), out(size_t(group) * hd);
          for (int n_pos : {1, 2, 17, kAttnChunk, kAttnChunk + 1, max_pos}) {
            const float scale = 1.0f / std::sqrt(float(hd));
            const auto want = reference(q, group, kv, head, n_kv, n_pos, scale);
            for (Isa isa : available_isas()) {
              IsaGuard guard(isa);
              attend(q.data(), group, kv.view(head), 0, n_pos, hd, scale, scratch.data(), out.data());
              const double tol = attn_tolerance(t, isa);
              for (size_t i = 0; i < out.size(); ++i)
                ASSERT_NEAR(out[i], want[i], tol + tol * std::abs(want[i]))
                    << tensor::dtype_info(t).name << " hd " << hd << " G " << group << " n_pos " << n_pos << " "
                    << isa_name(isa) << " i " << i;
            }
          }
        }
      }
}

// The paged view reads the same rows as a contiguous one: 300 positions in
// 16-row blocks (a q8_0 K: one tile each) stored in a shuffled order give
// exactly the contiguous result.
TEST(Attention, PagedBlocksEqualContiguousRowsBitwise) {
  const size_t hd = 64, bt = 16;
  const int n_kv = 3, group = 3, n = 300, n_blocks = (n + int(bt) - 1) / int(bt);
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    const KvRows kv(t, hd, n_blocks * int(bt), n_kv, 5);
    const KvView contiguous = kv.view(2);
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    for (int b = 0; b < n_blocks; ++b) table[size_t(b)] = (b * 7 + 3) % n_blocks;  // 7 is coprime to 19
    std::vector<uint8_t> pk(kv.region), pv(kv.region);
    const size_t block = bt * kv.head_bytes;
    for (size_t b = 0; b < size_t(n_blocks); ++b) {
      std::copy_n(contiguous.k + b * block, block, pk.data() + size_t(table[b]) * block);
      std::copy_n(contiguous.v + b * block, block, pv.data() + size_t(table[b]) * block);
    }
    const auto q = randn(group * hd, 3, 1.f);
    std::vector<float> scratch(attn_scratch_floats(group, hd)), a(group * hd), b(group * hd);
    for (Isa isa : available_isas()) {
      IsaGuard guard(isa);
      for (int n_pos : {1, 16, 17, 40, 129, n}) {
        const KvView paged{pk.data(), pv.data(), kv.head_bytes, t, table.data(), int(bt), block};
        attend(q.data(), group, contiguous, 0, n_pos, hd, 0.3f, scratch.data(), a.data());
        attend(q.data(), group, paged, 0, n_pos, hd, 0.3f, scratch.data(), b.data());
        EXPECT_EQ(a, b) << tensor::dtype_info(t).name << " n_pos " << n_pos << " " << isa_name(isa);
      }
    }
  }
}

// A sliding window (positions first .. n_pos-1) is the attention of a view
// that starts at row `first` (a tiled K: where `first` starts a tile, else
// the double-precision reference), for every KV type and ISA, with windows
// that start inside, at and across chunk boundaries; and a split decode
// step of windowed items gives the same bits as one thread.
TEST(Attention, SlidingWindowIsAttentionOverTheLastPositions) {
  const size_t hd = 64;
  const int n_kv = 2, group = 3, C = kAttnChunk, n_ctx = 2 * C + 144;
  ThreadPool pool(2);
  AttnScratch as(group, hd, pool.size(), n_ctx);
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    const KvRows kv(t, hd, n_ctx, n_kv, 21);
    const auto q = randn(size_t(group) * hd, 8, 2.f);
    std::vector<float> scratch(attn_scratch_floats(group, hd)), win(size_t(group) * hd), cut(win.size());
    for (Isa isa : available_isas()) {
      IsaGuard guard(isa);
      for (auto [first, n_pos] :
           {std::pair{1, 2}, {5, 100}, {C - 1, C + 172}, {C, C + 172}, {C + 1, n_ctx}, {2 * C - 6, 2 * C + 4}, {16, 100},
            {2 * C - 16, n_ctx - 1}}) {
        attend(q.data(), group, kv.view(1), first, n_pos, hd, 0.125f, scratch.data(), win.data());
        if (!k_tiled(t) || first % kKvTileRows == 0) {
          KvView shifted = kv.view(1);
          shifted.k += size_t(first) * kv.head_bytes;
          shifted.v += size_t(first) * kv.head_bytes;
          attend(q.data(), group, shifted, 0, n_pos - first, hd, 0.125f, scratch.data(), cut.data());
          for (size_t i = 0; i < win.size(); ++i)
            ASSERT_NEAR(win[i], cut[i], 1e-5 + 1e-5 * std::abs(cut[i]))
                << tensor::dtype_info(t).name << " " << isa_name(isa) << " window " << first << ".." << n_pos;
        } else {
          const auto want = reference(q, group, kv, 1, n_kv, n_pos, 0.125f, first);
          const double tol = attn_tolerance(t, isa);
          for (size_t i = 0; i < win.size(); ++i)
            ASSERT_NEAR(win[i], want[i], tol + tol * std::abs(want[i]))
                << tensor::dtype_info(t).name << " " << isa_name(isa) << " window " << first << ".." << n_pos;
        }
        std::vector<float> split(win.size());
        AttnItem item{q.data(), kv.view(1), n_pos, split.data(), first};
        attend_batch({&item, 1}, group, hd, 0.125f, pool, as);
        EXPECT_EQ(split, win) << "split window " << first << ".." << n_pos;
      }
    }
  }
}

// A tiled K (f16, q8_0) and V (q8_0) are read whole tiles at a time, so
// attention also reads the slots of a tile outside the positions it
// attends: slots past n_pos and, in a window, before `first`. They may hold
// anything (a pooled cache reuses blocks), here NaNs (q8_0: NaN scales and
// full quants): the result is the same bits as with clean tiles, for every
// ISA.
TEST(Attention, TiledSlotsOutsideTheRangeAreNeverUsed) {
  const size_t hd = 64;
  const int n_kv = 1, group = 3, n_ctx = 160;
  for (DType t : {DType::F16, DType::Q8_0}) {
    const KvRows clean(t, hd, n_ctx, n_kv, 17);
    const auto q = randn(size_t(group) * hd, 2, 1.f);
    std::vector<float> scratch(attn_scratch_floats(group, hd)), want(size_t(group) * hd), got(want.size());
    std::vector<uint16_t> nan_f16(hd, 0x7e00);  // an f16 NaN
    std::vector<tensor::BlockQ8_0> nan_q8(hd / tensor::kQK);
    for (auto& b : nan_q8) {
      b.d = 0x7e00;
      std::fill(std::begin(b.qs), std::end(b.qs), int8_t(127));
    }
    const void* nan_row = t == DType::F16 ? static_cast<const void*>(nan_f16.data()) : nan_q8.data();
    for (Isa isa : available_isas()) {
      IsaGuard guard(isa);
      for (auto [first, n_pos] : {std::pair{0, 21}, {5, 100}, {35, 130}, {0, n_ctx}}) {
        KvRows dirty = clean;
        const size_t tile = size_t(kKvTileRows) * dirty.head_bytes;
        for (int pos = 0; pos < n_ctx; ++pos)
          if (pos < first || pos >= n_pos) {
            tile_put(t, true, dirty.k.data() + size_t(pos / kKvTileRows) * tile, pos % kKvTileRows, nan_row, hd);
            tile_put(t, false, dirty.v.data() + size_t(pos / kKvTileRows) * tile, pos % kKvTileRows, nan_row, hd);
          }
        attend(q.data(), group, clean.view(0), first, n_pos, hd, 0.2f, scratch.data(), want.data());
        attend(q.data(), group, dirty.view(0), first, n_pos, hd, 0.2f, scratch.data(), got.data());
        EXPECT_EQ(got, want) << tensor::dtype_info(t).name << " " << isa_name(isa) << " window " << first << ".."
                             << n_pos;
      }
    }
  }
}

// A decode step spreads one item's chunks over the threads; a prefill runs
// each item's chunks in turn on one thread. Same bits either way, so a token
// never depends on the batch it was computed in. With more threads than
// cores, some start late and their ranges of chunks are taken over
// (kernels/range_split.h): still every chunk once, same bits.
class AttentionThreads : public ::testing::TestWithParam<int> {};

TEST_P(AttentionThreads, SplitChunksEqualOneThreadBitwise) {
  const size_t hd = 64;
  const int n_kv = 3, group = 3, n_ctx = 1000;
  const KvRows kv(DType::F16, hd, n_ctx, n_kv, 9);
  const auto q = randn(size_t(n_kv * group) * hd, 4, 1.f);
  ThreadPool pool(GetParam());
  AttnScratch scratch(group, hd, pool.size(), n_ctx);
  for (int n_pos : {1, 129, 777, n_ctx, 777, n_ctx}) {
    // One item (split into chunks) per KV head, alone in its batch.
    std::vector<float> split(q.size()), whole(q.size());
    for (int g = 0; g < n_kv; ++g) {
      const size_t at = size_t(g * group) * hd;
      const AttnItem item{&q[at], kv.view(g), n_pos, &split[at]};
      ASSERT_LT(1u, scratch.split_below);
      attend_batch({&item, 1}, group, hd, 0.125f, pool, scratch);
    }
    // All KV heads of one token in one batch: split, each thread taking a
    // contiguous range of the heads' chunks.
    std::vector<float> together(q.size());
    std::vector<AttnItem> heads;
    for (int g = 0; g < n_kv; ++g)
      heads.push_back({&q[size_t(g * group) * hd], kv.view(g), n_pos, &together[size_t(g * group) * hd]});
    ASSERT_LT(heads.size(), scratch.split_below);
    attend_batch(heads, group, hd, 0.125f, pool, scratch);
    EXPECT_EQ(split, together) << "n_pos " << n_pos;
    // All KV heads, each on one thread, padded to a batch too large to split
    // (each pad item writes an output of its own: threads run them at once).
    std::vector<AttnItem> items;
    ASSERT_GE(scratch.split_below, size_t(n_kv));
    const size_t n_pad = scratch.split_below - size_t(n_kv);
    std::vector<float> pad(n_pad * size_t(group) * hd);
    for (int g = 0; g < n_kv; ++g) items.push_back({&q[size_t(g * group) * hd], kv.view(g), n_pos, &whole[size_t(g * group) * hd]});
    for (size_t i = 0; i < n_pad; ++i) items.push_back({q.data(), kv.view(0), 1, &pad[i * size_t(group) * hd]});
    attend_batch(items, group, hd, 0.125f, pool, scratch);
    EXPECT_EQ(split, whole) << "n_pos " << n_pos;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, AttentionThreads, ::testing::Values(2, 5));

// One-hot keys: the query matches position 2 only, so the output is V[2].
TEST(Attention, OneHotKeysSelectTheirValue) {
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    for (Isa isa : available_isas()) {
      IsaGuard g(isa);
      const size_t hd = 32, n = 5;  // one q8_0 block per row
      const auto& info = tensor::dtype_info(t);
      const size_t row = *tensor::row_bytes(t, hd);
      std::vector<uint8_t> k(size_t(kKvTileRows) * row), v(k.size());  // one tile
      for (size_t j = 0; j < n; ++j) {
        std::vector<float> kr(hd, 0.f), vr(hd);
        kr[j] = 1.f;
        for (size_t d = 0; d < hd; ++d) vr[d] = float(10 * j + d);
        store_k(t, k.data(), int(j), kr.data(), hd);
        store_v(t, v.data(), int(j), vr.data(), hd);
      }
      std::vector<float> q(hd, 0.f), out(hd), scratch(attn_scratch_floats(1, hd));
      q[2] = 100.f;  // score 100 vs 0: softmax weight 1 - 4e-44
      const KvView kv{k.data(), v.data(), row, t};
      attend(q.data(), 1, kv, 0, int(n), hd, 1.f, scratch.data(), out.data());
      // q8_0 stores V[2] = 20..51 with step 51/127: within half a step.
      const float tol = t == DType::Q8_0 ? 0.21f : 1e-4f;
      for (size_t d = 0; d < hd; ++d) EXPECT_NEAR(out[d], float(20 + d), tol) << info.name << " " << isa_name(isa);
      // Only the first 2 positions visible (causal): equal scores -> mean of V0, V1.
      attend(q.data(), 1, kv, 0, 2, hd, 1.f, scratch.data(), out.data());
      EXPECT_NEAR(out[0], 5.f, t == DType::Q8_0 ? 0.1f : 1e-5f);
    }
  }
}

// The f16 P·V pieces of AVX2 and AVX-512 add the same fused multiply-adds
// in the same order (attention_avx512.cpp), so they give the same bits, for
// every group size (passes of 4 heads) and head sizes with and without a
// remainder after passes of 64 dimensions.
TEST(Attention, F16ValueSumsAreTheSameBitsOnAvx2AndAvx512) {
  const auto isas = available_isas();
  if (std::find(isas.begin(), isas.end(), Isa::Avx512) == isas.end()) GTEST_SKIP() << "no AVX-512 here";
  const int n = 37;
  for (size_t hd : {size_t(64), size_t(80), size_t(256)})
    for (int group : {1, 3, 5}) {
      const KvRows kv(DType::F16, hd, n, 1, 31);
      auto p = randn(size_t(group) * kAttnChunk, 4, 1.f);
      for (float& x : p) x = std::abs(x);
      const auto o0 = randn(size_t(group) * hd, 6, 1.f);
      std::vector<float> avx2 = o0, avx512 = o0;
      {
        IsaGuard guard(Isa::Avx2);
        attn_kernel(DType::F16, hd).accumulate(p.data(), kAttnChunk, group, kv.v.data(), kv.head_bytes, n, hd, avx2.data());
      }
      {
        IsaGuard guard(Isa::Avx512);
        attn_kernel(DType::F16, hd)
            .accumulate(p.data(), kAttnChunk, group, kv.v.data(), kv.head_bytes, n, hd, avx512.data());
      }
      EXPECT_EQ(avx2, avx512) << "hd " << hd << " G " << group;
      EXPECT_NE(avx2, o0);
    }
}

// Merging chunk partials: every ISA gives the scalar merge's bits (the AVX2
// rescale is the same multiplies and add, 8 at a time), from an empty acc
// and for partials whose max is above, below and equal to the acc's, on
// head sizes with and without a remainder after the 8-wide steps.
TEST(Attention, PartialMergeIsTheSameBitsOnEveryIsa) {
  const int group = 3;
  for (size_t hd : {size_t(64), size_t(68)}) {
    const size_t part = attn_partial_floats(group, hd);
    std::vector<std::vector<float>> partials;
    for (uint32_t seed = 0; seed < 4; ++seed) {
      auto p = randn(part, 20 + seed, 1.f);
      for (int g = 0; g < group; ++g) {
        p[size_t(g)] = 3.f * float(seed % 3) - float(g);  // the maxes: rising, falling, tied across partials
        p[size_t(group + g)] = std::abs(p[size_t(group + g)]) + 1.f;
      }
      partials.push_back(p);
    }
    std::vector<std::vector<float>> outs;
    for (Isa isa : available_isas()) {
      IsaGuard guard(isa);
      std::vector<float> acc(part), out(size_t(group) * hd);
      attn_partial_reset(acc.data(), group, hd);
      for (const auto& p : partials) attn_partial_merge(acc.data(), p.data(), group, hd);
      attn_partial_finish(acc.data(), group, hd, out.data());
      for (float x : out) ASSERT_TRUE(std::isfinite(x)) << isa_name(isa);
      outs.push_back(out);
    }
    for (size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[i], outs[0]) << "hd " << hd << " ISA " << i;
  }
}

// The softmax exponentials of every ISA against std::exp, on every tail length.
TEST(Attention, ExpSumMatchesStdExp) {
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    const AttnKernel& ak = attn_kernel(DType::F16, 64);
    for (size_t n = 1; n <= 41; n += 4) {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = -100.f + 100.f * float(i) / float(n);  // -100 .. 0 before m
      const float m = 0.5f;
      double want_sum = 0;
      std::vector<float> want(n);
      for (size_t i = 0; i < n; ++i) want_sum += (want[i] = std::exp(x[i] - m));
      const float sum = ak.exp_sum(x.data(), n, m);
      for (size_t i = 0; i < n; ++i) EXPECT_NEAR(x[i], want[i], 3e-7f * want[i] + 1e-37f) << isa_name(isa) << " i " << i;
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum + 1e-37) << isa_name(isa) << " n " << n;
    }
  }
}

// The AVX-512 softmax pieces repeat the AVX2 set's operations and order of
// sums (attention_avx512.cpp), so they give the same bits, on every length
// around the 8- and 16-lane steps.
TEST(Attention, SoftmaxIsTheSameBitsOnAvx2AndAvx512) {
  const std::vector<Isa> isas = available_isas();
  if (std::find(isas.begin(), isas.end(), Isa::Avx512) == isas.end()) GTEST_SKIP() << "no AVX-512 here";
  for (size_t n = 1; n <= 70; ++n) {
    const std::vector<float> x = randn(n, uint32_t(40 + n), 4.f);
    std::vector<float> avx2 = x, avx512 = x;
    float max2, max512, sum2, sum512;
    {
      IsaGuard guard(Isa::Avx2);
      const AttnKernel& ak = attn_kernel(DType::F16, 64);
      max2 = ak.max(avx2.data(), n);
      sum2 = ak.exp_sum(avx2.data(), n, max2);
    }
    {
      IsaGuard guard(Isa::Avx512);
      const AttnKernel& ak = attn_kernel(DType::F16, 64);
      max512 = ak.max(avx512.data(), n);
      sum512 = ak.exp_sum(avx512.data(), n, max512);
    }
    EXPECT_EQ(max2, *std::max_element(x.begin(), x.end())) << "n " << n;
    EXPECT_EQ(max512, max2) << "n " << n;
    EXPECT_EQ(sum512, sum2) << "n " << n;
    EXPECT_EQ(avx512, avx2) << "n " << n;
  }
}

}  // namespace
}  // namespace kvlab::kernels
