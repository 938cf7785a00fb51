// The hardware profile of "this machine": what `kvlab probe` measures and
// writes, and what the simulator loads as the hardware entry "this".
//
// File: ~/.cache/kvlab/hw-profile.json ($XDG_CACHE_HOME/kvlab/... when set).
// Format (all numbers in base SI units: bytes, bytes/s, FLOP/s, op/s):
//   {
//     "format": "kvlab-hw-profile/1",
//     "date": "2025-06-01T12:00:00Z",          // ISO 8601, when probed
//     "cpu_model": "AMD EPYC 9654 96-Core Processor",
//     "cores": 96,                             // physical cores
//     "threads": 192,                          // hardware threads
//     "simd": "avx512",                        // widest kernel ISA kvlab dispatches to:
//                                              //   "avx512", "avx2", "neon" or "scalar"
//     "caches": { "l1d_bytes": 32768,          // per core
//                 "l2_bytes": 1048576,         // per core
//                 "l3_bytes": 402653184 },     // whole socket
//     "mem_bytes": 824633720832,               // installed RAM
//     "mem_read_bw": [                         // streaming read bandwidth by thread count
//       { "threads": 1, "bytes_per_s": 2.1e10, "sustained_bytes_per_s": 1.8e10 },
//       { "threads": 96, "bytes_per_s": 3.6e11 } ],
//     "read_bw_by_size": [                     // optional: all threads reading one working set
//       { "bytes": 4194304, "bytes_per_s": 9e11 },   // over and over, ascending sizes up to
//       { "bytes": 8589934592, "bytes_per_s": 3.4e11 } ],  // the bandwidth buffer (from DRAM)
//     "peak_fp32_flops": 7.1e12,               // measured FMA throughput, all threads
//     "peak_int8_ops": 2.8e13,                 // measured int8 dot throughput, all threads;
//                                              // 0 when not measured
//     "kernels": {                             // optional: kvlab's own kernels, all threads
//       "threads": 96,
//       "matmul": [ { "weights": "q4_1",       // per weight dtype the engine has
//                     "gemv_bytes_per_s": 3.1e11,  // decode (1 token): weights streamed from DRAM
//                     "gemv_row_s": 2e-9,          // + this per weight row (fixed cost of a row)
//                     "gemv_call_s": 3e-6,         // + this per matmul call (start and tail)
//                     "gemm_ops_per_s": 9e12,      // prefill (512 tokens, weights in cache), 2 op/MAC,
//                     "gemm_input_s": 6e-10,       // + this per token per input column,
//                     "gemm_output_s": 1e-10 } ],  // + this per token per output row: both optional
//       "attention": [ { "kv": "f16", "head_dim": 64,   // (4·head_dim + 6) FLOP per query-key pair
//                        "heads": 4,                    // query heads per KV head per pass (1..4;
//                                                       //   4 where absent: the first profiles)
//                        "decode_flops_per_s": 3e11,    // one token, 4096 positions
//                        "prefill_flops_per_s": 4e11,   // many tokens, K and V in L2,
//                        "prefill_task_s": 3e-7 } ],    // + this per (token, KV head): optional
//       "elementwise_flops_per_s": 1e11,       // norms, RoPE, SiLU·up, residual adds
//       "dispatch_s": 5e-7,                    // one thread-pool job: publish, wake, join
//       "gemv_working_set_bytes": 134217728 }  // optional: the buffer the gemv figures streamed
//   }
// Unknown keys are ignored, so later probes can add fields; so is a "kernels"
// object that does not parse (HwProfile::kernels_error says why).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlab::perf {

inline constexpr std::string_view kHwProfileFormat = "kvlab-hw-profile/1";

struct BandwidthPoint {
  int threads = 0;
  double bytes_per_s = 0;            // the best window: a burst figure
  double sustained_bytes_per_s = 0;  // the best whole pass; 0: not measured (a profile from before it was)
};

// All threads reading the same `bytes` again and again, each its own slice,
// as a decode step reads the weights and the KV cache: above the caches'
// capacity the reads come from DRAM, below it (partly) from cache.
struct SizedBandwidth {
  double bytes = 0;
  double bytes_per_s = 0;
};

// How many times faster a working set of `bytes` is read than the largest
// one measured (a buffer several times the L3: DRAM), from a curve in
// ascending sizes: interpolated in log(size) between points, the end values
// beyond them, never below 1. An empty curve (a profile from before it was
// measured, or catalog hardware) gives 1.
double cache_speedup(const std::vector<SizedBandwidth>& curve, double bytes);

