// matmul (kernels/matmul.h) on SmolLM2-135M-sized matrices, at the best ISA:
//
//   matmul/<dtype>[:rows8]/<rows>x<cols>/tok:<T>/threads:<N>/<isa>
//
// rows x cols = output x input features:
//   576x576     attention q/o projections      (k/v are 192x576)
//   1536x576    FFN gate and up
//   576x1536    FFN down
//   49152x576   LM head (q8_0, as in the default model's tied embedding)
// T = 1 is decode (GEMV: bandwidth-bound, watch bytes/s); T = 64 and 512 are
// prefill (GEMM: compute-bound, watch FLOP/s). The LM head runs only for the
// tokens that need logits, so it is measured at T = 1 and 64, not 512.
//
// ":rows8" is the layout the engine loads quantized weights in (kernels/rows8.h);
// without it, the GGUF row-major layout (`--mmap`). <isa> is every SIMD
// level this CPU runs (avx2, avx512) for the rows-of-8 kernels, so one run
// compares them; avx2 for the row-major ones, which every level shares.
//
// Each iteration includes the activation conversion (f32 -> q8_0/q8_1/...),
// as in the engine. Weights of 576x576 q4_1 (207 KiB) fit in L2, so their
// "GEMV bytes/s" is a cache figure; the LM head (31 MiB) streams from DRAM.
#include <benchmark/benchmark.h>

#include <memory>

#include "common/aligned_vector.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/rows8.h"
#include "micro_common.h"

namespace kvlab::bench {
namespace {

using tensor::DType;

void BM_matmul(benchmark::State& state, kernels::Isa isa, DType dtype, bool rows8, size_t rows, size_t cols,
               size_t n_tokens, int threads) {
  use_isa(isa);
  auto m = random_matrix(dtype, rows, cols, 7);
  kernels::WeightMatrix w;
  w.dtype = dtype;
  w.data = m.data.data();
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = m.row_bytes;
  if (rows8 && !kernels::relayout_rows8(w, m.data.data())) {
    state.SkipWithError("no rows-of-8 kernel for this dtype at this ISA");
    return;
  }
  // On cache-line boundaries, as the engine's activations (model/model.h).
  const auto r = random_floats(n_tokens * cols, 11);
  const AlignedVector<float> x(r.begin(), r.end());
  AlignedVector<float> y(n_tokens * rows);
  kernels::ThreadPool pool(threads);
  kernels::MatmulScratch scratch;
  kernels::matmul(w, x.data(), n_tokens, y.data(), pool, scratch);  // size the scratch, warm the caches
  for (auto _ : state) {
    kernels::matmul(w, x.data(), n_tokens, y.data(), pool, scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(double(w.bytes()));  // weight bytes, read once per call
  state.counters["FLOP/s"] = rate(2.0 * double(rows) * double(cols) * double(n_tokens));
}

struct Shape {
  size_t rows, cols;
  std::vector<DType> dtypes;
  std::vector<size_t> tokens;
};

int register_all() {
  const std::vector<Shape> shapes = {
      {576, 576, {DType::Q4_1, DType::Q8_0, DType::F16}, {1, 64, 512}},
      {1536, 576, {DType::Q4_1, DType::Q8_0, DType::Q5_0, DType::F16, DType::BF16, DType::F32}, {1, 64, 512}},
      // Small batches: a speculative verify pass, a server step's decodes.
      {1536, 576, {DType::Q4_1, DType::Q8_0}, {2, 4, 8, 16}},
      {576, 1536, {DType::Q4_1, DType::Q8_0, DType::F16}, {1, 64, 512}},
      {49152, 576, {DType::Q8_0}, {1, 64}},
      // llama.cpp's Q4_K_M / Q5_K_M mixes: K-quant ffn_down, Q5 elsewhere
      {576, 1536, {DType::Q4_K, DType::Q5_K, DType::Q6_K}, {1, 64}},
      {1536, 576, {DType::Q5_0, DType::Q5_1}, {1, 64}},
      {576, 1536, {DType::Q4_K, DType::Q6_K}, {2, 4, 8, 16}},
      {1536, 576, {DType::Q5_0}, {2, 4, 8, 16}},
  };
  for (const auto& s : shapes)
    for (DType dt : s.dtypes)
      for (bool rows8 : {false, true})
        for (kernels::Isa isa : available_isas()) {
          if (isa == kernels::Isa::Scalar) continue;
          if (rows8 && !kernels::dot_kernel(dt, isa).rows8) continue;  // floats, K-quants: row-major only
          // The row-major kernels are the AVX2 ones at every SIMD level
          // (dot_avx512.cpp) but the float formats' AVX-512 prefill tiles.
          if (!rows8 && isa != kernels::Isa::Avx2 && !kernels::dot_kernel(dt, isa).float_tile) continue;
          for (size_t t : s.tokens)
            for (int threads : {1, 2}) {
              const std::string name = "matmul/" + dtype_name(dt) + (rows8 ? ":rows8/" : "/") +
                                       std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                       "/tok:" + std::to_string(t) + "/threads:" + std::to_string(threads) + "/" +
                                       kernels::isa_name(isa);
              benchmark::RegisterBenchmark(name.c_str(), BM_matmul, isa, dt, rows8, s.rows, s.cols, t, threads)
                  ->UseRealTime()
                  ->Unit(benchmark::kMicrosecond);
            }
        }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench
