// A probed machine with round numbers, for the simulator and diagnosis
// tests: 20 GB/s, 100 GFLOP/s fp32, 200 Gop/s int8, and kvlab's kernels on
// 2 threads: q4_1 matmul at 5 GB/s + 20 ns per row + 3 us per call (decode)
// and 50 Gop/s (prefill); f16 attention, decode / prefill GFLOP/s, for
// head_dim 64 in passes of 1, 2, 3 and 4 query heads: 4 / 6, 8 / 12, 10 / 15
// and 12 / 16, and for head_dim 128 in passes of 3: 20 / 25; element-wise ops
// at 3 GFLOP/s; 1 us per thread-pool job.
#pragma once
#include "lab/hardware/hardware.h"
#include "lab/hardware/hw_profile.h"

namespace kvlab::test {

inline perf::Hardware probed_machine() {
  perf::HwProfile p;
  p.date = "2025-06-01T12:00:00Z";
  p.cpu_model = "Test CPU";
  p.cores = p.threads = 2;
  p.simd = "avx2";
  p.mem_bytes = 8ull << 30;
  p.mem_read_bw = {{1, 1.5e10}, {2, 2e10}};
  p.peak_fp32_flops = 1e11;
  p.peak_int8_ops = 2e11;
  p.kernels = perf::KernelRates{2, {{"q4_1", 5e9, 2e-8, 3e-6, 5e10}},
                                {{"f16", 64, 1, 4e9, 6e9},
                                 {"f16", 64, 2, 8e9, 1.2e10},
                                 {"f16", 64, 3, 1e10, 1.5e10},
                                 {"f16", 64, 4, 1.2e10, 1.6e10},
                                 {"f16", 128, 3, 2e10, 2.5e10}},
                                3e9,
                                1e-6};
  return perf::hardware_from_profile(p, "test");
}

}  // namespace kvlab::test