// kvlab's own kernels timed by `kvlab probe` (docs/probe.md, "Engine kernels"):
// what the simulator's efficiencies for "this" machine are computed from.
struct MatmulRate {
  std::string weights;          // weight dtype name ("q4_1")
  double gemv_bytes_per_s = 0;  // one-token matmul, weights from DRAM, long rows
  double gemv_row_s = 0;        // fixed seconds per weight row on top of the bytes
  double gemv_call_s = 0;       // fixed seconds per matmul call (waking the pool, the first and last tiles)
  double gemm_ops_per_s = 0;    // 512-token matmul, weights in cache; 2 op per multiply-add, beside:
  // fixed costs per token of a call's input columns (converted to the
  // activation format, once per call) and of its output rows (each sum
  // scaled and stored), wall seconds on the whole pool: with gemm_ops_per_s,
  // t = FLOPs / rate + tokens · (cols · gemm_input_s + rows · gemm_output_s)
  // fits three matrices of equal FLOPs and different shapes. Small matrices
  // pay them on few FLOPs: 576 x 576 and 192 x 576 q4_1 run at about 0.9x
  // and 0.7x the op/s of 1024 x 1024 (bench/micro_matmul.cpp, 512 tokens).
  // 0 in profiles from before they were measured.
  double gemm_input_s = 0, gemm_output_s = 0;
};

// Counted as perf::Cost counts attention: 4·head_dim + 6 FLOP per query-key pair.
// Per pass width: the kernels take a GQA group's query heads in passes of up
// to kernels::kAttnHeadsPerPass, and the rate depends on the width (each K
// and V row is loaded once per pass: f16 at head_dim 64, 64 tokens, with
// AVX2 on 2 cores, passes of 1 head ran at ~40% of the FLOP/s of passes of
// 3 or 4).
struct AttentionRate {
  std::string kv;  // KV cache dtype name ("f16")
  int head_dim = 0;
  int heads = 0;                   // query heads per pass, 1 .. kernels::kAttnHeadsPerPass
  double decode_flops_per_s = 0;   // one token per sequence, a long context (K and V beyond L2)
  double prefill_flops_per_s = 0;  // many tokens (K and V in L2), beside:
  // a fixed cost per (token, KV head) task, wall seconds on the whole pool:
  // with prefill_flops_per_s, t = tasks · prefill_task_s + FLOPs / rate fits
  // a 512-token and a 64-token causal chunk. Short contexts pay it on few
  // FLOPs (kvlab bench -p 32 --profile puts attention at about a fifth of
  // its GFLOP/s at -p 512). 0 in profiles from before it was measured.
  double prefill_task_s = 0;
};

struct KernelRates {
  int threads = 0;  // thread-pool size they were measured with
  std::vector<MatmulRate> matmul;
  std::vector<AttentionRate> attention;
  double elementwise_flops_per_s = 0;  // a layer's norms, RoPE, SiLU·up and residual adds
  double dispatch_s = 0;               // one ThreadPool::run of trivial tasks on all threads
  double gemv_working_set_bytes = 0;   // the bytes the decode matmuls streamed, again and again; 0: not recorded

  const MatmulRate* find_matmul(std::string_view weights) const;
  // The entry for `kv` and a pass of `heads` query heads whose head_dim is
  // closest to `head_dim`; nullptr if none.
  const AttentionRate* find_attention(std::string_view kv, int head_dim, int heads) const;
  // The rates of a GQA group of `group` query heads per KV head: its passes
  // of up to kAttnHeadsPerPass heads, each at the rate measured for its width,
  //   rate = group / sum over passes (heads_pass / rate_pass),
  // a harmonic mean weighted by the query-key pairs each pass does. `heads`
  // is the group; std::nullopt if a pass width was not measured.
  std::optional<AttentionRate> attention_for_group(std::string_view kv, int head_dim, int group) const;
};

struct HwProfile {
  std::string date;
  std::string cpu_model;
  int cores = 0;
  int threads = 0;
  std::string simd;
  uint64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
  uint64_t mem_bytes = 0;
  std::vector<BandwidthPoint> mem_read_bw;
  std::vector<SizedBandwidth> read_bw_by_size;  // empty: not measured
  double peak_fp32_flops = 0;
  double peak_int8_ops = 0;
  // Absent in profiles written before kernels were probed. A "kernels"
  // object this version cannot read (another probe version's) is left out,
  // with the reason in kernels_error, rather than failing every command that
  // loads the profile: the simulator then prices with its defaults.
  std::optional<KernelRates> kernels;
  std::string kernels_error;

  double best_read_bw() const;  // the highest point of mem_read_bw
};

// Path of the profile `kvlab probe` writes.
std::string default_hw_profile_path();

// Parse and validate; errors name `origin` and the field. Throws kvlab::Error.
HwProfile parse_hw_profile(std::string_view json_text, std::string_view origin);
std::string hw_profile_to_json(const HwProfile& p);  // pretty-printed, the format above

// Reads the file; a missing file is an error telling the user to run `kvlab probe`.
HwProfile load_hw_profile(const std::string& path);

}  // namespace kvlab::perf
