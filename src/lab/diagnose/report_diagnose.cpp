// Rendering of a Diagnosis (lab/diagnose/diagnose.h) and a Grade (lab/diagnose/grade.h).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "lab/diagnose/diagnose.h"
#include "lab/diagnose/grade.h"
#include "lab/report/report.h"
#include "lab/report/units.h"

namespace kvlab::perf {

namespace {

using nlohmann::json;

std::string opt_percent(const std::optional<Verdict>& v, bool flops) {
  if (!v) return "-";
  return fmt_percent(flops ? v->flops_utilization : v->bw_utilization);
}

// ", split tp 4 x pp 1 over NVLink 4" for a layout of several devices.
std::string layout_text(const Layout& l) {
  if (l.devices() == 1) return "";
  return ", split tp " + std::to_string(l.tp) + " x pp " + std::to_string(l.pp) + " over " + l.link->name +
         " (MFU and MBU against " + std::to_string(l.tp) + " devices' peaks)";
}

std::string render_md(const Diagnosis& d) {
  const Observation& ob = d.in.obs;
  std::ostringstream o;
  o << "## Diagnosis: " << d.in.model_id << " (" << d.in.weights << ", " << fmt_num(d.weight_bits)
    << " bits/weight), TTFT " << fmt_seconds(ob.ttft_s) << " for " << ob.prompt_tokens << " prompt tokens, "
    << fmt_num(ob.decode_tok_s) << " tok/s decode" << (ob.kv_cache ? "" : " without KV cache")
    << (d.in.hw ? " on " + d.in.hw->name : std::string(", hardware not given")) << layout_text(d.in.layout) << "\n\n";

  o << "**Struggling phase: " << phase_name(d.struggling) << ".** TTFT " << fmt_seconds(ob.ttft_s) << " is "
    << fmt_factor(d.prefill.target_miss) << " its " << fmt_seconds(d.in.target_ttft_s) << " target; decode at "
    << fmt_num(ob.decode_tok_s) << " tok/s takes " << fmt_factor(d.decode.target_miss) << " the time of its "
    << fmt_num(d.in.target_tok_s) << " tok/s target"
    << (d.misses_target ? "." : "; both meet their targets, so this is the phase with the least headroom.") << "\n\n";
  o << "**Limiting resource: " << resource_name(d.limiting) << ".** " << d.cause << "\n\n";
  o << "**Upgrade that helps:** " << d.upgrade << "\n\n";

  o << "### Each phase against the roofline\n\n| | prefill (TTFT) | decode (one step) |\n|---|---|---|\n";
  o << "| measured | " << fmt_seconds(d.prefill.seconds) << " | " << fmt_seconds(d.decode.seconds) << " ("
    << fmt_num(ob.decode_tok_s) << " tok/s) |\n";
  o << "| work (perf::Cost) | " << fmt_flop_count(d.prefill.flops) << ", " << fmt_bytes(d.prefill.bytes) << " | "
    << fmt_flop_count(d.decode.flops) << ", " << fmt_bytes(d.decode.bytes) << " |\n";
  o << "| arithmetic intensity | " << fmt_num(d.prefill.intensity) << " FLOP/byte | " << fmt_num(d.decode.intensity)
    << " FLOP/byte |\n";
  o << "| implied effective rate | " << fmt_flops(d.prefill.achieved_flops) << ", "
    << fmt_bandwidth(d.prefill.achieved_bw) << " | " << fmt_bandwidth(d.decode.achieved_bw) << ", "
    << fmt_flops(d.decode.achieved_flops) << " |\n";
  if (d.in.hw) {
    o << "| MFU (FLOP/s / peak) | " << opt_percent(d.prefill.on_hw, true) << " | " << opt_percent(d.decode.on_hw, true)
      << " |\n";
    o << "| MBU (bandwidth / peak) | " << opt_percent(d.prefill.on_hw, false) << " | "
      << opt_percent(d.decode.on_hw, false) << " |\n";
    o << "| predicted on " << d.in.hw->id << " | " << fmt_seconds(*d.prefill.predicted_s) << " | "
      << fmt_seconds(*d.decode.predicted_s) << " (" << fmt_num(1.0 / *d.decode.predicted_s) << " tok/s) |\n";
  }
  o << "| bound | " << bound_name(d.prefill.bound) << " (" << d.prefill.bound_basis << ") | "
    << bound_name(d.decode.bound) << " (" << d.decode.bound_basis << ") |\n\n";
  o << "Reference machine for the gains below: " << d.reference << ".\n\n";

  const bool dec = d.struggling == Phase::Decode;
  o << "### Hardware: the same model and weights predicted on catalog devices\n\n"
    << "| hardware | fits | TTFT | decode tok/s | "
    << (dec ? "decode gain | prefill gain" : "prefill gain | decode gain") << " |\n|---|---|---|---|---|---|\n";
  for (const HwOption& h : d.hardware)
    o << "| " << h.name << " | " << (h.fits ? "yes" : "no") << " | " << fmt_seconds(h.ttft_s) << " | "
      << fmt_num(h.decode_tok_s) << " | " << fmt_factor(dec ? h.decode_gain : h.prefill_gain) << " | "
      << fmt_factor(dec ? h.prefill_gain : h.decode_gain) << " |\n";

  o << "\n### Software remedies, ranked by predicted gain on " << phase_name(d.struggling)
    << "\n\n| remedy | gain | why |\n|---|---|---|\n";
  for (const Remedy& r : d.remedies)
    o << "| " << r.name << " | " << fmt_factor(r.gain) << (r.aggregate ? " (aggregate)" : "") << " | " << r.detail
      << " |\n";

  if (!d.contradictions.empty()) {
    o << "\n### The inputs contradict each other\n\n";
    for (const Contradiction& c : d.contradictions) {
      o << "- " << c.finding << " Likely explanations:\n";
      for (const std::string& e : c.explanations) o << "  - " << e << "\n";
    }
  }
  return o.str();
}

json phase_json(const PhaseReport& p) {
  json j = {{"seconds", p.seconds},
            {"flops", p.flops},
            {"bytes", p.bytes},
            {"intensity", p.intensity},
            {"achieved_flops", p.achieved_flops},
            {"achieved_bytes_per_s", p.achieved_bw},
            {"bound", bound_name(p.bound)},
            {"bound_basis", p.bound_basis},
            {"target_miss", p.target_miss}};
  if (p.on_hw) {
    j["mfu"] = p.on_hw->flops_utilization;
    j["mbu"] = p.on_hw->bw_utilization;
  }
  if (p.predicted_s) j["predicted_seconds"] = *p.predicted_s;
  return j;
}

std::string render_json(const Diagnosis& d) {
  json hw = json::array();
  for (const HwOption& h : d.hardware)
    hw.push_back({{"id", h.id},
                  {"name", h.name},
                  {"fits", h.fits},
                  {"ttft_s", h.ttft_s},
                  {"decode_tok_s", h.decode_tok_s},
                  {"prefill_gain", h.prefill_gain},
                  {"decode_gain", h.decode_gain}});
  json rem = json::array();
  for (const Remedy& r : d.remedies)
    rem.push_back({{"name", r.name}, {"gain", r.gain}, {"aggregate", r.aggregate}, {"detail", r.detail}});
  json con = json::array();
  for (const Contradiction& c : d.contradictions)
    con.push_back({{"finding", c.finding}, {"explanations", c.explanations}});
  const Observation& ob = d.in.obs;
  json j = {{"inputs",
             {{"ttft_ms", ob.ttft_s * 1e3},
              {"decode_tok_s", ob.decode_tok_s},
              {"prompt_tokens", ob.prompt_tokens},
              {"kv_cache", ob.kv_cache},
              {"model", d.in.model_id},
              {"weights", d.in.weights},
              {"weight_bits", d.weight_bits},
              {"hardware", d.in.hw ? json(d.in.hw->id) : json(nullptr)},
              {"tp", d.in.layout.tp},
              {"pp", d.in.layout.pp},
              {"link", d.in.layout.link ? json(d.in.layout.link->id) : json(nullptr)}}},
            {"struggling_phase", phase_name(d.struggling)},
            {"misses_target", d.misses_target},
            {"limiting_resource", resource_name(d.limiting)},
            {"cause", d.cause},
            {"upgrade", d.upgrade},
            {"gain_2x_flops", d.gain_2x_flops},
            {"gain_2x_bandwidth", d.gain_2x_bandwidth},
            {"reference_machine", d.reference},
            {"prefill", phase_json(d.prefill)},
            {"decode", phase_json(d.decode)},
            {"hardware", hw},
            {"remedies", rem},
            {"contradictions", con}};
  return j.dump(2) + "\n";
}

}  // namespace

std::string render_diagnosis(const Diagnosis& d, Format f) {
  if (f == Format::Csv) throw Error("diagnose supports -o md or json");
  return f == Format::Json ? render_json(d) : render_md(d);
}

std::string render_grade(const Grade& g, Format f) {
  if (f == Format::Json) {
    auto point = [](const GradePoint& p) { return json{{"mark", mark_name(p.mark)}, {"feedback", p.feedback}}; };
    return json{{"answer", g.answer},          {"phase", point(g.phase)}, {"resource", point(g.resource)},
                {"upgrade", point(g.upgrade)}, {"score", g.score()},      {"out_of", 3}}
               .dump(2) +
           "\n";
  }
  if (f == Format::Csv) throw Error("diagnose --answer supports -o md or json");
  std::ostringstream o;
  char score[16];
  std::snprintf(score, sizeof score, "%.1f", g.score());
  o << "### Your answer: " << score << " / 3\n\n> " << g.answer << "\n\n";
  o << "- phase: **" << mark_name(g.phase.mark) << "**. " << g.phase.feedback << "\n";
  o << "- limiting resource: **" << mark_name(g.resource.mark) << "**. " << g.resource.feedback << "\n";
  o << "- upgrade: **" << mark_name(g.upgrade.mark) << "**. " << g.upgrade.feedback << "\n";
  return o.str();
}

}  // namespace kvlab::perf
