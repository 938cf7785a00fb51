// Matmuls of a few tokens whose weights come from DRAM, next to a plain
// read of the same bytes (kvlab probe's read loop) split over the same
// threads, and the same matmul on one copy kept in the caches, in the same
// iterations:
//
//   matmul_dram/<dtype>:rows8/<rows>x<cols>/tok:<T>/threads:<N>/<isa>
//
// Each iteration runs every one of enough copies of the matrix to fill 4 x
// L3 (so no copy is still cached when its turn comes again) through
// kernels::matmul, then reads them all, each copy as one pool job with one
// contiguous slice per thread. The time reported is the matmuls'; the
// counters:
//   bytes/s       the matmuls' weight bytes over their time
//   read_bytes/s  the plain reads' bytes over theirs
//   vs_read       bytes/s / read_bytes/s: 1.0 means the kernel streams its
//                 weights as fast as a loop that does nothing else, which is
//                 as fast as this memory system delivers them to a job of
//                 that size (the small matrices pay the pool's hand-over and
//                 the stream's start per copy, the reads as much)
//   cached_vs_dram  the in-cache matmul's time over the DRAM one's: near 1
//                 when the arithmetic, not the read, sets a pass's time
//   hidden        how much of the shorter of the read and the in-cache
//                 matmul the DRAM matmul hides under the longer:
//                 (read + cached - dram) / min(read, cached); 1 when it
//                 takes the longer of the two, 0 when it takes their sum
//                 (issue 52: a pass of 8 tokens only costs about one weight
//                 read if its arithmetic hides the read)
// The machine's speed drifts within seconds; the ratio of two passes made
// back to back drifts much less than either rate.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/huge_buffer.h"
#include "kernels/matmul.h"
#include "kernels/rows8.h"
#include "lab/probe/probe.h"
#include "micro_common.h"

namespace kvlab::bench {
namespace {

using tensor::DType;
using Clock = std::chrono::steady_clock;

void BM_matmul_dram(benchmark::State& state, DType dtype, size_t rows, size_t cols, size_t tokens, int threads) {
  use_best_isa();
  const QuantizedMatrix m = random_matrix(dtype, rows, cols, 7);
  // Copies 4 KiB apart, each 512-byte sliceable for the probe's read loop.
  const size_t bytes = m.data.size(), stride = (bytes + 4095) / 4096 * 4096;
  const size_t l3 = std::max<size_t>(perf::detect_caches().l3_bytes, size_t(8) << 20);  // 8 MiB when unknown
  const size_t copies = std::max<size_t>(2, 4 * l3 / stride + 1);
  HugeBuffer buf(copies * stride);
  std::vector<kernels::WeightMatrix> ws(copies);
  for (size_t i = 0; i < copies; ++i) {
    uint8_t* p = buf.data() + i * stride;
    std::memcpy(p, m.data.data(), bytes);
    ws[i] = {dtype, p, rows, cols, m.row_bytes};
    if (!kernels::relayout_rows8(ws[i], p)) {
      state.SkipWithError("no rows-of-8 kernel for this dtype at this ISA");
      return;
    }
  }
  const auto x = random_floats(cols * tokens, 11);
  std::vector<float> y(rows * tokens);
  kernels::ThreadPool pool(threads);
  kernels::MatmulScratch scratch;
  const auto read_sum = perf::probe_kernels::for_active_isa().read_sum;
  uint64_t sink = 0;
  const size_t readable = bytes / 512 * 512;
  double matmul_s = 0, read_s = 0, cached_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (const auto& w : ws) kernels::matmul(w, x.data(), tokens, y.data(), pool, scratch);
    const auto t1 = Clock::now();
    for (size_t i = 0; i < copies; ++i)
      pool.run(size_t(threads), [&](size_t t, int) {
        const size_t a = readable * t / size_t(threads) / 512 * 512, b = readable * (t + 1) / size_t(threads) / 512 * 512;
        const uint64_t s = read_sum(buf.data() + i * stride + a, b - a);
        if (t == 0) sink += s;
      });
    const auto t2 = Clock::now();
    kernels::matmul(ws[0], x.data(), tokens, y.data(), pool, scratch);  // warms the one copy
    const auto t3 = Clock::now();
    for (size_t i = 0; i < copies; ++i) kernels::matmul(ws[0], x.data(), tokens, y.data(), pool, scratch);
    const auto t4 = Clock::now();
    const double ms = std::chrono::duration<double>(t1 - t0).count();
    matmul_s += ms;
    read_s += std::chrono::duration<double>(t2 - t1).count();
    cached_s += std::chrono::duration<double>(t4 - t3).count();
    state.SetIterationTime(ms);
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(sink);
  }
  const double passes = double(copies) * double(state.iterations());
  const double matmul_rate = double(bytes) * passes / matmul_s, read_rate = double(readable) * passes / read_s;
  state.counters["bytes/s"] = matmul_rate;
  state.counters["read_bytes/s"] = read_rate;
  state.counters["vs_read"] = matmul_rate / read_rate;
  // The read of the matmul's bytes at the plain read's rate, against the same
  // copies' matmul in cache.
  const double read_equiv_s = matmul_s * matmul_rate / read_rate;
  state.counters["hidden"] = (read_equiv_s + cached_s - matmul_s) / std::min(read_equiv_s, cached_s);
  state.counters["cached_vs_dram"] = cached_s / matmul_s;
  state.counters["copies"] = double(copies);
}

int register_all() {
  struct Shape {
    DType dtype;
    size_t rows, cols;
  };
  // The default model's decode jobs: K/V, Q/O, gate+up and down sized, and
  // its q8_0 LM head.
  const Shape shapes[] = {{DType::Q4_1, 576, 576}, {DType::Q4_1, 3072, 576}, {DType::Q4_1, 576, 1536},
                          {DType::Q8_0, 49152, 576}};
  // One token (decode) and the small batches of issue 52.
  for (const Shape& s : shapes)
    for (size_t tokens : {1, 4, 8, 16})
      for (int threads : {1, 2}) {
        const std::string name = "matmul_dram/" + dtype_name(s.dtype) + ":rows8/" + std::to_string(s.rows) + "x" +
                                 std::to_string(s.cols) + "/tok:" + std::to_string(tokens) + "/threads:" +
                                 std::to_string(threads) + "/" + kernels::isa_name(kernels::cpu().best());
        benchmark::RegisterBenchmark(name.c_str(), BM_matmul_dram, s.dtype, s.rows, s.cols, tokens, threads)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench
