#include "perf/simulate.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "perf/units.h"

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

}  // namespace

Machine make_machine(const Hardware& hw, Precision wanted, const Efficiency& eff) {
  check_fraction(eff.bandwidth, "bandwidth efficiency");
  check_fraction(eff.compute, "compute efficiency");
  if (!(eff.layer_overhead_s >= 0 && eff.layer_overhead_s < 1))
    throw Error("per-layer overhead must be in [0, 1) s, got " + fmt_num(eff.layer_overhead_s));
  Machine m;
  m.peak_flops = hw.compute_peak(wanted, &m.precision);
  m.peak_bytes_per_s = hw.mem_bw;
  m.flops = m.peak_flops * eff.compute;
  m.bytes_per_s = m.peak_bytes_per_s * eff.bandwidth;
  m.layer_overhead_s = eff.layer_overhead_s;
  return m;
}

PassTime time_pass(const model::Config& c, const Pass& p, const Machine& m) {
  const Cost cost = forward_cost(c, p);
  PassTime t;
  t.flops = cost.flops();
  t.bytes = cost.dram_bytes();
  t.compute_s = t.flops / m.flops;
  t.memory_s = t.bytes / m.bytes_per_s;
  t.overhead_s = double(c.n_layer) * m.layer_overhead_s;
  t.seconds = std::max(t.compute_s, t.memory_s) + t.overhead_s;
  t.bound = bound_of(t.flops, t.bytes, m.flops, m.bytes_per_s);
  return t;
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
  s.machine = make_machine(hw, opt.compute.value_or(wf.compute), opt.eff);

  const Pass shape = pass_shape(s);
  Pass prefill = shape;
  prefill.new_tokens = opt.prompt;
  s.prefill = time_pass(model, prefill, s.machine);

  s.total_cached_s = s.total_naive_s = s.prefill.seconds;
  s.steps.reserve(size_t(opt.gen));
  for (int64_t i = 0; i < opt.gen; ++i) {
    Step st;
    st.position = opt.prompt + i;
    if (opt.with_cache) {
      Pass p = shape;
      p.new_tokens = 1;
      p.past = st.position;
      st.cached = time_pass(model, p, s.machine);
      s.total_cached_s += st.cached.seconds;
    }
    if (opt.without_cache) {
      Pass p = shape;
      p.new_tokens = st.position + 1;
      st.naive = time_pass(model, p, s.machine);
      s.total_naive_s += st.naive.seconds;
    }
    s.steps.push_back(st);
  }

  s.weight_bytes = weight_memory_bytes(model, s.weight_bits / 8.0);
  s.kv_bytes_per_token = kv_bytes_per_token(model, s.kv_bits / 8.0);
  s.kv_bytes_final = s.kv_bytes_per_token * double(opt.prompt + opt.gen) * double(opt.batch);
  s.fits = s.weight_bytes + s.kv_bytes_final <= hw.mem_bytes;
  s.crossover = nocache_crossover(model, shape, s.machine);
  return s;
}

}  // namespace kvlab::perf
