// Row dot products (kernels/dot.h), per weight dtype, row length and ISA.
//
//   dot/<dtype>/<n>/<isa>    16 weight rows x 1 activation row (decode)
//   dot4/<dtype>/<n>/<isa>   16 weight rows x 4 activation rows (prefill)
//
// 16 rows is matmul's row tile: the weights (<= 100 KiB for f32 x 1536) stay
// in L1/L2, so these measure the inner loop, not DRAM (see micro_matmul.cpp).
// n = 576 is SmolLM2-135M's embedding width, 1536 its FFN width.
#include <benchmark/benchmark.h>

#include "kernels/dot.h"
#include "micro_common.h"

namespace kvlab::bench {
namespace {

using tensor::DType;
constexpr size_t kRows = 16;

void BM_dot(benchmark::State& state, DType dtype, size_t n, kernels::Isa isa, bool four) {
  use_isa(isa);
  const auto& k = kernels::dot_kernel(dtype, isa);
  const auto w = random_matrix(dtype, kRows, n, 1);
  const size_t act_bytes = kernels::act_row_bytes(k.act, n);
  const size_t n_act = four ? 4 : 1;
  std::vector<uint8_t> act(act_bytes * n_act);
  for (size_t t = 0; t < n_act; ++t) {
    const auto x = random_floats(n, uint32_t(2 + t));
    k.quantize_act(x.data(), act.data() + t * act_bytes, n);
  }
  float out[kRows * 4];
  for (auto _ : state) {
    for (size_t r = 0; r < kRows; ++r) {
      const uint8_t* wr = w.data.data() + r * w.row_bytes;
      if (four)
        k.dot4(wr, act.data(), act_bytes, n, &out[r * 4]);
      else
        out[r] = k.dot(wr, act.data(), n);
    }
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(double(kRows * w.row_bytes));  // weight bytes
  state.counters["FLOP/s"] = rate(2.0 * double(kRows * n * n_act));
}

int register_all() {
  for (bool four : {false, true})
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1})
      for (size_t n : {576, 1536})
        for (kernels::Isa isa : available_isas()) {
          const std::string name = std::string(four ? "dot4/" : "dot/") + dtype_name(dt) + "/" + std::to_string(n) +
                                   "/" + kernels::isa_name(isa);
          benchmark::RegisterBenchmark(name.c_str(), BM_dot, dt, n, isa, four);
        }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench
