// Rendering of a Simulation (lab/simulate/simulate.h) as md, json or csv.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/error.h"
#include "lab/report/report.h"
#include "lab/report/units.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/simulate.h"

namespace kvlab::perf {

namespace {

using nlohmann::json;

double tok_s(const PassTime& t) { return t.seconds > 0 ? 1.0 / t.seconds : 0.0; }

std::string pass_cell(const PassTime& t) {
  return fmt_seconds(t.seconds) + " = " + fmt_num(tok_s(t)) + " tok/s, " + std::string(bound_name(t.bound));
}

double mean_tok_s(const Simulation& s, bool cached) {
  const double total = (cached ? s.total_cached_s : s.total_naive_s) - s.prefill.seconds;
  return total > 0 ? double(s.steps.size()) / total : 0.0;
}

// Step indices shown in the md table: first, ~12 log-spaced, the crossover, last.
std::vector<size_t> sampled_steps(const Simulation& s) {
  std::set<size_t> idx;
  const size_t n = s.steps.size();
  if (n == 0) return {};
  for (int k = 0; k <= 12; ++k) idx.insert(std::min(n - 1, size_t(std::llround(std::pow(double(n), k / 12.0))) - 1));
  if (s.crossover && *s.crossover >= s.opt.prompt && *s.crossover < s.opt.prompt + int64_t(n))
    idx.insert(size_t(*s.crossover - s.opt.prompt));
  idx.insert(n - 1);
  return {idx.begin(), idx.end()};
}

std::string crossover_text(const Simulation& s) {
  if (!s.opt.without_cache) return "";
  if (!s.crossover)
    return "Without the cache, decode stays memory-bound at every position up to 2^26 on this hardware.\n";
  const int64_t p = *s.crossover;
  std::string where;
  if (p < s.opt.prompt)
    where = "before the first decode step (the prompt is " + std::to_string(s.opt.prompt) +
            " tokens), so every no-cache step is compute-bound";
  else if (p < s.opt.prompt + s.opt.gen)
    where = "within this run";
  else
    where = "beyond this run's last position (" + std::to_string(s.opt.prompt + s.opt.gen - 1) + ")";
  return "Without the cache, decode crosses from memory-bound to compute-bound at position " + std::to_string(p) +
         " (recomputing " + std::to_string(p + 1) + " tokens per step, arithmetic intensity reaches the ridge of " +
         fmt_num(s.machine.flops / s.machine.bytes_per_s) + " FLOP/byte), " + where + ".\n";
}

// The heading and the first half of the inputs table: the model, its weights
// and KV cache, and how matmuls and memory reads are priced.
void render_inputs_md(std::ostringstream& o, const Simulation& s) {
  o << "## Simulation: " << s.model_id << " on " << s.hw.name << "\n\n";
  o << "| input | value |\n|---|---|\n";
  o << "| model | " << s.model_id << ", " << describe_params(s.model) << " parameters, " << s.model.n_layer
    << " layers, " << s.model.n_head << "/" << s.model.n_head_kv << " query/KV heads";
  if (s.model.is_moe()) o << ", FFN " << describe_ffn(s.model);
  o << " |\n";
  o << "| weights | " << s.opt.weights << ", " << fmt_num(s.weight_bits) << " bits/weight, "
    << fmt_bytes(s.weight_bytes) << " |\n";
  o << "| KV cache | " << s.opt.kv << ", " << fmt_bytes(s.kv_bytes_per_token) << " per position per sequence |\n";
  const Layout& l = s.opt.layout;
  if (l.devices() > 1)
    o << "| devices | tp " << l.tp << " x pp " << l.pp << " = " << l.devices() << " x " << s.hw.id << " over "
      << l.link->name << " (" << fmt_bandwidth(l.link->bytes_per_s) << " per direction, "
      << fmt_seconds(l.link->hop_latency_s) << " per hop); every time below is one device's share of the pass plus "
      << "the links' |\n";
  o << "| batch x (prompt + gen) | " << s.opt.batch << " x (" << s.opt.prompt << " + " << s.opt.gen << ") |\n";
  o << "| compute priced | " << precision_name(s.machine.precision) << " " << fmt_flops(s.machine.peak_flops)
    << " dense x " << fmt_num(s.opt.eff.compute, 2) << " = " << fmt_flops(s.machine.flops);
  if (s.machine.matmul_input_s > 0 || s.machine.matmul_output_s > 0)
    o << " + per token, " << fmt_seconds(s.machine.matmul_input_s) << " x " << fmt_num(matmul_inputs(s.model))
      << " input columns + " << fmt_seconds(s.machine.matmul_output_s) << " x " << fmt_num(matmul_rows(s.model))
      << " output rows of the matmuls";
  o << " |\n";
  o << "| bandwidth priced | " << fmt_bandwidth(s.machine.peak_bytes_per_s) << " x " << fmt_num(s.opt.eff.bandwidth, 2)
    << " = " << fmt_bandwidth(s.machine.bytes_per_s) << " |\n";
  if (!s.machine.read_bw_by_size.empty() && !s.steps.empty()) {
    const PassTime &first = s.steps.front().cached, &last = s.steps.back().cached;
    auto speedup = [&](const PassTime& t) {
      return "x" + fmt_num(s.machine.read_speedup(t.bytes), 2) + " for " + fmt_bytes(t.bytes);
    };
    o << "| working set in cache | cached steps read their weights + KV from cache when they fit: " << speedup(first)
      << " (first step), " << speedup(last)
      << " (last), against the working set the bandwidth was measured over, from kvlab probe's read bandwidth by "
         "working-set size |\n";
  }
  if (s.opt.eff.row_s > 0 || s.opt.eff.call_s > 0)
    o << "| per weight row, per matmul | " << fmt_seconds(s.opt.eff.row_s) << " x " << fmt_num(matmul_rows(s.model))
      << " rows + " << fmt_seconds(s.opt.eff.call_s) << " x " << fmt_num(matmul_calls(s.model)) << " matmuls = "
      << fmt_seconds(s.opt.eff.row_s * matmul_rows(s.model) + s.opt.eff.call_s * matmul_calls(s.model))
      << " per memory-bound pass |\n";
}

// The rest of the inputs table: attention, element-wise ops, per-layer
// overhead, and where the efficiencies and the hardware figures come from.
void render_attention_and_sources_md(std::ostringstream& o, const Simulation& s) {
  o << "| attention priced | " << precision_name(s.machine.attention_precision) << " "
    << fmt_flops(s.machine.attention_peak_flops) << " x " << fmt_num(s.opt.eff.attention_or_compute(), 2) << " = "
    << fmt_flops(s.machine.attention_rate());
  if (s.machine.attention_task_s > 0)
    o << " + " << fmt_seconds(s.machine.attention_task_s) << " per (token, KV head) of a many-token pass";
  if (s.machine.attention_decode_rate() != s.machine.attention_rate())
    o << "; one token per sequence: x " << fmt_num(s.opt.eff.attention_decode_or_attention(), 2) << " = "
      << fmt_flops(s.machine.attention_decode_rate());
  if (s.machine.threads > 0) o << "; split over " << s.machine.threads << " threads by (token, head)";
  o << " |\n";
  if (s.opt.eff.elementwise)
    o << "| element-wise priced | fp32 x " << fmt_num(*s.opt.eff.elementwise, 2) << " = "
      << fmt_flops(s.machine.elementwise_rate()) << " |\n";
  o << "| overhead | " << fmt_seconds(s.opt.eff.layer_overhead_s)
    << " per layer = " << fmt_seconds(s.prefill.overhead_s) << " per pass |\n";
  o << "| efficiencies | " << s.opt.eff.source << " |\n";
  o << "| hardware source | " << s.hw.source << " |\n\n";
}

std::string suggestion_text(const Simulation& s) {
  if (!s.suggestion)
    return "no layout of up to " + std::to_string(kMaxSuggestedTp) + " devices per stage fits it in any weight format";
  const FitSuggestion& f = *s.suggestion;
  std::string flags = "--tp " + std::to_string(f.tp);
  if (s.opt.layout.pp > 1) flags += " --pp " + std::to_string(s.opt.layout.pp);
  std::string why;
  if (f.weights != s.opt.weights) {
    flags = "--weights " + f.weights + " " + flags;
    why = " (not even " + std::to_string(kMaxSuggestedTp) + " devices per stage hold " + s.opt.weights + ")";
  }
  return "the smallest layout that fits is " + flags + why + ", " + fmt_bytes(f.memory.total()) + " per device";
}

// What the busiest device holds against what it has, and what to do when it
// does not fit.
void render_memory_md(std::ostringstream& o, const Simulation& s) {
  const DeviceMemory& m = s.memory;
  o << (s.opt.layout.devices() > 1 ? "Memory per device" : "Memory") << ": weights " << fmt_bytes(m.weights)
    << " + KV " << fmt_bytes(m.kv) << " + activations " << fmt_bytes(m.activations) << " = "
    << fmt_bytes(m.total()) << " of " << fmt_bytes(m.usable) << " usable (" << fmt_num(kUsableMemoryFraction * 100)
    << "% of " << fmt_bytes(s.hw.mem_bytes) << "): ";
  if (s.fits)
    o << "fits.\n\n";
  else
    o << "does NOT fit; " << suggestion_text(s)
      << ". The times below are for the layout asked for, as if it fitted.\n\n";
}

// Whether it fits, then TTFT, decode steps and total, with and without the
// KV cache, and where decode turns compute-bound.
void render_summary_md(std::ostringstream& o, const Simulation& s) {
  render_memory_md(o, s);

  const bool c = s.opt.with_cache, u = s.opt.without_cache;
  o << "| | " << (c ? "with KV cache |" : "") << (u ? " without KV cache |" : "") << "\n|---|" << (c ? "---|" : "")
    << (u ? "---|" : "") << "\n";
  auto row = [&](const std::string& label, const std::string& cached, const std::string& naive) {
    o << "| " << label << " | " << (c ? cached + " |" : "") << (u ? " " + naive + " |" : "") << "\n";
  };
  const std::string ttft = fmt_seconds(s.prefill.seconds) + ", " + std::string(bound_name(s.prefill.bound));
  row("TTFT (prefill of " + std::to_string(s.opt.prompt) + " tokens)", ttft, ttft);
  if (!s.steps.empty()) {
    const Step& first = s.steps.front();
    const Step& last = s.steps.back();
    row("first decode step (position " + std::to_string(first.position) + ")", pass_cell(first.cached),
        pass_cell(first.naive));
    row("last decode step (position " + std::to_string(last.position) + ")", pass_cell(last.cached),
        pass_cell(last.naive));
    if (first.cached.comm_s > 0)
      o << "| of which on the links | " << (c ? fmt_seconds(first.cached.comm_s) + " |" : "")
        << (u ? " " + fmt_seconds(first.naive.comm_s) + " |" : "") << "\n";
    row("average over " + std::to_string(s.steps.size()) + " steps", fmt_num(mean_tok_s(s, true)) + " tok/s",
        fmt_num(mean_tok_s(s, false)) + " tok/s");
  }
  row("total time", fmt_seconds(s.total_cached_s), fmt_seconds(s.total_naive_s));
  if (s.opt.batch > 1)
    o << "\ntok/s are per sequence; the batch of " << s.opt.batch << " produces " << s.opt.batch
      << " times as many tokens per step.\n";
  o << "\n" << crossover_text(s);
  if (c && !s.steps.empty()) {
    const PassTime& t = s.steps.back().cached;
    o << "With the cache, the last step reads " << (s.opt.layout.devices() > 1 ? "on each device " : "")
      << fmt_bytes(t.bytes) << " (weights + KV) for "
      << fmt_flop_count(t.flops) << ": " << fmt_num(t.flops / t.bytes) << " FLOP/byte against a ridge of "
      << fmt_num(s.machine.flops / s.machine.bytes_per_s) << ", " << bound_name(t.bound) << ".\n";
  }
}

void render_positions_md(std::ostringstream& o, const Simulation& s) {
  if (s.steps.empty()) return;
  const bool c = s.opt.with_cache, u = s.opt.without_cache;
  o << "\n### Per position (sampled; -o csv lists every step)\n\n| position |"
    << (c ? " cached ms | cached tok/s | bound |" : "") << (u ? " no-cache ms | no-cache tok/s | bound |" : "")
    << "\n|---|" << (c ? "---|---|---|" : "") << (u ? "---|---|---|" : "") << "\n";
  for (size_t i : sampled_steps(s)) {
    const Step& st = s.steps[i];
    o << "| " << st.position << " |";
    if (c)
      o << " " << fmt_num(st.cached.seconds * 1e3) << " | " << fmt_num(tok_s(st.cached)) << " | "
        << bound_name(st.cached.bound) << " |";
    if (u)
      o << " " << fmt_num(st.naive.seconds * 1e3) << " | " << fmt_num(tok_s(st.naive)) << " | "
        << bound_name(st.naive.bound) << " |";
    o << "\n";
  }
}

std::string render_md(const Simulation& s) {
  std::ostringstream o;
  render_inputs_md(o, s);
  render_attention_and_sources_md(o, s);
  render_summary_md(o, s);
  render_positions_md(o, s);
  return o.str();
}

json sized_bandwidth_json(const std::vector<SizedBandwidth>& curve) {
  json a = json::array();
  for (const SizedBandwidth& b : curve) a.push_back({{"bytes", b.bytes}, {"bytes_per_s", b.bytes_per_s}});
  return a;
}

json pass_json(const PassTime& t) {
  return {{"ms", t.seconds * 1e3},
          {"tok_s", tok_s(t)},
          {"flops", t.flops},
          {"bytes", t.bytes},
          {"compute_ms", t.compute_s * 1e3},
          {"memory_ms", t.memory_s * 1e3},
          {"dense_ms", t.dense_s * 1e3},
          {"attention_ms", t.attention_s * 1e3},
          {"overhead_ms", t.overhead_s * 1e3},
          {"comm_ms", t.comm_s * 1e3},
          {"bound", bound_name(t.bound)}};
}

json device_memory_json(const DeviceMemory& m) {
  return {{"weight_bytes", m.weights},
          {"kv_bytes", m.kv},
          {"activation_bytes", m.activations},
          {"total_bytes", m.total()},
          {"usable_bytes", m.usable}};
}

json layout_json(const Layout& l) {
  json j = {{"tp", l.tp}, {"pp", l.pp}, {"devices", l.devices()}, {"link", nullptr}};
  if (l.link)
    j["link"] = {{"id", l.link->id},
                 {"name", l.link->name},
                 {"bytes_per_s", l.link->bytes_per_s},
                 {"hop_latency_us", l.link->hop_latency_s * 1e6},
                 {"source", l.link->source}};
  return j;
}

std::string render_json(const Simulation& s) {
  json steps = json::array();
  for (const Step& st : s.steps) {
    json j = {{"position", st.position}};
    if (s.opt.with_cache) j["cached"] = pass_json(st.cached);
    if (s.opt.without_cache) j["no_cache"] = pass_json(st.naive);
    steps.push_back(std::move(j));
  }
  json j = {
      {"model", {{"id", s.model_id}, {"parameters", param_count(s.model).total()}, {"layers", s.model.n_layer}}},
      {"hardware", {{"id", s.hw.id}, {"name", s.hw.name}, {"source", s.hw.source}, {"memory_bytes", s.hw.mem_bytes}}},
      {"options",
       {{"prompt", s.opt.prompt},
        {"gen", s.opt.gen},
        {"batch", s.opt.batch},
        {"weights", s.opt.weights},
        {"weight_bits", s.weight_bits},
        {"kv", s.opt.kv},
        {"eff_bandwidth", s.opt.eff.bandwidth},
        {"eff_compute", s.opt.eff.compute},
        {"eff_attention", s.opt.eff.attention_or_compute()},
        {"eff_attention_decode", s.opt.eff.attention_decode_or_attention()},
        {"attention_task_us", s.opt.eff.attention_task_s * 1e6},
        {"eff_elementwise", s.opt.eff.elementwise_or_compute()},
        {"threads", s.opt.eff.threads},
        {"row_us", s.opt.eff.row_s * 1e6},
        {"call_us", s.opt.eff.call_s * 1e6},
        {"matmul_input_ns", s.opt.eff.matmul_input_s * 1e9},
        {"matmul_output_ns", s.opt.eff.matmul_output_s * 1e9},
        {"layer_overhead_us", s.opt.eff.layer_overhead_s * 1e6},
        {"eff_source", s.opt.eff.source}}},
      {"machine",
       {{"precision", precision_name(s.machine.precision)},
        {"peak_flops", s.machine.peak_flops},
        {"peak_bytes_per_s", s.machine.peak_bytes_per_s},
        {"flops", s.machine.flops},
        {"bytes_per_s", s.machine.bytes_per_s},
        {"read_bw_by_size", sized_bandwidth_json(s.machine.read_bw_by_size)},
        {"bandwidth_working_set_bytes", s.machine.bandwidth_working_set_bytes},
        {"attention_precision", precision_name(s.machine.attention_precision)},
        {"attention_flops", s.machine.attention_rate()},
        {"attention_decode_flops", s.machine.attention_decode_rate()},
        {"elementwise_flops", s.machine.elementwise_rate()},
        {"ridge_flop_per_byte", s.machine.flops / s.machine.bytes_per_s}}},
      {"layout", layout_json(s.opt.layout)},
      {"memory",
       {{"weight_bytes", s.weight_bytes},
        {"kv_bytes_per_token", s.kv_bytes_per_token},
        {"kv_bytes_final", s.kv_bytes_final},
        {"per_device", device_memory_json(s.memory)},
        {"fits", s.fits},
        {"suggestion", s.suggestion ? json{{"tp", s.suggestion->tp},
                                           {"pp", s.opt.layout.pp},
                                           {"weights", s.suggestion->weights},
                                           {"per_device", device_memory_json(s.suggestion->memory)}}
                                    : json(nullptr)}}},
      {"ttft_ms", s.prefill.seconds * 1e3},
      {"prefill", pass_json(s.prefill)},
      {"crossover_position", s.crossover ? json(*s.crossover) : json(nullptr)},
      {"steps", steps}};
  if (s.opt.with_cache) j["cached"] = {{"total_s", s.total_cached_s}, {"mean_tok_s", mean_tok_s(s, true)}};
  if (s.opt.without_cache) j["no_cache"] = {{"total_s", s.total_naive_s}, {"mean_tok_s", mean_tok_s(s, false)}};
  return j.dump(2) + "\n";
}

std::string render_csv(const Simulation& s) {
  std::ostringstream o;
  o << "position,cached_ms,cached_tok_s,cached_bound,nocache_ms,nocache_tok_s,nocache_bound\n";
  auto cells = [&](bool on, const PassTime& t) {
    if (on)
      o << fmt_num(t.seconds * 1e3, 6) << "," << fmt_num(tok_s(t), 6) << "," << bound_name(t.bound);
    else
      o << ",,";
  };
  for (const Step& st : s.steps) {
    o << st.position << ",";
    cells(s.opt.with_cache, st.cached);
    o << ",";
    cells(s.opt.without_cache, st.naive);
    o << "\n";
  }
  return o.str();
}

}  // namespace

Format parse_format(std::string_view name, bool csv_allowed) {
  if (name == "md") return Format::Md;
  if (name == "json") return Format::Json;
  if (name == "csv" && csv_allowed) return Format::Csv;
  throw Error("unknown output format '" + std::string(name) + "' (expected md, json" + (csv_allowed ? ", csv)" : ")"));
}

std::string render_simulation(const Simulation& s, Format f) {
  switch (f) {
    case Format::Md:
      return render_md(s);
    case Format::Json:
      return render_json(s);
    case Format::Csv:
      return render_csv(s);
  }
  return {};
}

std::string render_simulation_summary(const Simulation& s) {
  std::ostringstream o;
  o << "Simulated " << s.model_id << " on " << s.hw.name << " (" << s.opt.weights << " weights, prompt " << s.opt.prompt
    << ", " << s.opt.gen << " steps): TTFT " << fmt_seconds(s.prefill.seconds) << ".\n";
  if (!s.steps.empty()) {
    const Step& a = s.steps.front();
    const Step& b = s.steps.back();
    if (s.opt.with_cache)
      o << "  with KV cache:    " << fmt_num(tok_s(a.cached)) << " -> " << fmt_num(tok_s(b.cached))
        << " tok/s (average " << fmt_num(mean_tok_s(s, true)) << "), total " << fmt_seconds(s.total_cached_s) << "\n";
    if (s.opt.without_cache)
      o << "  without KV cache: " << fmt_num(tok_s(a.naive)) << " -> " << fmt_num(tok_s(b.naive)) << " tok/s (average "
        << fmt_num(mean_tok_s(s, false)) << "), total " << fmt_seconds(s.total_naive_s) << "\n";
  }
  o << crossover_text(s);
  return o.str();
}

}  // namespace kvlab::perf
