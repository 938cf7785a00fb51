#include "lab/bench/attribution.h"

#include <filesystem>

#include "lab/cost/cost.h"

namespace kvlab::engine {

perf::Pass cost_pass(int n_tokens, int n_past, double kv_elem_bytes, bool logits_for_all, int n_seq) {
  perf::Pass p;
  p.new_tokens = n_tokens / n_seq;
  p.batch = n_seq;
  p.past = n_past;
  p.logits_for_all_tokens = logits_for_all;
  p.kv_bytes = kv_elem_bytes;
  return p;
}

PhaseWork pass_work(const model::Model& m, int n_tokens, int n_past, double kv_elem_bytes, bool logits_for_all,
                    int n_seq) {
  const perf::Cost c =
      perf::forward_cost(m.config(), cost_pass(n_tokens, n_past, kv_elem_bytes, logits_for_all, n_seq));
  PhaseWork w;
  w.passes = 1;
  w.tokens = n_tokens;
  w.flops = c.flops();
  // The cost model prices weights at one uniform width; the engine knows the
  // exact bytes of its mixed-format file, so it charges those instead.
  w.weight_bytes = double(m.weights().matmul_bytes());
  w.kv_bytes = c.total().kv_bytes;
  return w;
}

namespace {

// The fastest point measured with at most `threads` threads (the fastest of
// all when every point has more).
perf::BandwidthPoint bandwidth_at(const perf::HwProfile& p, int threads) {
  perf::BandwidthPoint best, any;
  for (const auto& pt : p.mem_read_bw) {
    if (pt.threads <= threads && pt.bytes_per_s > best.bytes_per_s) best = pt;
    if (pt.bytes_per_s > any.bytes_per_s) any = pt;
  }
  return best.bytes_per_s > 0 ? best : any;
}

}  // namespace

Attribution attribute(const Trace& trace, const model::Model& m, double kv_elem_bytes, int threads,
                      const std::optional<perf::HwProfile>& profile) {
  Attribution a;
  for (const Step& s : trace.steps) {
    PhaseWork w = pass_work(m, s.n_tokens, s.n_past, kv_elem_bytes, s.logits_for_all, s.n_seq);
    w.seconds = s.seconds;
    (s.phase == Phase::Prefill ? a.prefill : a.decode) += w;
  }
  if (!profile) return a;

  bool quantized = false;
  // Block formats run integer dot products (dot.h); plain floats run FMAs.
  for (const auto& l : m.weights().layers) quantized |= tensor::dtype_info(l.wq.dtype).block_size > 1;
  Peaks pk;
  // Peaks scale with cores; the profile holds all-core figures.
  const double core_share = profile->threads > 0 ? std::min(1.0, double(threads) / profile->threads) : 1.0;
  pk.flops = (quantized ? profile->peak_int8_ops : profile->peak_fp32_flops) * core_share;
  pk.fp32_flops = profile->peak_fp32_flops * core_share;
  pk.flops_kind = quantized ? "int8 dot" : "fp32 FMA";
  const perf::BandwidthPoint bw = bandwidth_at(*profile, threads);
  pk.bytes_per_s = bw.bytes_per_s;
  pk.sustained_bytes_per_s = bw.sustained_bytes_per_s;
  pk.source = "kvlab probe, " + profile->date;
  pk.l3_bytes = double(profile->l3_bytes);
  if (!profile->read_bw_by_size.empty() && a.decode.passes > 0) {
    // The curve is what all the probe's threads read at each working set:
    // its own figure at this one, times this run's share of the all-thread
    // DRAM rate (1 with every thread). Not the DRAM window times the curve's
    // ratio: the window and the curve's last point are separate runs of the
    // probe, and on a busy machine that product can exceed every point of
    // the curve (bench/decode-vs-probe measures against fresh probes).
    const auto& curve = profile->read_bw_by_size;
    const double all = bandwidth_at(*profile, profile->threads).bytes_per_s;
    const double share = all > 0 ? std::min(1.0, pk.bytes_per_s / all) : 1.0;
    pk.working_set_bytes_per_s =
        curve.back().bytes_per_s * perf::cache_speedup(curve, a.decode_bytes_per_step()) * share;
  }
  a.peaks = pk;
  if (pk.flops <= 0 || pk.bytes_per_s <= 0) return a;
  if (a.prefill.seconds > 0)
    a.prefill_verdict = perf::roofline_verdict(a.prefill.flops, a.prefill.bytes(), a.prefill.seconds, pk.flops, pk.bytes_per_s);
  if (a.decode.seconds > 0)
    a.decode_verdict = perf::roofline_verdict(a.decode.flops, a.decode.bytes(), a.decode.seconds, pk.flops, pk.bytes_per_s);
  return a;
}

std::optional<perf::HwProfile> try_load_profile() {
  const std::string path = perf::default_hw_profile_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  return perf::load_hw_profile(path);
}

}  // namespace kvlab::engine
