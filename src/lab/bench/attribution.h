// Puts a traced run on the roofline: the FLOPs and bytes of every forward
// pass come from perf::Cost (the same formulas the simulator predicts with),
// the seconds from the Trace, the peaks from `kvlab probe`'s profile.
//
//  prefill: achieved FLOP/s against the compute peak of the arithmetic the
//           kernels use (int8 dot products for quantized weights, fp32 FMA
//           for f32/f16/bf16 weights);
//  decode:  bytes read per token (weights + KV cache) and achieved bytes/s
//           against the probed read bandwidth at the thread count used, and
//           against the probe's rate for a working set that size (a small
//           model's step can run from a large L3).
#pragma once
#include <optional>
#include <string>

#include "engine/trace.h"
#include "lab/cost/cost.h"
#include "lab/hardware/hw_profile.h"
#include "lab/hardware/roofline.h"
#include "model/model.h"

namespace kvlab::engine {

struct PhaseWork {
  int passes = 0;
  double tokens = 0;  // new tokens processed (recompute passes count all of them)
  double seconds = 0;
  double flops = 0;
  double weight_bytes = 0;
  double kv_bytes = 0;
  double bytes() const { return weight_bytes + kv_bytes; }
  PhaseWork& operator+=(const PhaseWork& w) {
    passes += w.passes, tokens += w.tokens, seconds += w.seconds, flops += w.flops;
    weight_bytes += w.weight_bytes, kv_bytes += w.kv_bytes;
    return *this;
  }
};

struct Peaks {
  double flops = 0;            // FLOP/s (or int8 op/s) of the arithmetic used
  double fp32_flops = 0;       // fp32 FMA FLOP/s: attention and the element-wise ops run in fp32
  double bytes_per_s = 0;      // read bandwidth at this thread count (the probe's best window)
  double sustained_bytes_per_s = 0;  // its best whole pass; 0 in a profile without it
  // The probe's read rate for a working set of the decode steps' bytes
  // (weights + KV, read once per token), scaled to this thread count's
  // share of the all-thread rate:
  // above bytes_per_s when they fit in the caches (perf::cache_speedup);
  // 0 without decode steps or without that curve in the profile.
  double working_set_bytes_per_s = 0;
  double l3_bytes = 0;         // the probe's last-level cache; 0: unknown
  std::string flops_kind;      // "int8 dot" or "fp32 FMA"
  std::string source;          // the profile path and date
};

struct Attribution {
  PhaseWork prefill, decode;  // decode includes recompute passes (no KV cache)
  std::optional<Peaks> peaks;
  std::optional<perf::Verdict> prefill_verdict, decode_verdict;
  // Bytes one decode step read on average (weights + KV): one token's, or
  // those of a step of several sequences (a parallel tg test).
  double decode_bytes_per_step() const { return decode.passes ? decode.bytes() / decode.passes : 0; }
};

// A forward pass of `n_tokens` new tokens after `n_past` cached, spread
// evenly over `n_seq` sequences (each with n_past cached), as the cost model
// prices it.
perf::Pass cost_pass(int n_tokens, int n_past, double kv_elem_bytes, bool logits_for_all = false, int n_seq = 1);
// The work of that pass.
PhaseWork pass_work(const model::Model& m, int n_tokens, int n_past, double kv_elem_bytes,
                    bool logits_for_all = false, int n_seq = 1);

// `profile`: nullopt leaves the verdicts out (no probe profile yet).
Attribution attribute(const Trace& trace, const model::Model& m, double kv_elem_bytes, int threads,
                      const std::optional<perf::HwProfile>& profile);

// The cached profile if `kvlab probe` has written one, else nullopt.
std::optional<perf::HwProfile> try_load_profile();

}  // namespace kvlab::engine
