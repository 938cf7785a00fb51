// attend (kernels/attention.h): one group of query heads over n_pos cached
// positions of their KV head, per KV type (f16, f32, q8_0) and ISA, with
// SmolLM2-135M's geometry (head_dim 64, 3 query heads per KV head, 3 KV
// heads, so consecutive positions are 3*64 elements apart in the cache).
//
//   attend/<kv type>/pos:<n>/<isa>
//
// bytes/s counts the K and V rows read (2 * n_pos * one head's row bytes);
// at pos:4096 with f16 that is 1 MiB per KV head, more than L2 on most CPUs.
#include <benchmark/benchmark.h>

#include <cmath>

#include "kernels/attention.h"
#include "micro_common.h"

namespace kvlab::bench {
namespace {

using tensor::DType;
constexpr size_t kHeadDim = 64;
constexpr size_t kKvHeads = 3;
constexpr int kGroup = 3;

void BM_attend(benchmark::State& state, DType kv_type, int n_pos, kernels::Isa isa) {
  use_isa(isa);
  const size_t head_bytes = *tensor::row_bytes(kv_type, kHeadDim);  // one head of one position
  const size_t row_stride = kKvHeads * head_bytes;
  const auto& info = tensor::dtype_info(kv_type);
  std::vector<uint8_t> k(size_t(n_pos) * row_stride), v(size_t(n_pos) * row_stride);
  const auto src = random_floats(kKvHeads * kHeadDim, 3);
  for (int j = 0; j < n_pos; ++j) {  // all positions alike: the values do not change the work
    info.quantize(src.data(), k.data() + size_t(j) * row_stride, kKvHeads * kHeadDim);
    info.quantize(src.data(), v.data() + size_t(j) * row_stride, kKvHeads * kHeadDim);
  }
  kernels::KvView kv;
  kv.k = k.data() + head_bytes;  // KV head 1, as a GQA group would see it
  kv.v = v.data() + head_bytes;
  kv.row_stride = row_stride;
  kv.type = kv_type;
  const auto q = random_floats(kGroup * kHeadDim, 5);
  std::vector<float> scratch(kernels::attn_scratch_floats(kGroup, kHeadDim)), out(kGroup * kHeadDim);
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  for (auto _ : state) {
    kernels::attend(q.data(), kGroup, kv, n_pos, kHeadDim, scale, scratch.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(2.0 * double(n_pos) * double(head_bytes));
  state.counters["FLOP/s"] = rate(4.0 * kGroup * double(n_pos) * double(kHeadDim));  // q·k and p·v
  state.counters["pos/s"] = rate(double(n_pos));
}

int register_all() {
  for (DType kv : {DType::F16, DType::F32, DType::Q8_0})
    for (int n : {128, 1024, 4096})
      for (kernels::Isa isa : available_isas()) {
        const std::string name =
            "attend/" + dtype_name(kv) + "/pos:" + std::to_string(n) + "/" + kernels::isa_name(isa);
        benchmark::RegisterBenchmark(name.c_str(), BM_attend, kv, n, isa);
      }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench
