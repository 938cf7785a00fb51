// Every kernel against its scalar reference, on odd shapes, for every ISA this
// CPU can run; and the ops against hand-computed values.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <thread>

#include "common/isa.h"
#include "common/random.h"
#include "common/tiny_model.h"
#include "kernels/cpu.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/rows8.h"
#include "kernels/thread_pool.h"
#include "tensor/blocks.h"
#include "tensor/codecs.h"
#include "tensor/half.h"

namespace kvlab::kernels {
namespace {

using tensor::DType;

using test::available_isas;
using test::IsaGuard;

using test::randn;

class DotKernels : public ::testing::TestWithParam<DType> {};

// Every kernel set this CPU can run for weight type t, named: one per ISA,
// and on a CPU with AVX512_BF16 also the AVX-512 FMA set for bf16 that
// serves AVX-512 CPUs without it.
std::vector<std::pair<DotKernel, std::string>> kernel_sets(DType t) {
  std::vector<std::pair<DotKernel, std::string>> sets;
  for (Isa isa : available_isas()) sets.emplace_back(dot_kernel(t, isa), isa_name(isa));
  if (t == DType::BF16 && cpu().best() >= Isa::Avx512 && cpu().avx512bf16)
    sets.emplace_back(avx512::float_kernel(DType::BF16, dot_kernel(DType::BF16, Isa::Avx2)), "avx512 fma");
  return sets;
}

// SIMD integer sums are exact; only the float accumulation order differs, so
// the bound is a few ulps of the sum of |terms| (per-block scales included).
TEST_P(DotKernels, EveryIsaMatchesScalarOnOddSizes) {
  const DType t = GetParam();
  const auto& info = tensor::dtype_info(t);
  const std::vector<size_t> sizes =
      info.block_size == 1                ? std::vector<size_t>{1, 3, 7, 8, 15, 17, 33, 64, 100, 577}
      : info.block_size == tensor::kQK_K ? std::vector<size_t>{256, 512, 1536, 2816}
                           : std::vector<size_t>{32, 64, 96, 160, 576, 1536 + 32};
  const DotKernel& ref = dot_kernel(t, Isa::Scalar);
  for (const auto& [k, set_name] : kernel_sets(t)) {
    ASSERT_EQ(k.act, ref.act);
    for (size_t n : sizes) {
      const auto w = randn(n, uint32_t(n), 0.5f), x = randn(n, uint32_t(n) + 7, 2.f);
      std::vector<uint8_t> wq(n / info.block_size * info.block_bytes), xa(act_row_bytes(k.act, n));
      info.quantize(w.data(), wq.data(), n);
      ref.quantize_act(x.data(), xa.data(), n);
      double mag = 0;
      for (size_t i = 0; i < n; ++i) mag += std::fabs(double(w[i]) * x[i]);
      const float a = ref.dot(wq.data(), xa.data(), n), b = k.dot(wq.data(), xa.data(), n);
      EXPECT_NEAR(a, b, mag * 2e-6 + 1e-6) << info.name << " " << set_name << " n=" << n;
    }
  }
}

// The quantized product is close to the exact float product: the activation
// rounding to 8 bits bounds the error (NMSE over a matrix-vector product).
TEST_P(DotKernels, MatmulCloseToDequantizedReference) {
  const DType t = GetParam();
  const auto& info = tensor::dtype_info(t);
  const size_t rows = 37, cols = info.block_size == tensor::kQK_K ? 512 : 160, T = 5;
  const auto wf = randn(rows * cols, 3, 0.1f), x = randn(T * cols, 4);
  std::vector<uint8_t> wq(rows * cols / info.block_size * info.block_bytes);
  info.quantize(wf.data(), wq.data(), rows * cols);
  WeightMatrix w{t, wq.data(), rows, cols, wq.size() / rows};
  std::vector<float> y(T * rows), yr(T * rows);
  ThreadPool pool(2);
  MatmulScratch s;
  matmul(w, x.data(), T, y.data(), pool, s);
  matmul_reference(w, x.data(), T, yr.data());
  double err = 0, ref = 0;
  for (size_t i = 0; i < y.size(); ++i) err += (y[i] - yr[i]) * (y[i] - yr[i]), ref += yr[i] * yr[i];
  // Q8_K rounds activations with one scale per 256 (3 sigma / 127 per step:
  // NMSE ~5e-5) where the 32-blocks' Q8_0 / Q8_1 have one per 32.
  const double bound = t == DType::F32    ? 1e-12
                       : t == DType::BF16 ? 1e-4
                       : t == DType::F16  ? 1e-6
                       : info.block_size == tensor::kQK_K ? 2e-4
                                          : 1e-4;
  EXPECT_LT(err / ref, bound) << info.name;
}

std::vector<DType> all_weight_types() {
  std::vector<DType> v;
  for (const auto& info : tensor::all_dtypes()) v.push_back(info.type);
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, DotKernels, ::testing::ValuesIn(all_weight_types()),
                         [](const auto& p) { return std::string(tensor::dtype_info(p.param).name); });

// A token's output must not depend on the batch it is computed in, nor on the
// thread count: this is what makes cached and no-cache decoding agree.
TEST(Matmul, BatchedEqualsOneTokenAtATimeBitwise) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_1, DType::Q8_0, DType::Q5_0, DType::Q5_1, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K}) {
    const auto& info = tensor::dtype_info(t);
    // Float rows of 107: the f32 kernels' 16-wide loop, an 8-wide step and a
    // scalar tail; the 16-bit ones' 8-wide loop and a tail.
    const size_t rows = 33, cols = info.block_size == tensor::kQK_K ? 512 : info.block_size == 1 ? 107 : 96, T = 130;
    const auto wf = randn(rows * cols, 5, 0.1f), x = randn(T * cols, 6);
    std::vector<uint8_t> wq(rows * cols / info.block_size * info.block_bytes);
    info.quantize(wf.data(), wq.data(), rows * cols);
    WeightMatrix w{t, wq.data(), rows, cols, wq.size() / rows};
    std::vector<float> batched(T * rows), single(rows);
    ThreadPool p2(2), p1(1);
    MatmulScratch s;
    matmul(w, x.data(), T, batched.data(), p2, s);
    for (size_t i = 0; i < T; ++i) {
      matmul(w, x.data() + i * cols, 1, single.data(), p1, s);
      for (size_t r = 0; r < rows; ++r) ASSERT_EQ(single[r], batched[i * rows + r]) << info.name << " t=" << i;
    }
  }
}

// The float prefill tiles (DotKernel::float_tile) of every set kernel_sets
// lists, against the same set's dot, bit for bit, on every row and token
// count a tile takes and the remainders around them, with widths that leave
// each tail of dot's loops.
TEST(Matmul, FloatTilesEqualDotBitwise) {
  std::vector<std::pair<DotKernel, std::string>> sets;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (auto& set : kernel_sets(t)) sets.push_back(std::move(set));
  int checked = 0;
  for (const auto& [k, set_name] : sets) {
    if (!k.float_tile) continue;
    // A float format's activations are rows of its own type.
    const DType t = k.act == ActFormat::F32 ? DType::F32 : k.act == ActFormat::F16 ? DType::F16 : DType::BF16;
    const auto& info = tensor::dtype_info(t);
    // The tile's activations: the converted rows, or those widened to f32.
    const bool widen = k.tile_act != k.act;
    for (size_t cols : {1u, 7u, 8u, 15u, 16u, 17u, 24u, 33u, 107u})
      for (size_t rows : {1u, 2u, 3u, 5u, 9u})
        for (size_t tokens : {1u, 5u, 6u, 13u, 14u, 15u, 29u}) {
          const auto wf = randn(rows * cols, uint32_t(cols + rows), 0.3f), x = randn(tokens * cols, uint32_t(tokens));
          std::vector<uint8_t> w(rows * cols * info.block_bytes), act(tokens * act_row_bytes(k.act, cols));
          info.quantize(wf.data(), w.data(), rows * cols);
          std::vector<float> widened(tokens * cols);
          for (size_t i = 0; i < tokens; ++i) {
            uint8_t* row = act.data() + i * act_row_bytes(k.act, cols);
            k.quantize_act(x.data() + i * cols, row, cols);
            info.dequantize(row, widened.data() + i * cols, cols);
          }
          // y with a wider stride than rows, NaN between: a store outside
          // the tile shows.
          const size_t ld = rows + 3;
          std::vector<float> y(tokens * ld, std::numeric_limits<float>::quiet_NaN());
          const void* tile_act = widen ? static_cast<const void*>(widened.data()) : act.data();
          const size_t tile_stride = widen ? cols * sizeof(float) : act_row_bytes(k.act, cols);
          k.float_tile(w.data(), cols * info.block_bytes, tile_act, tile_stride, rows, tokens, cols, y.data(), ld);
          for (size_t i = 0; i < tokens; ++i)
            for (size_t r = 0; r < ld; ++r) {
              const float got = y[i * ld + r];
              if (r >= rows) {
                ASSERT_TRUE(std::isnan(got)) << info.name << " wrote past its rows";
                continue;
              }
              const float want = k.dot(w.data() + r * cols * info.block_bytes,
                                       act.data() + i * act_row_bytes(k.act, cols), cols);
              ASSERT_EQ(got, want) << info.name << " " << set_name << " cols=" << cols << " rows=" << rows
                                   << " tokens=" << tokens << " at r=" << r << " t=" << i;
            }
          ++checked;
        }
  }
  if (checked == 0) GTEST_SKIP() << "no ISA with float tiles on this CPU";
}

// Decode-shaped matmuls split the rows into one range per thread, and a
// thread that finishes early takes rows from the back of another's range
// (matmul.cpp). With more threads than cores some threads start late, so
// ranges do get taken over: every row must still be computed exactly once,
// to the same bits as on one thread.
TEST(Matmul, EveryRowOnceWhateverTheThreads) {
  for (DType t : {DType::Q4_1, DType::F32}) {
    const auto& info = tensor::dtype_info(t);
    const size_t rows = 1003 - (t == DType::Q4_1 ? 3 : 0), cols = 64;
    const auto wf = randn(rows * cols, 8, 0.1f);
    std::vector<uint8_t> wq(rows * cols / info.block_size * info.block_bytes);
    info.quantize(wf.data(), wq.data(), rows * cols);
    WeightMatrix w{t, wq.data(), rows, cols, wq.size() / rows};
    if (t == DType::Q4_1) relayout_rows8(w, wq.data());
    for (size_t T : {1u, 7u}) {
      const auto x = randn(T * cols, uint32_t(T));
      std::vector<float> want(T * rows);
      ThreadPool one(1);
      MatmulScratch s;
      matmul(w, x.data(), T, want.data(), one, s);
      for (int threads : {3, 5, 8}) {
        ThreadPool pool(threads);
        for (int rep = 0; rep < 20; ++rep) {
          std::vector<float> y(T * rows, std::numeric_limits<float>::quiet_NaN());
          matmul(w, x.data(), T, y.data(), pool, s);
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_EQ(y[i], want[i]) << info.name << " T=" << T << " threads=" << threads << " at " << i;
        }
      }
    }
  }
}

// Matrices sharing an input (Q, K, V) run as one job: each output equals its
// own matmul bit for bit, also when their dtypes pair with different
// activation formats (q4_1: q8_1, q8_0: q8_0, f32) or layouts.
TEST(Matmul, SharedInputEqualsSeparateCalls) {
  const size_t cols = 96;
  struct M {
    DType t;
    size_t rows;
    bool rows8;
  };
  const std::vector<M> ms = {{DType::Q4_1, 40, true}, {DType::Q8_0, 13, false}, {DType::F32, 21, false}, {DType::Q4_1, 16, false}};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<WeightMatrix> ws;
  for (size_t i = 0; i < ms.size(); ++i) {
    const auto& info = tensor::dtype_info(ms[i].t);
    const auto wf = randn(ms[i].rows * cols, uint32_t(20 + i), 0.1f);
    bytes.emplace_back(ms[i].rows * cols / info.block_size * info.block_bytes);
    info.quantize(wf.data(), bytes.back().data(), ms[i].rows * cols);
  }
  for (size_t i = 0; i < ms.size(); ++i) {
    ws.push_back({ms[i].t, bytes[i].data(), ms[i].rows, cols, bytes[i].size() / ms[i].rows});
    if (ms[i].rows8) {
      ASSERT_TRUE(relayout_rows8(ws.back(), bytes[i].data()));
    }
  }
  for (size_t T : {1u, 6u, 70u}) {
    const auto x = randn(T * cols, uint32_t(T));
    std::vector<std::vector<float>> fused(ms.size()), alone(ms.size());
    std::vector<MatmulOut> outs;
    ThreadPool pool(2);
    MatmulScratch s;
    for (size_t i = 0; i < ms.size(); ++i) {
      fused[i].assign(T * ms[i].rows, std::numeric_limits<float>::quiet_NaN());
      alone[i].resize(T * ms[i].rows);
      outs.push_back({&ws[i], fused[i].data()});
      matmul(ws[i], x.data(), T, alone[i].data(), pool, s);
    }
    matmul(outs, x.data(), T, pool, s);
    for (size_t i = 0; i < ms.size(); ++i)
      for (size_t j = 0; j < fused[i].size(); ++j) ASSERT_EQ(fused[i][j], alone[i][j]) << "matrix " << i << " T=" << T;
  }
}

// The rows-of-8 layout (kernels/rows8.h): every (row, token) result equals
// the scalar reference on the GGUF row bit for bit, for any token count and
// thread count, one group per kernel call or two; and a re-laid-out row
// still dequantizes to the same values.
TEST(Rows8, EqualsScalarReferenceBitwise) {
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (DType t : {DType::Q4_1, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F16}) {
      const auto& info = tensor::dtype_info(t);
      const DotKernel& ref = dot_kernel(t, Isa::Scalar);
      const size_t per_block = std::max<size_t>(1, info.block_size / tensor::kQK);  // K-quants: 256-wide blocks
      // 1, 3, 5 and 6 groups of 8 rows: from 8 tokens on, groups go in
      // pairs (DotKernel::rows16), some with one left over.
      for (auto [rows, blocks] : {std::pair<size_t, size_t>{8, 1}, {24, 3}, {40, 19}, {48, 2}}) {
        const size_t cols = blocks * per_block * tensor::kQK;
        const auto wf = randn(rows * cols, uint32_t(rows + cols), 0.1f);
        std::vector<uint8_t> plain(rows * cols / info.block_size * info.block_bytes);
        info.quantize(wf.data(), plain.data(), rows * cols);
        std::vector<uint8_t> bytes = plain;
        WeightMatrix w{t, bytes.data(), rows, cols, plain.size() / rows};
        const bool expect = dot_kernel(t).rows8 != nullptr;
        ASSERT_EQ(relayout_rows8(w, bytes.data()), expect) << info.name << " " << isa_name(isa);
        if (!expect) continue;
        ASSERT_EQ(w.layout, Layout::Rows8);
        ASSERT_NE(bytes, plain);  // a real permutation of the bytes...
        std::vector<float> a(cols), b(cols);
        for (size_t r = 0; r < rows; ++r) {  // ...that loses nothing
          info.dequantize(plain.data() + r * w.row_bytes, a.data(), cols);
          dequantize_row(w, r, b.data());
          ASSERT_EQ(a, b) << info.name << " row " << r;
        }
        const size_t act_bytes = act_row_bytes(ref.act, cols);
        // Every small batch (decode steps, speculative drafts: one group or
        // a pair per call, in one kernel pass or more), then prefill tiles.
        std::vector<size_t> token_counts(16);
        std::iota(token_counts.begin(), token_counts.end(), size_t{1});
        token_counts.insert(token_counts.end(), {33, 70});
        for (size_t T : token_counts) {
          const auto x = randn(T * cols, uint32_t(T));
          std::vector<float> y(T * rows);
          ThreadPool pool(T % 2 ? 1 : 2);
          MatmulScratch s;
          matmul(w, x.data(), T, y.data(), pool, s);
          std::vector<uint8_t> xa(act_bytes);
          for (size_t i = 0; i < T; ++i) {
            ref.quantize_act(x.data() + i * cols, xa.data(), cols);
            for (size_t r = 0; r < rows; ++r)
              ASSERT_EQ(y[i * rows + r], ref.dot(plain.data() + r * w.row_bytes, xa.data(), cols))
                  << info.name << " " << isa_name(isa) << " " << rows << "x" << cols << " T=" << T << " t=" << i
                  << " r=" << r;
          }
        }
      }
    }
  }
}

// Blocks at the ends of their integer range, so every product is as large as
// the format allows: the rows-of-8 kernels add several vpmaddubsw results in
// int16 before widening, and this is where a sum that did not fit would wrap
// (the random weights above stay far from it). `high`: every quant at its
// top (q8_0 +127, q4 15, q5 31; q4_k and q5_k scales and mins 63); otherwise at its
// bottom (q8_0 -128, and 0, which is -8 / -16 in q4_0 / q5_0). q6_k: quants
// 63 (31 after the -32) with scales 127, or 0 (-32) with scales -128, the
// largest sums its int32 lanes hold.
void fill_extreme(DType t, uint8_t* p, size_t bytes, bool high) {
  const auto& info = tensor::dtype_info(t);
  std::memset(p, t == DType::Q8_0 ? (high ? 0x7f : 0x80) : (high ? 0xff : 0x00), bytes);
  const uint16_t d = tensor::f32_to_f16(0.01f), m = tensor::f32_to_f16(-0.02f);
  if (t == DType::Q6_K) {
    for (size_t off = 0; off < bytes; off += info.block_bytes) {
      auto* b = reinterpret_cast<tensor::BlockQ6_K*>(p + off);
      std::memset(b->scales, high ? 127 : -128, sizeof b->scales);
      b->d = d;
    }
    return;
  }
  for (size_t off = 0; off < bytes; off += info.block_bytes) {
    uint16_t* h = reinterpret_cast<uint16_t*>(p + off);  // every block starts with d (then m or dmin)
    h[0] = d;
    if (t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q4_K || t == DType::Q5_K) h[1] = m;
  }
}

TEST(Rows8, ExtremeQuantsEqualScalarReferenceBitwise) {
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (DType t : {DType::Q4_1, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
      const auto& info = tensor::dtype_info(t);
      const DotKernel& ref = dot_kernel(t, Isa::Scalar);
      if (dot_kernel(t).rows8 == nullptr) continue;
      const size_t rows = 16, cols = 512;
      for (bool high : {true, false}) {
        std::vector<uint8_t> plain(rows * cols / info.block_size * info.block_bytes);
        fill_extreme(t, plain.data(), plain.size(), high);
        std::vector<uint8_t> bytes = plain;
        WeightMatrix w{t, bytes.data(), rows, cols, plain.size() / rows};
        ASSERT_TRUE(relayout_rows8(w, bytes.data())) << info.name;
        for (float sign : {1.f, -1.f}) {
          for (size_t T : {1u, 4u, 7u, 8u, 17u}) {  // from 8: the two groups in one call (rows16)
            const std::vector<float> x(T * cols, sign);  // every activation quantizes to +-127
            std::vector<float> y(T * rows);
            ThreadPool pool(2);
            MatmulScratch s;
            matmul(w, x.data(), T, y.data(), pool, s);
            std::vector<uint8_t> xa(act_row_bytes(ref.act, cols));
            ref.quantize_act(x.data(), xa.data(), cols);
            const float want = ref.dot(plain.data(), xa.data(), cols);
            ASSERT_TRUE(std::isfinite(want));
            for (size_t i = 0; i < T * rows; ++i)
              ASSERT_EQ(y[i], want) << info.name << " " << isa_name(isa) << (high ? " high" : " low") << " x=" << sign
                                    << " T=" << T << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(Rows8, LeavesOtherMatricesAlone) {
  std::vector<uint8_t> bytes(12 * 32 / 32 * sizeof(tensor::BlockQ4_1));
  WeightMatrix odd{DType::Q4_1, bytes.data(), 12, 32, bytes.size() / 12};  // 12 rows: not whole groups
  EXPECT_FALSE(relayout_rows8(odd, bytes.data()));
  EXPECT_EQ(odd.layout, Layout::RowMajor);
  std::vector<uint8_t> f(8 * 32 * 4);
  WeightMatrix f32{DType::F32, f.data(), 8, 32, 32 * 4};  // no rows-of-8 kernel for floats
  EXPECT_FALSE(relayout_rows8(f32, f.data()));
}

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    for (size_t tasks : {0u, 1u, 2u, 7u, 1000u}) {
      std::vector<std::atomic<int>> hits(tasks);
      for (int rep = 0; rep < 20; ++rep) pool.run(tasks, [&](size_t i, int th) {
        ASSERT_LT(th, n);
        hits[i].fetch_add(1);
      });
      for (size_t i = 0; i < tasks; ++i) ASSERT_EQ(hits[i].load(), 20);
    }
  }
}

// Many back-to-back tiny jobs, the decode pattern: exercises the hand-over
// between spinning and sleeping (a lost wake-up shows up as a hang, which the
// CTest timeout turns into a failure).
TEST(ThreadPool, ManyTinyJobsNeverHang) {
  for (int n : {2, 3}) {
    ThreadPool pool(n);
    std::atomic<long> sum{0};
    for (int rep = 0; rep < 20000; ++rep) pool.run(2 + rep % 3, [&](size_t i, int) { sum += long(i); });
    long want = 0;
    for (int rep = 0; rep < 20000; ++rep) want += (1 + rep % 3) * (2 + rep % 3) / 2;
    EXPECT_EQ(sum.load(), want);
    // And with pauses long enough for the workers to fall asleep.
    for (int rep = 0; rep < 5; ++rep) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      pool.run(4, [&](size_t, int) { sum += 1; });
    }
  }
}

// Jobs of changing sizes back to back: a worker still leaving one job must
// never claim a task index of it once the next, larger job is being set up.
TEST(ThreadPool, ChangingJobSizesRunEachTaskOnce) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 20000; ++rep) {
    const size_t n = 2 + size_t(rep * 7 % 37);
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int> out_of_range{0};
    pool.run(n, [&](size_t i, int) {
      if (i >= n) ++out_of_range;
      else hits[i].fetch_add(1);
    });
    ASSERT_EQ(out_of_range.load(), 0) << "rep " << rep;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "rep " << rep << " task " << i;
  }
}

TEST(Ops, RmsNormByHand) {
  const float x[4] = {1, -1, 1, -1}, w[4] = {1, 2, 3, 4};  // mean square 1
  float out[4];
  rmsnorm(x, w, 4, 0.f, out);
  EXPECT_FLOAT_EQ(out[0], 1);
  EXPECT_FLOAT_EQ(out[1], -2);
  EXPECT_FLOAT_EQ(out[3], -4);
  const float y[2] = {3, 4};  // mean square 12.5
  const float one[2] = {1, 1};
  rmsnorm(y, one, 2, 0.f, out);
  EXPECT_FLOAT_EQ(out[0], 3 / std::sqrt(12.5f));
}

// Every ISA's rmsnorm against the scalar one, on lengths with tails and on
// large and tiny magnitudes. Only the order of the double sum of squares
// differs (ops_avx2.cpp), which moves the mean by ~n * 2^-53 of itself: the
// f32 scale then differs by at most 1 ulp, and x * scale * weight by 2.
TEST(Ops, RmsNormMatchesScalarOnEveryIsa) {
  for (size_t n : {size_t(1), size_t(7), size_t(16), size_t(576), size_t(1003)})
    for (float mag : {1e-3f, 1.f, 3e3f}) {
      const std::vector<float> x = randn(n, 17 + n, mag), w = randn(n, 5 + n, 1.f);
      std::vector<float> want(n);
      {
        IsaGuard scalar(Isa::Scalar);
        rmsnorm(x.data(), w.data(), n, 1e-5f, want.data());
      }
      for (Isa isa : available_isas()) {
        IsaGuard guard(isa);
        std::vector<float> got(x);  // in place, as the engine's q/k norms run
        rmsnorm(got.data(), w.data(), n, 1e-5f, got.data());
        for (size_t i = 0; i < n; ++i)
          ASSERT_NEAR(got[i], want[i], 2.5e-7f * std::abs(want[i])) << isa_name(isa) << " n " << n << " i " << i;
      }
    }
}

TEST(Ops, RopePositionZeroIsIdentityAndPairsFollowTheOrder) {
  float cs[4];
  rope_table(0, 4, 10000.f, cs);
  float x[4] = {1, 2, 3, 4};
  rope(x, 4, cs, false);
  EXPECT_EQ(x[0], 1);
  EXPECT_EQ(x[3], 4);
  // pos 1, dim 4, theta 10000: pair 0 angle 1 rad, pair 1 angle 1e-2 rad.
  rope_table(1, 4, 10000.f, cs);
  EXPECT_FLOAT_EQ(cs[0], std::cos(1.f));
  EXPECT_NEAR(cs[3], std::sin(0.01f), 1e-7);
  float a[4] = {1, 0, 0, 0};
  rope(a, 4, cs, false);  // normal: (x0, x1) rotate together
  EXPECT_FLOAT_EQ(a[0], std::cos(1.f));
  EXPECT_FLOAT_EQ(a[1], std::sin(1.f));
  EXPECT_EQ(a[2], 0);
  float b[4] = {1, 0, 0, 0};
  rope(b, 4, cs, true);  // neox: (x0, x2) rotate together
  EXPECT_FLOAT_EQ(b[0], std::cos(1.f));
  EXPECT_FLOAT_EQ(b[2], std::sin(1.f));
  EXPECT_EQ(b[1], 0);
}

TEST(Ops, SoftmaxAndSilu) {
  // Large equal offsets must not overflow: the max is subtracted first.
  // (1000 + ln 2 is not exact in float: its ulp at 1000 is 6e-5.)
  float x[3] = {1000, 1000, 1000 + std::log(2.f)};
  softmax(x, 3);
  EXPECT_NEAR(x[0], 0.25f, 2e-5);
  EXPECT_NEAR(x[2], 0.5f, 2e-5);
  float g[2] = {0, 2}, u[2] = {5, 1};
  silu_mul(g, u, 2);
  EXPECT_EQ(g[0], 0);
  EXPECT_FLOAT_EQ(g[1], 2 / (1 + std::exp(-2.f)));
}

// The f16 activation converter (which also fills the f16 KV cache) gives the
// scalar codec's bytes on every ISA: normal values, subnormals, halfway
// cases, overflow to inf, on a length with a tail.
TEST(Kernels, F16ConversionEqualsScalarCodecOnEveryIsa) {
  std::vector<float> x = randn(1000, 11, 3.0f);
  for (float v : {0.f, -0.f, 1e-8f, -3e-6f, 6.1e-5f, 65504.f, 65519.f, 65520.f, 1e6f, -1e6f, 1.00048828125f,
                  std::numeric_limits<float>::infinity()})
    x.push_back(v);
  std::vector<uint16_t> want(x.size());
  tensor::quantize_row_f16(x.data(), want.data(), x.size());
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    std::vector<uint16_t> got(x.size());
    dot_kernel(DType::F16).quantize_act(x.data(), got.data(), x.size());
    EXPECT_EQ(got, want) << isa_name(isa);
  }
}

// Pointers to the `n` blocks of `width` floats that `x` holds, for tests
// that write special values into some of them.
std::vector<float*> block_views(std::vector<float>& x, size_t width) {
  std::vector<float*> blk(x.size() / width);
  for (size_t b = 0; b < blk.size(); ++b) blk[b] = x.data() + b * width;
  return blk;
}

// The Q8_0 and Q8_1 activation quantizers (Q8_0 / Q4_0 and Q4_1 weights)
// give the scalar codec's bytes on every ISA: random blocks, an all-zero and
// an all -0 block, products that land halfway between two integers (round
// to nearest even), a block whose d is below f16's range and one whose d
// and sum overflow it.
TEST(Kernels, Q8_0AndQ8_1QuantizationEqualsScalarCodecOnEveryIsa) {
  const size_t kBlocks = 8;
  std::vector<float> x = randn(kBlocks * tensor::kQK, 13, 2.0f);
  const std::vector<float*> blk = block_views(x, tensor::kQK);
  std::fill_n(blk[1], tensor::kQK, 0.f);
  std::fill_n(blk[2], tensor::kQK, -0.f);
  for (size_t i = 0; i < tensor::kQK; ++i) blk[3][i] = float(i % 8) - 3.5f;  // amax 3.5
  blk[3][31] = 127.f;                                                         // scale 1: halves stay halves
  for (size_t i = 0; i < tensor::kQK; ++i) blk[4][i] *= 1e-30f;
  for (size_t i = 0; i < tensor::kQK; ++i) blk[5][i] = 3e7f;
  const size_t n = x.size();
  std::vector<tensor::BlockQ8_0> want0(kBlocks), got0(kBlocks);
  std::vector<tensor::BlockQ8_1> want1(kBlocks), got1(kBlocks);
  tensor::quantize_row_q8_0(x.data(), want0.data(), n);
  tensor::quantize_row_q8_1(x.data(), want1.data(), n);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    dot_kernel(DType::Q8_0).quantize_act(x.data(), got0.data(), n);
    dot_kernel(DType::Q4_1).quantize_act(x.data(), got1.data(), n);
    for (size_t b = 0; b < kBlocks; ++b) {
      EXPECT_EQ(std::memcmp(&got0[b], &want0[b], sizeof(tensor::BlockQ8_0)), 0) << "q8_0 block " << b << " " << isa_name(isa);
      EXPECT_EQ(std::memcmp(&got1[b], &want1[b], sizeof(tensor::BlockQ8_1)), 0) << "q8_1 block " << b << " " << isa_name(isa);
    }
  }
}

// The Q8_K activation quantizer of the K-quant dot products gives the scalar
// codec's bytes on every ISA: random blocks, an all-zero one, the largest
// magnitude twice with both signs (the first one sets the sign), a NaN and an
// inf (d turns inf or NaN, the quants -128 and 0 as in the reference), and
// a block whose largest magnitude is subnormal (-127 / max overflows to inf).
TEST(Kernels, Q8_KQuantizationEqualsScalarCodecOnEveryIsa) {
  const size_t kBlocks = 9;
  std::vector<float> x = randn(kBlocks * tensor::kQK_K, 12, 2.0f);
  const std::vector<float*> blk = block_views(x, tensor::kQK_K);
  std::fill_n(blk[1], tensor::kQK_K, 0.f);
  blk[2][40] = -9.f, blk[2][200] = 9.f;
  blk[3][17] = 9.f, blk[3][18] = -9.f;
  blk[4][100] = std::numeric_limits<float>::quiet_NaN();
  blk[5][7] = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < tensor::kQK_K; ++i) blk[6][i] = (i % 3 ? 1e-45f : -0.f) * (i % 2 ? -1.f : 1.f);
  blk[7][255] = -1e30f;
  std::fill_n(blk[8], tensor::kQK_K, -0.f);
  std::vector<tensor::BlockQ8_K> want(kBlocks);
  tensor::quantize_row_q8_k(x.data(), want.data(), x.size());
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    std::vector<tensor::BlockQ8_K> got(kBlocks);
    dot_kernel(DType::Q4_K).quantize_act(x.data(), got.data(), x.size());
    for (size_t b = 0; b < kBlocks; ++b)
      EXPECT_EQ(std::memcmp(&got[b], &want[b], sizeof(tensor::BlockQ8_K)), 0) << "block " << b << " " << isa_name(isa);
  }
}

// Every ISA's silu_mul against the formula with std::exp in double, over
// the range activations reach and beyond (the SIMD e^x clamps at ±87/88),
// on a length with a tail.
// n gate values evenly from -range to range, and up values 0.5 .. 6.5.
void gated_inputs(size_t n, float range, std::vector<float>& gate, std::vector<float>& up) {
  gate.resize(n);
  up.resize(n);
  for (size_t i = 0; i < n; ++i) {
    gate[i] = -range + 2.f * range * float(i) / float(n - 1);
    up[i] = 0.5f + float(i % 7);
  }
}

TEST(Ops, SiluMulMatchesFormulaOnEveryIsa) {
  const size_t n = 1003;
  std::vector<float> gate, up;
  gated_inputs(n, 120.f, gate, up);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    std::vector<float> g = gate;
    silu_mul(g.data(), up.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double want = double(gate[i]) / (1.0 + std::exp(-double(gate[i]))) * double(up[i]);
      ASSERT_NEAR(g[i], want, 1e-30 + 1e-6 * std::abs(want)) << isa_name(isa) << " x " << gate[i];
    }
  }
}

// Every ISA's gelu_mul against the tanh formula in double, over the range
// activations reach and beyond (the SIMD form's e^x clamps), with a tail.
// The scalar form's 1 + tanh(z) cancels to 0 below x of about -7, so it is
// held to 1e-6 absolute; the SIMD form, g / (1 + e^-2z), to 1e-6 relative
// (times |z| where that is larger).
TEST(Ops, GeluMulMatchesTanhFormulaOnEveryIsa) {
  const size_t n = 1001;
  std::vector<float> gate, up;
  gated_inputs(n, 120.f, gate, up);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    std::vector<float> g = gate;
    gelu_mul(g.data(), up.data(), n);
    for (size_t i = 0; i < n; ++i) {
      // 0.5·x·(1 + tanh(z)) as x / (1 + e^-2z): the same in exact arithmetic,
      // without the cancellation that leaves 0 in double too for x below -9.
      const double x = gate[i], z = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
      const double want = x / (1.0 + std::exp(-2.0 * z)) * up[i];
      // z in float carries a relative rounding, an absolute one of ~|z|·1e-7 in the exponent.
      const double tolerance = (isa == Isa::Scalar ? 1e-6 : 1e-30) + 1e-6 * std::max(1.0, std::abs(z)) * std::abs(want);
      ASSERT_NEAR(g[i], want, tolerance) << isa_name(isa) << " x " << x;
    }
    float one = 1.f, u = 1.f;
    gelu_mul(&one, &u, 1);
    EXPECT_NEAR(one, 0.8411920, 1e-6) << isa_name(isa);  // gelu_tanh(1), by hand: 0.5 * (1 + tanh(0.7978846 * 1.044715))
  }
}

// Linear RoPE scaling: position p with scale s turns every pair as position s·p would.
TEST(Ops, RopeFreqScaleIsPositionInterpolation) {
  float scaled[8], plain[8];
  rope_table(40, 8, 10000.f, scaled, {.freq_scale = 0.125f});
  rope_table(5, 8, 10000.f, plain);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(scaled[i], plain[i], 1e-6) << i;
}

// Llama 3's divisors: pair i turns as pos / divisor[i] would, then the
// linear scale applies on top (llama.cpp's order: theta / ff, then freq_scale).
TEST(Ops, RopeFreqDivisorsSlowEachPairByItsOwn) {
  const float divisors[4] = {1.f, 2.f, 8.f, 4.f};
  float slowed[8], at[8];
  rope_table(48, 8, 10000.f, slowed, {.freq_scale = 0.5f, .freq_divisors = divisors});
  for (int i = 0; i < 4; ++i) {
    rope_table(int(24 / divisors[i]), 8, 10000.f, at);  // 0.5 * 48 / divisor
    EXPECT_NEAR(slowed[2 * i], at[2 * i], 1e-6) << i;
    EXPECT_NEAR(slowed[2 * i + 1], at[2 * i + 1], 1e-6) << i;
  }
  const float ones[4] = {1.f, 1.f, 1.f, 1.f};
  float plain[8];
  rope_table(48, 8, 10000.f, slowed, {.freq_divisors = ones});
  rope_table(48, 8, 10000.f, plain);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(slowed[i], plain[i]) << i;
}

// attn_factor scales every cos and sin after the angle (llama.cpp's mscale),
// so a rotated vector's length grows by it and its direction is unchanged.
TEST(Ops, RopeAttnFactorScalesTheRotation) {
  float scaled[8], plain[8];
  rope_table(37, 8, 10000.f, scaled, {.attn_factor = 1.25f});
  rope_table(37, 8, 10000.f, plain);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(scaled[i], 1.25f * plain[i]) << i;
}

// YaRN with the ramp over pairs 0..2: pair 0 turns at the unscaled angle,
// pair 1 halfway between, pairs 2 and 3 at the scaled one (position 80 x
// 0.25 = 20), and every cos and sin grows by 1 + 0.1 ln 4.
TEST(Ops, RopeYarnBlendsScaledAndUnscaledPairs) {
  float yarn[8], at80[8], at20[8];
  rope_table(80, 8, 10000.f, yarn, {.freq_scale = 0.25f, .ext_factor = 1.f, .ramp_low = 0.f, .ramp_high = 2.f});
  rope_table(80, 8, 10000.f, at80);
  rope_table(20, 8, 10000.f, at20);
  const float m = 1.f + 0.1f * std::log(4.f);
  auto angle = [](const float* cs, int i) { return std::atan2(cs[2 * i + 1], cs[2 * i]); };
  EXPECT_NEAR(angle(yarn, 0), angle(at80, 0), 1e-5);
  EXPECT_NEAR(yarn[2], std::cos(0.5f * (8.f + 2.f)) * m, 1e-5);  // pair 1 turns 8 rad unscaled, 2 scaled
  EXPECT_NEAR(yarn[3], std::sin(0.5f * (8.f + 2.f)) * m, 1e-5);
  for (int i : {2, 3}) EXPECT_NEAR(angle(yarn, i), angle(at20, i), 1e-6) << i;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(std::hypot(yarn[2 * i], yarn[2 * i + 1]), m, 1e-6) << i;
}

}  // namespace
}  // namespace kvlab::kernels
