// Rendering of the comparison with published measurements
// (lab/simulate/validate.h) as md, json or csv: every row's ratio with the
// default efficiencies and with its class's leave-one-out fit, the summary of
// each (geometric mean, rows within 0.8-1.25, the worst three), and the class
// efficiencies fitted on all rows.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lab/report/units.h"
#include "lab/simulate/validate.h"

namespace kvlab::perf {

namespace {

using nlohmann::json;

constexpr double kBandLow = 0.8, kBandHigh = 1.25;
constexpr size_t kWorstShown = 3;

std::string devices_text(const Measurement& m) {
  if (m.tp * m.pp == 1) return "1";
  std::string s = std::to_string(m.tp * m.pp) + " (";
  if (m.tp > 1) s += "tp " + std::to_string(m.tp);
  if (m.tp > 1 && m.pp > 1) s += " x ";
  if (m.pp > 1) s += "pp " + std::to_string(m.pp);
  return s + ")";
}

struct Summary {
  size_t rows = 0;
  double geomean = 0;
  size_t within = 0;
  std::vector<const ValidationRow*> worst;  // largest |log ratio| first
};

// Over the rows not marked as outliers (listed apart: they say where an
// engine, not the model, is the story).
Summary summarize(const std::vector<ValidationRow>& rows, double ValidationRow::*ratio) {
  Summary s;
  double log_sum = 0;
  for (const ValidationRow& r : rows) {
    if (!r.m.outlier.empty()) continue;
    ++s.rows;
    log_sum += std::log(r.*ratio);
    if (r.*ratio >= kBandLow && r.*ratio <= kBandHigh) ++s.within;
    s.worst.push_back(&r);
  }
  if (s.rows > 0) s.geomean = std::exp(log_sum / double(s.rows));
  std::stable_sort(s.worst.begin(), s.worst.end(), [&](const ValidationRow* a, const ValidationRow* b) {
    return std::fabs(std::log(a->*ratio)) > std::fabs(std::log(b->*ratio));
  });
  s.worst.resize(std::min(kWorstShown, s.worst.size()));
  return s;
}

std::string summary_line(const char* label, const Summary& s, double ValidationRow::*ratio) {
  std::string worst;
  for (const ValidationRow* r : s.worst)
    worst += (worst.empty() ? "" : ", ") + r->m.id + " (" + fmt_num(r->*ratio, 3) + ")";
  return std::string("- ") + label + ": geometric mean of predicted / measured " + fmt_num(s.geomean, 3) + "; " +
         std::to_string(s.within) + " of " + std::to_string(s.rows) + " within " + fmt_num(kBandLow) + "-" +
         fmt_num(kBandHigh) + "; worst: " + worst + ".\n";
}

std::string fixed_text(const ClassFitRow& f) {
  return fmt_seconds(f.fixed_s) + (f.decode ? " per layer" : " per request");
}

// Each class's parameters fitted on all of its rows of a metric.
std::string class_table_md(const std::vector<ClassFitRow>& classes) {
  std::ostringstream o;
  o << "| class | metric | rows | efficiency | fixed cost |\n|---|---|---|---|---|\n";
  for (const ClassFitRow& f : classes)
    o << "| " << memory_class_name(f.device_class) << " | " << (f.decode ? "decode (bandwidth)" : "prefill (compute)")
      << " | " << f.rows << " | " << fmt_num(f.efficiency, 2) << " | " << fixed_text(f) << " |\n";
  return o.str();
}

std::string render_md(const Validation& v, const Efficiency& eff) {
  const std::vector<ValidationRow>& rows = v.rows;
  std::ostringstream o;
  o << "Default efficiencies: bandwidth " << eff.bandwidth << ", compute " << eff.compute << ", overhead "
    << fmt_seconds(eff.layer_overhead_s)
    << " per layer, nothing tuned per row. Leave-one-out: each row is predicted from the other rows of its class "
       "(the memory its device streams from) and metric, as roofline time at 100% / efficiency + a fixed cost (per "
       "layer of a decode step, per request of a prefill), both fitted by least squares; the row itself never takes "
       "part.\n\n";
  o << "| id | engine | hardware | devices | model | weights | metric | measured tok/s | predicted, defaults | ratio "
       "| class | LOO fit: efficiency, fixed cost (rows) | predicted, LOO | ratio, LOO | bound |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ValidationRow& r : rows)
    o << "| " << r.m.id << (r.m.secondary ? " (secondary)" : "") << (r.m.outlier.empty() ? "" : " (outlier)") << " | "
      << r.m.engine << " | " << r.m.hardware << " | " << devices_text(r.m) << " | " << r.m.model << " | " << r.m.weights
      << (r.m.bits_per_weight ? " at " + fmt_num(*r.m.bits_per_weight, 3) + " bits" : "") << " | "
      << (r.m.decode() ? "decode" : "prefill") << " | " << fmt_num(r.m.measured, 4) << " | " << fmt_num(r.predicted, 4)
      << " | " << fmt_num(r.ratio, 3) << " | " << memory_class_name(r.device_class) << " | "
      << fmt_num(r.loo_efficiency, 2) << ", " << fmt_seconds(r.loo_fixed_s)
      << (r.loo_rows > 0 ? " (" + std::to_string(r.loo_rows) + ")" : " (defaults)") << " | "
      << fmt_num(r.loo_predicted, 4) << " | " << fmt_num(r.loo_ratio, 3) << " | " << bound_name(r.bound) << " |\n";
  if (rows.empty()) return o.str();
  const Summary d = summarize(rows, &ValidationRow::ratio);
  o << "\n"
    << rows.size() << " measurements; over the " << d.rows << " not marked as outliers:\n\n"
    << summary_line("defaults", d, &ValidationRow::ratio)
    << summary_line("leave-one-out", summarize(rows, &ValidationRow::loo_ratio), &ValidationRow::loo_ratio);
  for (const ValidationRow& r : rows)
    if (!r.m.outlier.empty())
      o << "- outlier " << r.m.id << " (" << fmt_num(r.ratio, 3) << " with the defaults, " << fmt_num(r.loo_ratio, 3)
        << " leave-one-out; in no fit): " << r.m.outlier << ".\n";
  o << "\nEach class fitted on all of its rows (the leave-one-out fits leave one row out):\n\n"
    << class_table_md(v.classes);
  return o.str();
}

json summary_json(const std::vector<ValidationRow>& rows, double ValidationRow::*ratio) {
  const Summary s = summarize(rows, ratio);
  json worst = json::array();
  for (const ValidationRow* r : s.worst) worst.push_back({{"id", r->m.id}, {"ratio", r->*ratio}});
  return {{"rows", s.rows}, {"geomean_ratio", s.geomean}, {"within_band", s.within}, {"worst", worst}};
}

std::string render_json(const Validation& v, const Efficiency& eff) {
  const std::vector<ValidationRow>& rows = v.rows;
  json classes = json::array();
  for (const ClassFitRow& f : v.classes)
    classes.push_back({{"class", memory_class_name(f.device_class)},
                       {"metric", f.decode ? "decode_tok_s" : "prefill_tok_s"},
                       {"rows", f.rows},
                       {"efficiency", f.efficiency},
                       {"fixed_us", f.fixed_s * 1e6}});
  json out = json::array();
  for (const ValidationRow& r : rows)
    out.push_back({{"id", r.m.id},
                   {"engine", r.m.engine},
                   {"hardware", r.m.hardware},
                   {"tp", r.m.tp},
                   {"pp", r.m.pp},
                   {"model", r.m.model},
                   {"weights", r.m.weights},
                   {"bits_per_weight", r.m.bits_per_weight ? json(*r.m.bits_per_weight) : json(nullptr)},
                   {"metric", r.m.metric},
                   {"measured_tok_s", r.m.measured},
                   {"predicted_tok_s", r.predicted},
                   {"ratio", r.ratio},
                   {"class", memory_class_name(r.device_class)},
                   {"loo_efficiency", r.loo_efficiency},
                   {"loo_fixed_us", r.loo_fixed_s * 1e6},
                   {"loo_rows", r.loo_rows},
                   {"loo_predicted_tok_s", r.loo_predicted},
                   {"loo_ratio", r.loo_ratio},
                   {"bound", bound_name(r.bound)},
                   {"secondary", r.m.secondary},
                   {"outlier", r.m.outlier.empty() ? json(nullptr) : json(r.m.outlier)},
                   {"source", r.m.source},
                   {"url", r.m.url}});
  return json{{"efficiency",
               {{"bandwidth", eff.bandwidth},
                {"compute", eff.compute},
                {"layer_overhead_us", eff.layer_overhead_s * 1e6}}},
              {"defaults", summary_json(rows, &ValidationRow::ratio)},
              {"leave_one_out", summary_json(rows, &ValidationRow::loo_ratio)},
              {"classes", classes},
              {"rows", out}}
             .dump(2) +
         "\n";
}

std::string render_csv(const std::vector<ValidationRow>& rows) {
  std::ostringstream o;
  o << "id,engine,hardware,tp,pp,model,weights,metric,measured_tok_s,predicted_tok_s,ratio,class,loo_efficiency,"
       "loo_predicted_tok_s,loo_ratio,bound\n";
  for (const ValidationRow& r : rows)
    o << r.m.id << "," << r.m.engine << "," << r.m.hardware << "," << r.m.tp << "," << r.m.pp << "," << r.m.model << ","
      << r.m.weights << "," << r.m.metric << "," << r.m.measured << "," << fmt_num(r.predicted, 4) << ","
      << fmt_num(r.ratio, 3) << "," << memory_class_name(r.device_class) << "," << fmt_num(r.loo_efficiency, 3) << ","
      << fmt_num(r.loo_predicted, 4) << "," << fmt_num(r.loo_ratio, 3) << "," << bound_name(r.bound) << "\n";
  return o.str();
}

}  // namespace

std::string render_validation(const Validation& v, const Efficiency& eff, Format f) {
  switch (f) {
    case Format::Json:
      return render_json(v, eff);
    case Format::Csv:
      return render_csv(v.rows);
    case Format::Md:
      return render_md(v, eff);
  }
  return {};
}

}  // namespace kvlab::perf
