// Shared helpers of the kvlab microbenchmarks (bench/micro_*.cpp).
//
// Benchmarks are registered at static-initialisation time, one per
// (kernel, shape, dtype, ISA) combination, so `--benchmark_filter` can pick
// any slice, e.g. `--benchmark_filter='dot/q4_1/.*/avx2'`.
//
// Time: single-threaded kernels (dot, attend, ops) report the thread's CPU
// time, which a busy shared machine disturbs less than wall time; matmul runs
// on a ThreadPool and reports wall time (UseRealTime). Counters are rates over
// that time:
//   bytes/s   the bytes the kernel must read (weights, KV rows, input row)
//   FLOP/s    2 * multiply-adds (matmul, dot, attention)
#pragma once
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu.h"
#include "tensor/dtype.h"

namespace kvlab::bench {

// Every ISA this CPU can run, scalar first.
inline std::vector<kernels::Isa> available_isas() {
  std::vector<kernels::Isa> v;
  for (int i = 0; i <= int(kernels::cpu().best()); ++i) v.push_back(kernels::Isa(i));
  return v;
}

// Forces the ISA for this benchmark (every benchmark sets its own, so the
// order they run in does not matter).
inline void use_isa(kernels::Isa isa) { kernels::set_isa(isa); }
inline void use_best_isa() { kernels::set_isa(kernels::cpu().best()); }

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// rows x cols random weights stored in `dtype` (row-major, GGUF layout).
struct QuantizedMatrix {
  tensor::DType dtype;
  size_t rows, cols, row_bytes;
  std::vector<uint8_t> data;
};

inline QuantizedMatrix random_matrix(tensor::DType dtype, size_t rows, size_t cols, uint32_t seed) {
  const auto& info = tensor::dtype_info(dtype);
  QuantizedMatrix m{dtype, rows, cols, *tensor::row_bytes(dtype, cols), {}};
  m.data.resize(rows * m.row_bytes);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(cols);
  for (size_t r = 0; r < rows; ++r) {
    for (auto& x : row) x = dist(rng);
    info.quantize(row.data(), m.data.data() + r * m.row_bytes, cols);
  }
  return m;
}

// The default model, where scripts/setup.sh puts it (KVLAB_SOURCE_DIR: bench/CMakeLists.txt).
inline std::string default_model_path() {
  return std::string(KVLAB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline std::string dtype_name(tensor::DType t) { return std::string(tensor::dtype_info(t).name); }

inline benchmark::Counter rate(double per_iteration) {
  return benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate,
                            benchmark::Counter::kIs1000);
}

}  // namespace kvlab::bench
