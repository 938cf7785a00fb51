#include "lab/diagnose/diagnose.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/parse_json.h"
#include "lab/report/units.h"
#include "lab/simulate/device_memory.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/parallel.h"

namespace kvlab::perf {

namespace {

// The weights must be read at least once during prefill; a decode step reads
// them again. When the prefill implies a bandwidth this many times the
// decode's, one memory system cannot explain both numbers.
constexpr double kBandwidthMismatch = 2.0;
// Speculative decoding (Leviathan, Kalman, Matias, ICML 2023): with draft
// length gamma and acceptance rate alpha, a verify pass yields
// (1 - alpha^(gamma+1)) / (1 - alpha) tokens on average. Typical published
// acceptance rates for a same-family draft are 0.6-0.8; the draft costs
// ~1/10 of a target step.
constexpr double kSpecAlpha = 0.7;
constexpr int kSpecGamma = 4;
constexpr double kSpecDraftCost = 0.1;
constexpr int64_t kBatchForRemedy = 8;

struct Context {
  const DiagnoseOptions& in;
  Pass shape;    // dtypes, batch 1
  Pass prefill;  // T = prompt
  Pass decode;   // the decode step the measurement describes
  Machine ref;   // the reference machine (the hardware, or what the metrics imply)
  bool ref_is_hw = false;
  Layout layout;  // the devices `ref` stands for: in.layout on the hardware, one device otherwise
};

double pass_seconds(const model::Config& c, const Pass& p, const Machine& m, const Layout& l) {
  return time_layout_pass(c, p, m, l).seconds;
}

Pass with_tokens(Pass p, int64_t t, int64_t past) {
  p.new_tokens = t;
  p.past = past;
  return p;
}

Pass decode_pass(const Pass& shape, const Observation& o) {
  // Without a cache each step recomputes the whole sequence; take the middle
  // of the generation as the representative step.
  if (!o.kv_cache) return with_tokens(shape, o.prompt_tokens + std::max<int64_t>(o.gen_tokens / 2, 1), 0);
  return with_tokens(shape, 1, o.prompt_tokens);
}

PhaseReport measure(const model::Config& c, const Pass& p, double seconds, double target_s) {
  PhaseReport r;
  const Cost cost = forward_cost(c, p);
  r.seconds = seconds;
  r.flops = cost.flops();
  r.bytes = cost.dram_bytes();
  r.intensity = r.flops / r.bytes;
  r.achieved_flops = r.flops / seconds;
  r.achieved_bw = r.bytes / seconds;
  r.target_miss = seconds / target_s;
  return r;
}

// Effective ridge points (after efficiencies) across the catalog.
std::pair<double, double> catalog_ridges(const NumberFormat& wf, const Efficiency& eff) {
  double lo = 1e300, hi = 0;
  for (const Hardware& h : hardware_catalog()) {
    const Machine m = make_machine(h, dense_precision(h, wf), eff);
    lo = std::min(lo, m.flops / m.bytes_per_s);
    hi = std::max(hi, m.flops / m.bytes_per_s);
  }
  return {lo, hi};
}

void classify(PhaseReport& r, const Context& x, const NumberFormat& wf) {
  if (x.ref_is_hw) {
    const double ridge = x.ref.flops / x.ref.bytes_per_s;
    r.bound = r.intensity >= ridge ? Bound::Compute : Bound::Memory;
    r.bound_basis = std::string(r.bound == Bound::Compute ? "above" : "below") + " the ridge of " + x.in.hw->name +
                    " (" + fmt_num(ridge) + " FLOP/byte)";
    return;
  }
  const auto [lo, hi] = catalog_ridges(wf, x.in.eff);
  const std::string range = fmt_num(lo) + "-" + fmt_num(hi) + " FLOP/byte";
  if (r.intensity < lo) {
    r.bound = Bound::Memory;
    r.bound_basis = "below the ridge of every catalog device (" + range + ")";
  } else if (r.intensity >= hi) {
    r.bound = Bound::Compute;
    r.bound_basis = "above the ridge of every catalog device (" + range + ")";
  } else {
    const double mid = std::sqrt(lo * hi);
    r.bound = r.intensity >= mid ? Bound::Compute : Bound::Memory;
    r.bound_basis = "within the catalog's ridge range (" + range + "); judged against its middle, " + fmt_num(mid);
  }
}

// Speed-up of the struggling phase when its pass changes from `a` to `b`
// (or the machine from `ma` to `mb`).
double gain(const model::Config& ca, const Pass& a, const Machine& ma, const model::Config& cb, const Pass& b,
            const Machine& mb, const Layout& l) {
  return pass_seconds(ca, a, ma, l) / pass_seconds(cb, b, mb, l);
}

const ModelEntry* smaller_model(const model::Config& c) {
  const double n = param_count(c).total();
  const ModelEntry* best = nullptr;
  for (const ModelEntry& e : model_catalog()) {
    const double m = param_count(e.config).total();
    if (m <= n / 2 && (!best || m > param_count(best->config).total())) best = &e;
  }
  return best;
}

MemoryShape memory_shape(const Context& x, const Machine& m) {
  const Observation& ob = x.in.obs;
  return {x.shape.weight_bytes, x.shape.kv_bytes, activation_bytes(m.precision), ob.prompt_tokens + ob.gen_tokens, 1,
          ob.prompt_tokens};
}

std::vector<HwOption> hardware_options(const Context& x, const Diagnosis& d, const NumberFormat& wf) {
  std::vector<HwOption> out;
  const model::Config& c = x.in.model;
  const Layout& asked = x.in.layout;
  for (const Hardware& h : hardware_catalog()) {
    // The user's layout on each catalog device, over its own link; devices
    // the catalog links to nothing are left out of a multi-device layout.
    if (asked.devices() > 1 && h.link.empty()) continue;
    const Layout l = make_layout(asked.tp, asked.pp, "", h);
    const Machine m = make_machine(h, dense_precision(h, wf), x.in.eff);
    HwOption o{h.id, h.name, h.kind, h.mem_bw, pass_seconds(c, x.prefill, m, l), 1.0 / pass_seconds(c, x.decode, m, l),
               0,    0,      false};
    o.prefill_gain = d.prefill.seconds / o.ttft_s;
    o.decode_gain = o.decode_tok_s * d.decode.seconds;
    o.fits = device_memory(c, l, memory_shape(x, m), h.mem_bytes).fits();
    out.push_back(std::move(o));
  }
  const bool dec = d.struggling == Phase::Decode;
  std::stable_sort(out.begin(), out.end(), [&](const HwOption& a, const HwOption& b) {
    if (a.fits != b.fits) return a.fits;
    return dec ? a.decode_gain > b.decode_gain : a.prefill_gain > b.prefill_gain;
  });
  return out;
}

std::vector<Remedy> decode_remedies(const Context& x, const Diagnosis& d) {
  const model::Config& c = x.in.model;
  const Machine& m = x.ref;
  std::vector<Remedy> r;

  if (!x.in.obs.kv_cache) {
    const Pass cached = with_tokens(x.shape, 1, x.decode.new_tokens - 1);
    r.push_back({"turn the KV cache on", gain(c, x.decode, m, c, cached, m, x.layout),
                 "each step then processes 1 token instead of recomputing " + std::to_string(x.decode.new_tokens)});
  }

  // Keep the weights in device memory: the gap between the measurement and
  // what a device with its weights resident predicts.
  if (x.ref_is_hw) {
    const double g = d.decode.seconds / *d.decode.predicted_s;
    r.push_back({d.decode.bound == Bound::Memory ? "keep all weights in device memory (no offload, no paging)"
                                                 : "reach the roofline (resident weights, no per-step overhead)",
                 std::max(1.0, g),
                 "the roofline of " + x.in.hw->name + " predicts " + fmt_num(1.0 / *d.decode.predicted_s) +
                     " tok/s with the weights resident"});
  } else {
    const HwOption* slowest = nullptr;
    for (const HwOption& h : d.hardware)
      if (h.fits && h.kind == HwKind::Gpu && (!slowest || h.mem_bw < slowest->mem_bw)) slowest = &h;
    if (slowest)
      r.push_back({"keep all weights in device memory (no offload, no paging)", std::max(1.0, slowest->decode_gain),
                   "even the lowest-bandwidth catalog GPU that holds the model (" + slowest->name + ") predicts " +
                       fmt_num(slowest->decode_tok_s) + " tok/s"});
  }

  for (const auto& [q, quality] : {std::pair{"q8_0", "small"}, std::pair{"q4_0", "measurable"}}) {
    const NumberFormat& f = weight_format(q);
    if (f.bits >= d.weight_bits) continue;
    Pass p = x.decode;
    p.weight_bytes = f.bytes();
    r.push_back({std::string("weight quantization to ") + q, gain(c, x.decode, m, c, p, m, x.layout),
                 "weights shrink from " + fmt_num(d.weight_bits) + " to " + fmt_num(f.bits) +
                     " bits and a memory-bound step with them; " + quality + " quality cost"});
  }
  if (x.shape.kv_bytes * 8 > 8.5) {
    Pass p = x.decode;
    p.kv_bytes = kv_format("q8_0").bytes();
    r.push_back({"KV cache quantization to q8_0", gain(c, x.decode, m, c, p, m, x.layout),
                 "at " + std::to_string(x.in.obs.prompt_tokens) +
                     " positions the KV cache is a small share of the bytes; the gain grows with context"});
  }
  {
    Pass b = x.decode;
    b.batch = kBatchForRemedy;
    const double g = double(kBatchForRemedy) * pass_seconds(c, x.decode, m, x.layout) / pass_seconds(c, b, m, x.layout);
    r.push_back({"batching " + std::to_string(kBatchForRemedy) + " requests", g,
                 "aggregate tokens/s across requests; each stream's own speed does not improve", true});
  }
  {
    const double accepted = (1.0 - std::pow(kSpecAlpha, kSpecGamma + 1)) / (1.0 - kSpecAlpha);
    const Pass verify = with_tokens(x.decode, x.decode.new_tokens + kSpecGamma, x.decode.past);
    const double verify_cost = pass_seconds(c, verify, m, x.layout) / pass_seconds(c, x.decode, m, x.layout);
    r.push_back({"speculative decoding", accepted / (kSpecGamma * kSpecDraftCost + verify_cost),
                 "draft of " + std::to_string(kSpecGamma) + " tokens at 1/10 the cost, acceptance " +
                     fmt_num(kSpecAlpha, 2) + " (Leviathan et al. 2023): " + fmt_num(accepted) +
                     " tokens per verify pass"});
  }
  if (const ModelEntry* s = smaller_model(c)) {
    Pass p = x.decode;
    r.push_back({"a smaller model (" + std::string(s->id) + ")", gain(c, x.decode, m, s->config, p, m, x.layout),
                 fmt_num(param_count(s->config).total() / 1e9) + " B instead of " +
                     fmt_num(param_count(c).total() / 1e9) + " B parameters, at a quality cost"});
  }
  return r;
}

std::vector<Remedy> prefill_remedies(const Context& x, const Diagnosis& d) {
  const model::Config& c = x.in.model;
  const Machine& m = x.ref;
  std::vector<Remedy> r;
  {
    // fp8 math: the hardware's fp8/bf16 ratio, or 2x (Hopper, Ada) when unknown.
    double ratio = 2.0;
    if (x.ref_is_hw) ratio = x.in.hw->fp8 && x.in.hw->bf16 ? *x.in.hw->fp8 / *x.in.hw->bf16 : 1.0;
    Machine f = m;
    f.flops *= ratio;
    Pass p = x.prefill;
    p.weight_bytes = std::min(p.weight_bytes, 1.0);
    r.push_back({"fp8 weights and math", gain(c, x.prefill, m, c, p, f, x.layout),
                 ratio > 1 ? "fp8 tensor cores run " + fmt_num(ratio, 2) + "x the bf16 rate"
                           : "this hardware has no fp8 rate; only the smaller weights help"});
  }
  {
    const Pass half = with_tokens(x.prefill, std::max<int64_t>(x.prefill.new_tokens / 2, 1), x.prefill.new_tokens / 2);
    r.push_back({"prefix (prompt) caching", gain(c, x.prefill, m, c, half, m, x.layout),
                 "when half of the prompt (a system prompt, the chat so far) is already cached"});
  }
  for (const char* q : {"q4_0"}) {
    const NumberFormat& f = weight_format(q);
    if (f.bits >= d.weight_bits) continue;
    Pass p = x.prefill;
    p.weight_bytes = f.bytes();
    r.push_back({std::string("weight quantization to ") + q, gain(c, x.prefill, m, c, p, m, x.layout),
                 "fewer bytes only help a prefill that is memory-bound (short prompts)"});
  }
  if (x.ref_is_hw && d.prefill.predicted_s) {
    r.push_back({"keep all weights in device memory (no offload, no paging)",
                 std::max(1.0, d.prefill.seconds / *d.prefill.predicted_s),
                 "the roofline of " + x.in.hw->name + " predicts a TTFT of " + fmt_seconds(*d.prefill.predicted_s)});
  }
  if (const ModelEntry* s = smaller_model(c))
    r.push_back({"a smaller model (" + std::string(s->id) + ")",
                 gain(c, x.prefill, m, s->config, x.prefill, m, x.layout),
                 "FLOPs scale with parameters, at a quality cost"});
  return r;
}

std::string cause_text(const Diagnosis& d, const Context& x) {
  const PhaseReport& p = d.struggling == Phase::Decode ? d.decode : d.prefill;
  std::string s;
  if (d.struggling == Phase::Decode) {
    s = "Each decode step " +
        std::string(x.in.obs.kv_cache ? "reads every weight and the KV cache (" : "recomputes the whole sequence (") +
        fmt_bytes(p.bytes) + ") to produce one token, doing " + fmt_flop_count(p.flops) + ": " + fmt_num(p.intensity) +
        " FLOP/byte. At " + fmt_num(x.in.obs.decode_tok_s) + " tok/s that is " + fmt_bandwidth(p.achieved_bw) +
        " of effective memory bandwidth and " + fmt_flops(p.achieved_flops) + ".";
  } else {
    s = "The prefill pushes " + std::to_string(x.in.obs.prompt_tokens) +
        " prompt tokens through every matrix at once: " + fmt_flop_count(p.flops) + " over " + fmt_bytes(p.bytes) +
        ", " + fmt_num(p.intensity) + " FLOP/byte. In " + fmt_seconds(p.seconds) + " that is " +
        fmt_flops(p.achieved_flops) + ".";
  }
  if (p.on_hw)
    s += " On " + x.in.hw->name + " this is " + fmt_percent(p.on_hw->flops_utilization) + " of peak FLOP/s (MFU) and " +
         fmt_percent(p.on_hw->bw_utilization) + " of peak bandwidth (MBU).";
  s += " The intensity is " + p.bound_basis + ", so the phase is " + std::string(bound_name(p.bound)) + ".";
  if (d.struggling == Phase::Decode && p.bound == Bound::Memory) {
    double slowest_gpu = 1e300;
    for (const Hardware& h : hardware_catalog())
      if (h.kind == HwKind::Gpu) slowest_gpu = std::min(slowest_gpu, h.mem_bw);
    if (p.achieved_bw < 0.5 * slowest_gpu)
      s += " " + fmt_bandwidth(p.achieved_bw) +
           " is the speed of system RAM or a PCIe link, far below any GPU's VRAM (" + fmt_bandwidth(slowest_gpu) +
           " and up): either this runs on a CPU, or the weights are not (all) in device memory while decoding.";
  }
  if (x.ref_is_hw) {
    const DeviceMemory m = device_memory(x.in.model, x.layout, memory_shape(x, x.ref), x.in.hw->mem_bytes);
    if (!m.fits())
      s += " The weights, KV cache and activations (" + fmt_bytes(m.total()) + " per device) do not fit in " +
           x.in.hw->name + "'s " + fmt_bytes(m.usable) + " usable: part of the model must be offloaded.";
  }
  return s;
}

std::string upgrade_text(const Diagnosis& d) {
  const std::string sens = " (on the reference machine: 2x FLOP/s gives " + fmt_factor(d.gain_2x_flops) +
                           ", 2x bandwidth gives " + fmt_factor(d.gain_2x_bandwidth) + ")";
  if (d.limiting == Resource::MemoryBandwidth)
    return "Faster memory, not more TFLOPS: more HBM/VRAM bandwidth, with all weights resident in device memory" +
           sens + ".";
  return "More compute, not more bandwidth: a device with more (tensor-core) TFLOPS, or lower-precision math" + sens +
         ".";
}

void find_contradictions(Diagnosis& d, const Context& x, const NumberFormat& wf) {
  const model::Config& c = x.in.model;
  const double prefill_min_bw = d.prefill.bytes / d.prefill.seconds;
  if (x.in.obs.kv_cache && prefill_min_bw > kBandwidthMismatch * d.decode.achieved_bw) {
    d.contradictions.push_back(
        {"The TTFT is too fast for the bandwidth the decode rate implies: prefill read the weights (" +
             fmt_bytes(d.prefill.bytes) + ") in " + fmt_seconds(d.prefill.seconds) + ", at least " +
             fmt_bandwidth(prefill_min_bw) + ", yet decode moves only " + fmt_bandwidth(d.decode.achieved_bw) +
             ". With the same memory, one decode step should take at most about the TTFT (" +
             fmt_num(1.0 / d.prefill.seconds) + " tok/s or more), not " + fmt_seconds(d.decode.seconds) + ".",
         {"the weights are not all in device memory while decoding (partial offload, unified-memory paging, swapping)",
          "decode runs without a KV cache, recomputing the sequence at every step",
          "a per-token overhead outside the model dominates: sampling or detokenizing on the CPU, a Python loop, "
          "host-device synchronisation, network streaming",
          "a server batches other requests, so this stream gets a share of each step",
          "the TTFT was served from a prompt (prefix) cache, or measures less than the full prefill"}});
  }
  if (x.ref_is_hw) {
    const Efficiency ideal{1.0, 1.0, 0.0};
    const Machine peak = make_machine(*x.in.hw, dense_precision(*x.in.hw, wf), ideal);
    const double ttft_min = pass_seconds(c, x.prefill, peak, x.layout);
    if (d.prefill.seconds < ttft_min)
      d.contradictions.push_back(
          {"The TTFT (" + fmt_seconds(d.prefill.seconds) + ") is below what " + x.in.hw->name +
               "'s peak allows for this model and prompt (" + fmt_seconds(ttft_min) + ").",
           {"the prompt is shorter than stated, or part of it came from a prefix cache",
            "the model is smaller or more quantized than stated", "the work is split over several devices"}});
    const double step_min = pass_seconds(c, x.decode, peak, x.layout);
    if (d.decode.seconds < step_min)
      d.contradictions.push_back(
          {"The decode rate (" + fmt_num(x.in.obs.decode_tok_s) + " tok/s) is above what " + x.in.hw->name +
               "'s peak bandwidth allows (" + fmt_num(1.0 / step_min) + " tok/s).",
           {"the weights are more quantized than stated", "speculative decoding yields several tokens per step",
            "the figure is aggregate over a batch, not per stream", "the model is split over several devices"}});
  } else {
    double max_bw = 0, max_flops = 0;
    for (const Hardware& h : hardware_catalog()) {
      max_bw = std::max(max_bw, h.mem_bw);
      max_flops = std::max(max_flops, h.compute_peak(dense_precision(h, wf), nullptr));
    }
    if (d.decode.achieved_bw > max_bw)
      d.contradictions.push_back({"The decode rate implies " + fmt_bandwidth(d.decode.achieved_bw) +
                                      ", more than any catalog device's memory (" + fmt_bandwidth(max_bw) + ").",
                                  {"the weights are more quantized than stated", "speculative decoding",
                                   "an aggregate over a batch", "several devices (tensor parallelism)"}});
    if (d.prefill.achieved_flops > max_flops)
      d.contradictions.push_back(
          {"The TTFT implies " + fmt_flops(d.prefill.achieved_flops) + ", more than any catalog device's peak (" +
               fmt_flops(max_flops) + ").",
           {"the prompt is shorter than stated, or came from a prefix cache", "a smaller model", "several devices"}});
  }
}

}  // namespace

std::string_view resource_name(Resource r) {
  return r == Resource::MemoryBandwidth ? "memory bandwidth" : "compute (FLOP/s)";
}

RunRecord parse_run_json(std::string_view json_text, std::string_view origin) {
  using nlohmann::json;
  const std::string o(origin);
  const json j = parse_json(json_text, origin);
  if (!j.is_object()) throw Error(o + ": expected the JSON object `kvlab run --json` prints");
  auto positive = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number() || !(j[key].get<double>() > 0))
      throw Error(o + ": field '" + key + "' missing or not a positive number");
    return j[key].get<double>();
  };
  RunRecord r;
  r.obs.ttft_s = positive("ttft_ms") / 1e3;
  r.obs.decode_tok_s = positive("decode_tok_s");
  r.obs.prompt_tokens = int64_t(positive("prompt_tokens"));
  if (j.contains("tokens") && j["tokens"].is_array()) r.obs.gen_tokens = int64_t(j["tokens"].size());
  if (j.contains("kv_cache") && j["kv_cache"].is_boolean()) r.obs.kv_cache = j["kv_cache"].get<bool>();
  if (j.contains("model") && j["model"].is_string()) r.model = j["model"].get<std::string>();
  return r;
}

Diagnosis diagnose(const DiagnoseOptions& in) {
  const Observation& ob = in.obs;
  if (!(ob.ttft_s > 0) || !std::isfinite(ob.ttft_s)) throw Error("--ttft-ms must be a positive number");
  if (!(ob.decode_tok_s > 0) || !std::isfinite(ob.decode_tok_s))
    throw Error("--decode-tok-s must be a positive number");
  if (ob.prompt_tokens < 1) throw Error("--prompt-tokens must be at least 1");
  if (ob.gen_tokens < 1) throw Error("the number of generated tokens must be at least 1");
  if (!(in.target_ttft_s > 0) || !(in.target_tok_s > 0)) throw Error("targets must be positive");
  validate_config(in.model, in.model_id);

  const NumberFormat& wf = weight_format(in.weights);
  Diagnosis d;
  d.in = in;
  d.weight_bits = in.weight_bits.value_or(wf.bits);
  d.weight_bytes = weight_memory_bytes(in.model, d.weight_bits / 8.0);
  // Every machine prices the matmuls at perf::dense_precision, as kvlab
  // simulate does (integer weights on a CPU with an int8 peak: int8).

  if (in.layout.devices() > 1 && !in.hw) throw Error("--tp and --pp need --hw: the devices the metrics come from");
  check_layout(in.model, in.layout);
  Context x{in, {}, {}, {}, {}, false, {}};
  x.shape.weight_bytes = d.weight_bits / 8.0;
  x.shape.kv_bytes = kv_format(in.kv).bytes();
  x.prefill = with_tokens(x.shape, ob.prompt_tokens, 0);
  x.decode = decode_pass(x.shape, ob);

  d.prefill = measure(in.model, x.prefill, ob.ttft_s, in.target_ttft_s);
  d.decode = measure(in.model, x.decode, 1.0 / ob.decode_tok_s, 1.0 / in.target_tok_s);

  if (in.hw) {
    x.ref = make_machine(*in.hw, dense_precision(*in.hw, wf), in.hw_eff ? *in.hw_eff : in.eff);
    x.ref_is_hw = true;
    x.layout = in.layout;
    d.reference = in.hw->name + " with " + (in.hw_eff ? "efficiencies " + in.hw_eff->source : "the default efficiencies");
    const Machine peak = make_machine(*in.hw, dense_precision(*in.hw, wf), {1.0, 1.0, 0.0});
    // Tensor parallelism runs tp devices at once; pipeline stages take turns
    // at batch 1, so the peaks the whole pass can use are tp devices'.
    const double devices_at_once = in.layout.tp;
    for (PhaseReport* r : {&d.prefill, &d.decode}) {
      r->on_hw = roofline_verdict(r->flops, r->bytes, r->seconds, peak.peak_flops * devices_at_once,
                                  peak.peak_bytes_per_s * devices_at_once);
    }
    d.prefill.predicted_s = pass_seconds(in.model, x.prefill, x.ref, x.layout);
    d.decode.predicted_s = pass_seconds(in.model, x.decode, x.ref, x.layout);
  } else {
    // What the metrics themselves show: the decode's bandwidth and the
    // prefill's FLOP/s, no overheads (they are inside the measurements).
    x.ref.peak_flops = x.ref.flops = std::max(d.prefill.achieved_flops, d.decode.achieved_flops);
    x.ref.peak_bytes_per_s = x.ref.bytes_per_s = d.decode.achieved_bw;
    x.ref.precision = wf.compute;
    d.reference = "a machine with the FLOP/s the prefill shows (" + fmt_flops(x.ref.flops) +
                  ") and the bandwidth the decode shows (" + fmt_bandwidth(x.ref.bytes_per_s) + ")";
  }
  classify(d.prefill, x, wf);
  classify(d.decode, x, wf);

  d.misses_target = std::max(d.prefill.target_miss, d.decode.target_miss) > 1.0;
  d.struggling = d.decode.target_miss >= d.prefill.target_miss ? Phase::Decode : Phase::Prefill;
  const PhaseReport& sp = d.struggling == Phase::Decode ? d.decode : d.prefill;
  const Pass& spass = d.struggling == Phase::Decode ? x.decode : x.prefill;
  d.limiting = sp.bound == Bound::Memory ? Resource::MemoryBandwidth : Resource::Compute;

  Machine more_flops = x.ref, more_bw = x.ref;
  more_flops.flops *= 2;
  more_bw.bytes_per_s *= 2;
  d.gain_2x_flops = gain(in.model, spass, x.ref, in.model, spass, more_flops, x.layout);
  d.gain_2x_bandwidth = gain(in.model, spass, x.ref, in.model, spass, more_bw, x.layout);

  d.cause = cause_text(d, x);
  d.upgrade = upgrade_text(d);
  d.hardware = hardware_options(x, d, wf);
  d.remedies = d.struggling == Phase::Decode ? decode_remedies(x, d) : prefill_remedies(x, d);
  std::stable_sort(d.remedies.begin(), d.remedies.end(), [](const Remedy& a, const Remedy& b) {
    if (a.aggregate != b.aggregate) return !a.aggregate;
    return a.gain > b.gain;
  });
  find_contradictions(d, x, wf);
  return d;
}

}  // namespace kvlab::perf
