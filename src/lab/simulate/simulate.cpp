#include "lab/simulate/simulate.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "lab/report/units.h"
#include "lab/simulate/parallel.h"

namespace kvlab::perf {

namespace {

constexpr int64_t kMaxPositions = int64_t(1) << 22;  // prompt + gen cap: 4M positions
constexpr int64_t kCrossoverLimit = int64_t(1) << 26;

void check_fraction(double v, const char* what) {
  if (!(v > 0 && v <= 1)) throw Error(std::string(what) + " must be in (0, 1], got " + fmt_num(v));
}

// The Pass shape (dtypes, batch) a simulation prices.
Pass pass_shape(const Simulation& s) {
  Pass p;
  p.batch = s.opt.batch;
  p.weight_bytes = s.weight_bits / 8.0;
  p.kv_bytes = s.kv_bits / 8.0;
  return p;
}

// A CPU matmul of T tokens: its weights' read, as one token's pass takes it
// (the one-token figures hold that token's arithmetic), plus the arithmetic
// of the T - 1 others at the 512-token rate. An empirical fit: kvlab's
// kernels do hide the read at 8 and 16 tokens (matmul_dram's in-cache time
// is 0.87-0.95 of the DRAM one), but their arithmetic there runs at 0.6-0.9
// of the 512-token rate (each weight block's unpacking serves one pass of 8
// tokens, and the weights stream through L2 rather than staying in L1 for a
// 64-token tile), which lands the pass about where the sum does. SmolLM2
// q4_1 on 2 Zen 4 cores, `kvlab bench -p T -n 0` on quiet cores: pp1, 8, 16,
// 32, 64 and 128 take 2.2-2.6, 4.9-5.1, 8.2-8.4, 14.4-15.2, 27.6-27.8 and
// 55.7-56.1 ms, ~0.41 ms per token past the first, the 512-token rate's.
// The larger of read and arithmetic at that rate priced 8-32 tokens 10-15%
// fast.
double extra_tokens_s(double compute_s, double tokens) {
  return tokens > 1 ? compute_s * (tokens - 1) / tokens : 0.0;
}

}  // namespace

Machine make_machine(const Hardware& hw, Precision wanted, const Efficiency& eff, std::optional<Precision> attention) {
  check_fraction(eff.bandwidth, "bandwidth efficiency");
  check_fraction(eff.compute, "compute efficiency");
  check_fraction(eff.attention_or_compute(), "attention efficiency");
  check_fraction(eff.attention_decode_or_attention(), "decode attention efficiency");
  check_fraction(eff.elementwise_or_compute(), "element-wise efficiency");
  if (!(eff.layer_overhead_s >= 0 && eff.layer_overhead_s < 1))
    throw Error("per-layer overhead must be in [0, 1) s, got " + fmt_num(eff.layer_overhead_s));
  if (!(eff.row_s >= 0 && eff.row_s < 1e-3)) throw Error("per-row cost must be in [0, 1) ms, got " + fmt_num(eff.row_s));
  if (!(eff.call_s >= 0 && eff.call_s < 1)) throw Error("per-call cost must be in [0, 1) s, got " + fmt_num(eff.call_s));
  for (double v : {eff.matmul_input_s, eff.matmul_output_s})
    if (!(v >= 0 && v < 1e-6)) throw Error("per-token matmul input and output costs must be in [0, 1) us, got " + fmt_num(v));
  if (!(eff.attention_task_s >= 0 && eff.attention_task_s < 1e-3))
    throw Error("per-task attention cost must be in [0, 1) ms, got " + fmt_num(eff.attention_task_s));
  Machine m;
  m.peak_flops = hw.compute_peak(wanted, &m.precision);
  m.peak_bytes_per_s = hw.mem_bw;
  m.flops = m.peak_flops * eff.compute;
  m.bytes_per_s = m.peak_bytes_per_s * eff.bandwidth;
  m.layer_overhead_s = eff.layer_overhead_s;
  m.row_s = eff.row_s;
  m.call_s = eff.call_s;
  m.matmul_input_s = eff.matmul_input_s;
  m.matmul_output_s = eff.matmul_output_s;
  m.reads_hide_arithmetic = hw.kind != HwKind::Cpu;
  m.attention_peak_flops = hw.compute_peak(attention.value_or(wanted), &m.attention_precision);
  m.attention_flops = m.attention_peak_flops * eff.attention_or_compute();
  m.attention_decode_flops = m.attention_peak_flops * eff.attention_decode_or_attention();
  m.attention_task_s = eff.attention_task_s;
  // Norms, RoPE and SiLU are fp32 arithmetic on every engine (CUDA cores, not
  // tensor cores; FMA units on a CPU).
  m.elementwise_flops = hw.compute_peak(Precision::FP32, nullptr) * eff.elementwise_or_compute();
  m.threads = eff.threads;
  m.read_bw_by_size = hw.read_bw_by_size;
  m.bandwidth_working_set_bytes = eff.bandwidth_working_set_bytes;
  return m;
}

double Machine::read_speedup(double bytes) const {
  // cache_speedup is relative to the curve's last (DRAM) point, but a rate
  // measured over a smaller working set already includes that set's
  // speed-up over it. With a 32 MiB L3 the curve (64 MiB and 1 GiB
  // measured, log-interpolated between) puts the 128 MiB the probe's matmuls
  // stream at about 1.13x its 1 GiB point and a 99 MB decode step at about
  // the same: applied on top of the measured rate, that speed-up would be
  // counted twice and the cached steps predicted too fast
  // (bench/sim-vs-measured measures it; docs/validation/this-machine-zen4.md).
  const double reference = bandwidth_working_set_bytes > 0 ? cache_speedup(read_bw_by_size, bandwidth_working_set_bytes) : 1.0;
  return cache_speedup(read_bw_by_size, bytes) / reference;
}

PassTime time_pass(const model::Config& c, const Pass& p, const Machine& m) {
  return time_cost(c, forward_cost(c, p), {double(p.new_tokens * p.batch), p.past + p.new_tokens, p.new_tokens == 1},
                   m);
}

PassTime time_cost(const model::Config& c, const Cost& cost, const AttentionShape& a, const Machine& m) {
  const OpCost all = cost.total();
  double attn_flops = 0, ew_flops = 0;
  for (Op op : {Op::Scores, Op::Softmax, Op::AttnV}) attn_flops += cost[op].flops;
  for (Op op : {Op::AttnNorm, Op::Rope, Op::FfnNorm, Op::SiluMul, Op::Residual, Op::OutputNorm})
    ew_flops += cost[op].flops;
  PassTime t;
  t.flops = all.flops;
  t.bytes = cost.dram_bytes();
  // The engine runs every matmul job, the element-wise ops and attention one
  // after the other, so each job is bound by its own roof and the pass takes
  // the sum: a single max over the pass would let one job's bytes hide under
  // another's FLOPs (a prefill's LM head, one token's logits, streams the
  // whole vocabulary's weights while the layers before it were
  // compute-bound), and attention's FLOPs under the weights' bytes.
  // The weight bytes outside the matmuls (the embedding rows looked up, norm
  // gains) are read by the element-wise jobs.
  // A pass reads its weights and KV once; when they fit in the caches, the
  // next pass finds them there (decode of a small model on a large-L3 CPU),
  // and every byte of it is read at the probe's rate for a working set that
  // size.
  const double bytes_per_s = m.bytes_per_s * m.read_speedup(t.bytes);
  const double ew_compute = ew_flops / m.elementwise_rate();
  double other_bytes = all.weight_bytes;
  double dense_compute = ew_compute, dense_memory = 0, dense = 0;
  for (const MatmulJob& job : matmul_jobs(c)) {
    double flops = 0, bytes = 0;
    for (size_t i = 0; i < job.n_ops; ++i) {
      flops += cost[job.ops[i]].flops;
      bytes += cost[job.ops[i]].weight_bytes;
    }
    other_bytes -= bytes;
    // Tokens through each of the job's calls: its FLOPs are 2 per weight
    // per token. Each token's input is converted once per call, and every
    // output row's sum is scaled and stored.
    const double tokens = flops / (2.0 * job.rows * job.cols);
    const double fixed = tokens * (job.calls * job.cols * m.matmul_input_s + job.rows * m.matmul_output_s);
    const double compute = flops / m.flops + fixed;
    const double memory = bytes / bytes_per_s + job.rows * m.row_s + job.calls * m.call_s;
    dense += m.reads_hide_arithmetic ? std::max(compute, memory) : memory + extra_tokens_s(compute, tokens);
    dense_compute += compute;
    dense_memory += memory;
  }
  const double other_memory = std::max(0.0, other_bytes) / bytes_per_s;
  dense += std::max(ew_compute, other_memory);
  dense_memory += other_memory;
  // The engine's attention tasks (kernels::attend_batch), handed out
  // dynamically: one per (token, KV head); a batch with fewer than 2 per
  // thread splits each into chunks of kAttnChunk positions (cost.h). The
  // slowest of n threads runs ceil(tasks / n) of them, not tasks / n
  // (decode at position 100: 3 tasks on 2 threads, 2 against 1.5).
  const double items = a.tokens * double(c.n_head_kv);  // (token, KV head) per layer
  double tasks = items;
  if (m.threads > 0 && tasks < 2.0 * m.threads) tasks *= std::ceil(double(a.context) / double(kAttnChunk));
  const double tail = m.threads > 0 ? std::ceil(tasks / m.threads) / (tasks / m.threads) : 1.0;
  const bool one_token = a.one_token;
  // A many-token pass pays a fixed cost per (token, KV head) task besides its
  // FLOPs (the probe fits both from two chunk lengths); the one-token rate
  // was measured on the decode shape itself.
  const double task_s = one_token ? 0.0 : items * double(c.n_layer) * m.attention_task_s;
  const double attn_compute =
      (attn_flops / (one_token ? m.attention_decode_rate() : m.attention_rate()) + task_s) * (attn_flops > 0 ? tail : 1.0);
  const double attn_memory = all.kv_bytes / bytes_per_s;
  t.dense_s = dense;
  t.attention_s = std::max(attn_compute, attn_memory);
  t.compute_s = dense_compute + attn_compute;
  t.memory_s = dense_memory + attn_memory;
  t.overhead_s = double(c.n_layer) * m.layer_overhead_s;
  t.seconds = t.dense_s + t.attention_s + t.overhead_s;
  t.bound = t.compute_s >= t.memory_s ? Bound::Compute : Bound::Memory;
  return t;
}

Precision dense_precision(const Hardware& hw, const NumberFormat& weights) {
  return hw.kind == HwKind::Cpu && weights.integer && hw.int8 ? Precision::INT8 : weights.compute;
}

Efficiency efficiency_for(const Hardware& hw, std::string_view weights, std::string_view kv, const model::Config& c) {
  const MatmulRate* mm = hw.kernels ? hw.kernels->find_matmul(weights) : nullptr;
  const std::optional<AttentionRate> at =
      hw.kernels ? hw.kernels->attention_for_group(kv, c.head_dim, c.gqa_group()) : std::nullopt;
  if (!mm || !at) return {};
  // kvlab's layer runs 6 thread-pool jobs besides its 4 matmul jobs and its
  // attention: 2 RMSNorms, RoPE, SiLU·up, 2 residual adds (model/model.cpp).
  // Their cost per job counts once per layer even in a decode step, where
  // each job is one short task; the element-wise rate covers their work.
  constexpr double kOtherJobsPerLayer = 6;
  auto fraction = [](double measured, double peak) { return std::min(1.0, measured / peak); };
  Efficiency e;
  e.bandwidth = fraction(mm->gemv_bytes_per_s, hw.mem_bw);
  e.row_s = mm->gemv_row_s;
  e.call_s = mm->gemv_call_s;
  e.matmul_input_s = mm->gemm_input_s;
  e.matmul_output_s = mm->gemm_output_s;
  e.compute = fraction(mm->gemm_ops_per_s, hw.compute_peak(dense_precision(hw, weight_format(weights)), nullptr));
  const double attention_peak = hw.compute_peak(kv_format(kv).compute, nullptr);
  e.attention = fraction(at->prefill_flops_per_s, attention_peak);
  e.attention_decode = fraction(at->decode_flops_per_s, attention_peak);
  e.attention_task_s = at->prefill_task_s;
  e.elementwise = fraction(hw.kernels->elementwise_flops_per_s, hw.compute_peak(Precision::FP32, nullptr));
  e.threads = hw.kernels->threads;
  e.bandwidth_working_set_bytes = hw.kernels->gemv_working_set_bytes;
  e.layer_overhead_s = kOtherJobsPerLayer * hw.kernels->dispatch_s;
  e.source = "measured by kvlab probe (" + std::string(weights) + " matmul, " + std::string(kv) +
             " attention at head_dim " + std::to_string(at->head_dim) + " in groups of " +
             std::to_string(at->heads) + ", " +
             std::to_string(hw.kernels->threads) + " threads)";
  return e;
}

std::optional<int64_t> nocache_crossover(const model::Config& c, const Pass& shape, const Machine& m) {
  auto compute_bound = [&](int64_t tokens) {
    Pass p = shape;
    p.new_tokens = tokens;
    p.past = 0;
    return time_pass(c, p, m).bound == Bound::Compute;
  };
  // FLOPs grow like T·2N + T², bytes like W + T·kv: intensity rises with T,
  // so the first compute-bound T can be found by bisection.
  if (!compute_bound(kCrossoverLimit)) return std::nullopt;
  int64_t lo = 1, hi = kCrossoverLimit;  // answer in [lo, hi]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (compute_bound(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo - 1;  // position p is fed with T = p + 1 tokens
}

Simulation simulate(const std::string& model_id, const model::Config& model, const Hardware& hw,
                    const SimOptions& opt) {
  if (opt.prompt < 1) throw Error("--prompt must be at least 1 token");
  if (opt.gen < 0) throw Error("--gen must not be negative");
  if (opt.batch < 1) throw Error("--batch must be at least 1");
  if (opt.prompt + opt.gen > kMaxPositions)
    throw Error("prompt + gen must not exceed " + std::to_string(kMaxPositions) + " positions");
  if (!opt.with_cache && !opt.without_cache) throw Error("simulate needs at least one mode (with or without cache)");
  const NumberFormat& wf = weight_format(opt.weights);
  const NumberFormat& kf = kv_format(opt.kv);
  if (opt.weight_bits && !(*opt.weight_bits > 0 && *opt.weight_bits <= 32))
    throw Error("bits per weight must be in (0, 32]");

  Simulation s;
  s.model_id = model_id;
  s.model = model;
  s.hw = hw;
  s.opt = opt;
  s.weight_bits = opt.weight_bits.value_or(wf.bits);
  s.kv_bits = kf.bits;
  s.machine = make_machine(hw, opt.compute.value_or(dense_precision(hw, wf)), opt.eff, kf.compute);
  check_layout(model, opt.layout);
  const Layout& layout = opt.layout;

  const Pass shape = pass_shape(s);
  Pass prefill = shape;
  prefill.new_tokens = opt.prompt;
  s.prefill = time_layout_pass(model, prefill, s.machine, layout);

  s.total_cached_s = s.total_naive_s = s.prefill.seconds;
  s.steps.reserve(size_t(opt.gen));
  for (int64_t i = 0; i < opt.gen; ++i) {
    Step st;
    st.position = opt.prompt + i;
    if (opt.with_cache) {
      Pass p = shape;
      p.new_tokens = 1;
      p.past = st.position;
      st.cached = time_layout_pass(model, p, s.machine, layout);
      s.total_cached_s += st.cached.seconds;
    }
    if (opt.without_cache) {
      Pass p = shape;
      p.new_tokens = st.position + 1;
      st.naive = time_layout_pass(model, p, s.machine, layout);
      s.total_naive_s += st.naive.seconds;
    }
    s.steps.push_back(st);
  }

  s.weight_bytes = weight_memory_bytes(model, s.weight_bits / 8.0);
  s.kv_bytes_per_token = kv_bytes_per_token(model, s.kv_bits / 8.0);
  s.kv_bytes_final = kv_cache_bytes(model, s.kv_bits / 8.0, double(opt.prompt + opt.gen)) * double(opt.batch);
  const MemoryShape mem{s.weight_bits / 8.0, s.kv_bits / 8.0, activation_bytes(s.machine.precision),
                        opt.prompt + opt.gen, opt.batch, opt.prompt};
  s.memory = device_memory(model, layout, mem, hw.mem_bytes);
  s.fits = s.memory.fits();
  if (!s.fits) s.suggestion = smallest_fit(model, layout, mem, opt.weights, hw.mem_bytes);
  // Where a device's own work turns compute-bound; the links do not move it.
  s.crossover = nocache_crossover(tp_shard(model, layout.tp), shape, s.machine);
  return s;
}

}  // namespace kvlab::perf
