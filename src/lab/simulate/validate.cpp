#include "lab/simulate/validate.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/parse_json.h"
#include "lab/report/units.h"
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
    m.model = str(e, where, "model");
    m.weights = str(e, where, "weights");
    if (e.contains("kv")) m.kv = str(e, where, "kv");
    m.metric = str(e, where, "metric");
    if (m.metric != "decode_tok_s" && m.metric != "prefill_tok_s")
      throw Error(where + ": field 'metric' must be \"decode_tok_s\" or \"prefill_tok_s\"");
    m.prompt = count(e, where, "prompt", 1);
    m.gen = m.metric == "decode_tok_s" ? count(e, where, "gen", 1) : 0;
    m.batch = e.contains("batch") ? count(e, where, "batch", 1) : 1;
    if (!e.contains("measured") || !e["measured"].is_number() || !(e["measured"].get<double>() > 0))
      throw Error(where + ": field 'measured' must be a positive number (tok/s)");
    m.measured = e["measured"].get<double>();
    m.conditions = str(e, where, "conditions");
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

std::vector<ValidationRow> validate(const std::vector<Measurement>& ms, const Efficiency& eff) {
  std::vector<ValidationRow> rows;
  for (const Measurement& m : ms) {
    const ResolvedModel model = resolve_model(m.model);
    const Hardware hw = find_hardware(m.hardware);
    SimOptions opt;
    opt.prompt = m.prompt;
    opt.gen = m.gen;
    opt.batch = m.batch;
    opt.weights = m.weights;
    opt.kv = m.kv;
    opt.eff = eff;
    opt.without_cache = false;
    const Simulation s = simulate(model.id, model.config, hw, opt);
    ValidationRow r{m, 0, 0, s.prefill.bound};
    if (m.metric == "prefill_tok_s") {
      r.predicted = double(m.prompt) / s.prefill.seconds;
    } else {
      r.predicted = double(s.steps.size()) / (s.total_cached_s - s.prefill.seconds);
      r.bound = s.steps.back().cached.bound;
    }
    r.ratio = r.predicted / m.measured;
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string render_validation(const std::vector<ValidationRow>& rows, const Efficiency& eff, Format f) {
  if (f == Format::Json) {
    json out = json::array();
    for (const ValidationRow& r : rows)
      out.push_back({{"id", r.m.id},
                     {"engine", r.m.engine},
                     {"hardware", r.m.hardware},
                     {"model", r.m.model},
                     {"weights", r.m.weights},
                     {"metric", r.m.metric},
                     {"measured_tok_s", r.m.measured},
                     {"predicted_tok_s", r.predicted},
                     {"ratio", r.ratio},
                     {"bound", bound_name(r.bound)},
                     {"source", r.m.source},
                     {"url", r.m.url}});
    return json{{"efficiency",
                 {{"bandwidth", eff.bandwidth},
                  {"compute", eff.compute},
                  {"layer_overhead_us", eff.layer_overhead_s * 1e6}}},
                {"rows", out}}
               .dump(2) +
           "\n";
  }
  std::ostringstream o;
  if (f == Format::Csv) {
    o << "id,engine,hardware,model,weights,metric,measured_tok_s,predicted_tok_s,ratio,bound\n";
    for (const ValidationRow& r : rows)
      o << r.m.id << "," << r.m.engine << "," << r.m.hardware << "," << r.m.model << "," << r.m.weights << ","
        << r.m.metric << "," << r.m.measured << "," << fmt_num(r.predicted, 4) << "," << fmt_num(r.ratio, 3) << ","
        << bound_name(r.bound) << "\n";
    return o.str();
  }
  o << "Efficiencies: bandwidth " << eff.bandwidth << ", compute " << eff.compute << ", overhead "
    << fmt_seconds(eff.layer_overhead_s) << " per layer (the defaults; nothing tuned per row).\n\n";
  o << "| id | engine | hardware | model | weights | metric | measured tok/s | predicted tok/s | predicted / "
       "measured | bound |\n|---|---|---|---|---|---|---|---|---|---|\n";
  double log_sum = 0;
  for (const ValidationRow& r : rows) {
    o << "| " << r.m.id << " | " << r.m.engine << " | " << r.m.hardware << " | " << r.m.model << " | " << r.m.weights
      << " | " << (r.m.metric == "decode_tok_s" ? "decode" : "prefill") << " | " << fmt_num(r.m.measured, 4) << " | "
      << fmt_num(r.predicted, 4) << " | " << fmt_num(r.ratio, 3) << " | " << bound_name(r.bound) << " |\n";
    log_sum += std::log(r.ratio);
  }
  if (!rows.empty())
    o << "\nGeometric mean of predicted / measured: " << fmt_num(std::exp(log_sum / double(rows.size())), 3) << " over "
      << rows.size() << " measurements.\n";
  return o.str();
}

}  // namespace kvlab::perf
