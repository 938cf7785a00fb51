// Row ops of the layer (kernels/ops.h) and activation conversion
// (DotKernel::quantize_act), with SmolLM2-135M's sizes:
//
//   rmsnorm/<n>                   one row (576: embedding, 1536: FFN)
//   rope/<norm|neox>/heads:12     one token: 9 query + 3 key heads of 64
//   rope_table/64                 the (cos, sin) table of one position
//   softmax/<n>                   attention scores (128..4096), vocab (49152)
//   silu_mul/1536                 SwiGLU of one token
//   quantize_act/<fmt>/<n>/<isa>  f32 row -> q8_0, q8_1 (for q4_1 weights),
//                                 f16, bf16: what matmul runs before its dots
//
// bytes/s counts the f32 input read (the output is smaller or the same size).
#include <benchmark/benchmark.h>

#include <algorithm>

#include "kernels/dot.h"
#include "kernels/ops.h"
#include "micro_common.h"

namespace kvlab::bench {
namespace {

using tensor::DType;

void BM_rmsnorm(benchmark::State& state, size_t n) {
  use_best_isa();
  const auto x = random_floats(n, 1), w = random_floats(n, 2);
  std::vector<float> out(n);
  for (auto _ : state) {
    kernels::rmsnorm(x.data(), w.data(), n, 1e-5f, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(4.0 * double(n));
}

void BM_rope(benchmark::State& state, bool neox) {
  use_best_isa();
  constexpr size_t kHeadDim = 64, kHeads = 12;
  std::vector<float> cs(kHeadDim);
  kernels::rope_table(1000, kHeadDim, 100000.0f, cs.data());
  auto x = random_floats(kHeads * kHeadDim, 3);
  for (auto _ : state) {
    for (size_t h = 0; h < kHeads; ++h) kernels::rope(&x[h * kHeadDim], kHeadDim, cs.data(), neox);
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(4.0 * double(kHeads * kHeadDim));
}

void BM_rope_table(benchmark::State& state) {
  use_best_isa();
  std::vector<float> cs(64);
  int pos = 0;
  for (auto _ : state) {
    kernels::rope_table(pos++ & 4095, 64, 100000.0f, cs.data());
    benchmark::DoNotOptimize(cs.data());
    benchmark::ClobberMemory();
  }
}

void BM_softmax(benchmark::State& state, size_t n) {
  use_best_isa();
  auto x = random_floats(n, 4, 3.0f);
  for (auto _ : state) {
    // In place, run after run: after the first the input is a distribution in [0, 1], so
    // exp(x - max) stays well inside the normal range and the work per call is the same.
    kernels::softmax(x.data(), n);
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(4.0 * double(n));
}

void BM_silu_mul(benchmark::State& state, size_t n) {
  use_best_isa();
  const auto src = random_floats(n, 5), up = random_floats(n, 6);
  std::vector<float> gate(n);
  for (auto _ : state) {
    // silu_mul works in place; refill gate each time (a 6 KiB copy, included in the time) so the
    // values do not drift into denormals over the iterations.
    std::copy(src.begin(), src.end(), gate.begin());
    kernels::silu_mul(gate.data(), up.data(), n);
    benchmark::DoNotOptimize(gate.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(8.0 * double(n));
}

const char* act_name(kernels::ActFormat f) {
  switch (f) {
    case kernels::ActFormat::F32: return "f32";
    case kernels::ActFormat::F16: return "f16";
    case kernels::ActFormat::BF16: return "bf16";
    case kernels::ActFormat::Q8_0: return "q8_0";
    case kernels::ActFormat::Q8_1: return "q8_1";
    case kernels::ActFormat::Q8_K: return "q8_k";
  }
  return "?";
}

void BM_quantize_act(benchmark::State& state, DType weight, size_t n, kernels::Isa isa) {
  use_isa(isa);
  const auto& k = kernels::dot_kernel(weight, isa);
  const auto x = random_floats(n, 8);
  std::vector<uint8_t> out(kernels::act_row_bytes(k.act, n));
  for (auto _ : state) {
    k.quantize_act(x.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(4.0 * double(n));
}

int register_all() {
  for (size_t n : {576, 1536})
    benchmark::RegisterBenchmark(("rmsnorm/" + std::to_string(n)).c_str(), BM_rmsnorm, n);
  benchmark::RegisterBenchmark("rope/norm/heads:12", BM_rope, false);
  benchmark::RegisterBenchmark("rope/neox/heads:12", BM_rope, true);
  benchmark::RegisterBenchmark("rope_table/64", BM_rope_table);
  for (size_t n : {128, 1024, 4096, 49152})
    benchmark::RegisterBenchmark(("softmax/" + std::to_string(n)).c_str(), BM_softmax, n);
  benchmark::RegisterBenchmark("silu_mul/1536", BM_silu_mul, size_t(1536));
  // One weight dtype per activation format: q8_0 -> q8_0, q4_1 -> q8_1, f16 -> f16, bf16 -> bf16.
  for (DType w : {DType::Q8_0, DType::Q4_1, DType::F16, DType::BF16})
    for (size_t n : {576, 1536})
      for (kernels::Isa isa : available_isas()) {
        const std::string name = std::string("quantize_act/") + act_name(kernels::dot_kernel(w, isa).act) + "/" +
                                 std::to_string(n) + "/" + kernels::isa_name(isa);
        benchmark::RegisterBenchmark(name.c_str(), BM_quantize_act, w, n, isa);
      }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench
