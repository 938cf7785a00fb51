#include "lab/simulate/validate.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/parse_json.h"
#include "lab/report/units.h"
#include "lab/simulate/layout.h"
#include "lab/simulate/model_catalog.h"

namespace kvlab::perf {

namespace {

using nlohmann::json;

std::string str(const json& e, const std::string& where, const char* key, bool required = true) {
  if (!e.contains(key)) {
    if (!required) return "";
    throw Error(where + ": field '" + key + "' missing");
  }
  if (!e[key].is_string()) throw Error(where + ": field '" + key + "' must be a string");
  return e[key].get<std::string>();
}

int64_t count(const json& e, const std::string& where, const char* key, int64_t min) {
  if (!e.contains(key) || !e[key].is_number_integer() || e[key].get<int64_t>() < min)
    throw Error(where + ": field '" + key + "' must be an integer >= " + std::to_string(min));
  return e[key].get<int64_t>();
}

int64_t optional_count(const json& e, const std::string& where, const char* key) {
  return e.contains(key) ? count(e, where, key, 1) : 1;
}

// The simulation a row describes, at efficiencies `eff`.
Simulation simulate_row(const Measurement& m, const Efficiency& eff) {
  const ResolvedModel model = resolve_model(m.model);
  const Hardware hw = find_hardware(m.hardware);
  SimOptions opt;
  opt.prompt = m.prompt;
  opt.gen = m.gen;
  opt.batch = m.batch;
  opt.weights = m.weights;
  opt.weight_bits = m.bits_per_weight;
  opt.kv = m.kv;
  opt.eff = eff;
  opt.layout = make_layout(m.tp, m.pp, "", hw);
  opt.without_cache = false;
  return simulate(model.id, model.config, hw, opt);
}

double predicted_tok_s(const Measurement& m, const Simulation& s) {
  if (!m.decode()) return double(m.prompt) / s.prefill.seconds;
  return double(s.steps.size()) / (s.total_cached_s - s.prefill.seconds);
}

// A row's time against the roofline: what the simulator prices at 100% of
// the peaks with no fixed costs (roof_s; a multi-device row's links
// included, a few percent at batch 1), what the source measured
// (measured_s: one decode step, or the TTFT), and what a fixed cost
// multiplies (units: the layers of a decode step, 1 for a prefill's
// per-request cost).
struct RowTimes {
  double roof_s = 0, units = 0, measured_s = 0;
};

RowTimes row_times(const Measurement& m, Efficiency eff) {
  eff.bandwidth = eff.compute = 1.0;
  eff.attention = eff.attention_decode = eff.elementwise = std::nullopt;
  eff.layer_overhead_s = 0;
  const Simulation s = simulate_row(m, eff);
  if (m.decode())
    return {(s.total_cached_s - s.prefill.seconds) / double(s.steps.size()), double(s.model.n_layer), 1.0 / m.measured};
  return {s.prefill.seconds, 1.0, double(m.prompt) / m.measured};
}

// measured = roof / efficiency + units · fixed, by least squares of the
// relative error over `pts`, with efficiency <= 1 and fixed >= 0 (where the
// unconstrained optimum breaks one, the constrained one lies on that bound:
// the other parameter is fitted alone there). Below kMinRowsForFixed points
// the fixed cost is not fitted and stays at `default_fixed`.
struct ClassFit {
  double efficiency = 1, fixed_s = 0;
};
constexpr size_t kMinRowsForFixed = 3;

ClassFit fit_class(const std::vector<RowTimes>& pts, double default_fixed) {
  // Relative errors: each row divided by its measured time, so a slow row
  // (a 70B model, a CPU) weighs no more than a fast one.
  double xx = 0, xu = 0, uu = 0, xy = 0, uy = 0;
  for (const RowTimes& p : pts) {
    const double x = p.roof_s / p.measured_s, u = p.units / p.measured_s;
    xx += x * x;
    xu += x * u;
    uu += u * u;
    xy += x;
    uy += u;
  }
  // The slope (1 / efficiency) alone, with the fixed cost held at b.
  auto slope_with = [&](double b) { return std::max(1.0, (xy - b * xu) / xx); };
  if (pts.size() < kMinRowsForFixed) return {1.0 / slope_with(default_fixed), default_fixed};
  const double det = xx * uu - xu * xu;
  double a = det > 0 ? (xy * uu - uy * xu) / det : 0, b = det > 0 ? (xx * uy - xu * xy) / det : -1;
  if (b < 0) {
    b = 0;
    a = slope_with(0);
  } else if (a < 1) {
    a = 1;
    b = std::max(0.0, (uy - xu) / uu);
  }
  return {1.0 / a, b};
}

// The fit of a class and metric on `pts` (none: the defaults).
ClassFit fit_or_default(const std::vector<RowTimes>& pts, bool decode, const Efficiency& eff) {
  const double default_fixed = decode ? eff.layer_overhead_s : 0.0;
  if (pts.empty()) return {decode ? eff.bandwidth : eff.compute, default_fixed};
  return fit_class(pts, default_fixed);
}

// The times of the rows of class `c` and the metric, leaving out row `skip`
// (rows.size(): none) and the rows marked as outliers.
std::vector<RowTimes> class_points(const std::vector<ValidationRow>& rows, const std::vector<RowTimes>& times,
                                   MemoryClass c, bool decode, size_t skip) {
  std::vector<RowTimes> pts;
  for (size_t j = 0; j < rows.size(); ++j)
    if (j != skip && rows[j].m.outlier.empty() && rows[j].device_class == c && rows[j].m.decode() == decode)
      pts.push_back(times[j]);
  return pts;
}

// Leave-one-out: row i's class fit uses the other rows of its class and
// metric only.
void fit_leave_one_out(std::vector<ValidationRow>& rows, const std::vector<RowTimes>& times, const Efficiency& eff) {
  for (size_t i = 0; i < rows.size(); ++i) {
    ValidationRow& r = rows[i];
    const std::vector<RowTimes> others = class_points(rows, times, r.device_class, r.m.decode(), i);
    const ClassFit f = fit_or_default(others, r.m.decode(), eff);
    r.loo_rows = int(others.size());
    r.loo_efficiency = f.efficiency;
    r.loo_fixed_s = f.fixed_s;
    const double t = times[i].roof_s / f.efficiency + times[i].units * f.fixed_s;
    r.loo_predicted = (r.m.decode() ? 1.0 : double(r.m.prompt)) / t;
    r.loo_ratio = r.loo_predicted / r.m.measured;
  }
}

std::vector<ClassFitRow> fit_all(const std::vector<ValidationRow>& rows, const std::vector<RowTimes>& times,
                                 const Efficiency& eff) {
  std::vector<ClassFitRow> out;
  for (MemoryClass c : {MemoryClass::Hbm, MemoryClass::Gddr, MemoryClass::UnifiedLpddr, MemoryClass::Ddr})
    for (bool decode : {true, false}) {
      const std::vector<RowTimes> pts = class_points(rows, times, c, decode, rows.size());
      if (pts.empty()) continue;
      const ClassFit f = fit_or_default(pts, decode, eff);
      out.push_back({c, decode, int(pts.size()), f.efficiency, f.fixed_s});
    }
  return out;
}

}  // namespace

std::vector<Measurement> parse_measurements(const std::string& json_text, const std::string& origin) {
  const json j = parse_json(json_text, origin);
  if (!j.is_object() || !j.contains("measurements") || !j["measurements"].is_array())
    throw Error(origin + ": expected an object with a 'measurements' array");
  std::vector<Measurement> out;
  for (size_t i = 0; i < j["measurements"].size(); ++i) {
    const json& e = j["measurements"][i];
    const std::string where = origin + ": measurements[" + std::to_string(i) + "]";
    if (!e.is_object()) throw Error(where + ": expected an object");
    Measurement m;
    m.id = str(e, where, "id");
    m.engine = str(e, where, "engine");
    m.source = str(e, where, "source");
    m.url = str(e, where, "url");
    m.date = str(e, where, "date", false);
    m.hardware = str(e, where, "hardware");
    m.tp = int(optional_count(e, where, "tp"));
    m.pp = int(optional_count(e, where, "pp"));
    m.model = str(e, where, "model");
    m.weights = str(e, where, "weights");
    if (e.contains("bits_per_weight")) {
      if (!e["bits_per_weight"].is_number() || !(e["bits_per_weight"].get<double>() > 0))
        throw Error(where + ": field 'bits_per_weight' must be a positive number");
      m.bits_per_weight = e["bits_per_weight"].get<double>();
    }
    if (e.contains("kv")) m.kv = str(e, where, "kv");
    m.metric = str(e, where, "metric");
    if (m.metric != "decode_tok_s" && m.metric != "prefill_tok_s")
      throw Error(where + ": field 'metric' must be \"decode_tok_s\" or \"prefill_tok_s\"");
    m.prompt = count(e, where, "prompt", 1);
    m.gen = m.metric == "decode_tok_s" ? count(e, where, "gen", 1) : 0;
    m.batch = optional_count(e, where, "batch");
    if (!e.contains("measured") || !e["measured"].is_number() || !(e["measured"].get<double>() > 0))
      throw Error(where + ": field 'measured' must be a positive number (tok/s)");
    m.measured = e["measured"].get<double>();
    m.conditions = str(e, where, "conditions");
    if (e.contains("outlier")) m.outlier = str(e, where, "outlier");
    if (e.contains("secondary")) {
      if (!e["secondary"].is_boolean()) throw Error(where + ": field 'secondary' must be true or false");
      m.secondary = e["secondary"].get<bool>();
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Measurement> load_measurements(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_measurements(ss.str(), path);
}

Validation validate(const std::vector<Measurement>& ms, const Efficiency& eff) {
  std::vector<ValidationRow> rows;
  std::vector<RowTimes> times;
  for (const Measurement& m : ms) {
    const Simulation s = simulate_row(m, eff);
    ValidationRow r;
    r.m = m;
    r.device_class = s.hw.memory_class;
    r.predicted = predicted_tok_s(m, s);
    r.ratio = r.predicted / m.measured;
    r.bound = m.decode() ? s.steps.back().cached.bound : s.prefill.bound;
    rows.push_back(std::move(r));
    times.push_back(row_times(m, eff));
  }
  fit_leave_one_out(rows, times, eff);
  std::vector<ClassFitRow> classes = fit_all(rows, times, eff);
  return {std::move(rows), std::move(classes)};
}

}  // namespace kvlab::perf
