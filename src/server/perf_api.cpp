#include "server/perf_api.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "lab/diagnose/diagnose.h"
#include "lab/diagnose/grade.h"
#include "lab/hardware/hardware.h"
#include "lab/hardware/interconnect.h"
#include "lab/report/report.h"
#include "lab/simulate/layout.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/serving.h"
#include "lab/simulate/simulate.h"
#include "server/openai_api.h"

namespace kvlab::server {

using nlohmann::json;

namespace {

// JSON field helpers for the perf endpoints (kvlab::Error -> 400).
template <class T>
T get_or(const json& j, const char* name, T def) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return def;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw ApiException{ApiError{400, std::string("'") + name + "' has the wrong type", "invalid_request_error", name,
                                "invalid_type"}};
  }
}

// Only catalog ids over HTTP: a path would let a client read server files.
perf::ResolvedModel catalog_model(const std::string& name) {
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos ||
      name.ends_with(".gguf") || name.ends_with(".json"))
    throw ApiException{ApiError{400, "'model' must be a catalog model id", "invalid_request_error", "model", "invalid_value"}};
  return perf::resolve_model(name);
}

// A length field: a number of tokens or a "LO:HI" string (perf::parse_length).
perf::LengthSpec length_field(const json& j, const char* name, int def) {
  const auto it = j.find(name);
  if (it == j.end() || it->is_null()) return {def, def};
  return perf::parse_length(it->is_string() ? it->get<std::string>() : std::to_string(get_or<int>(j, name, def)),
                            std::string("'") + name + "'");
}

// --pass-target-ms: "auto" (or absent) is -1, else milliseconds, 0 for
// fixed chunks; engine::checked() bounds it from above.
double pass_target_field(const json& j) {
  const auto it = j.find("pass_target_ms");
  if (it == j.end() || it->is_null() || (it->is_string() && *it == "auto")) return -1;
  const double ms = get_or<double>(j, "pass_target_ms", -1);
  if (!(ms >= 0)) throw Error("'serve': pass_target_ms must be \"auto\" or a number of milliseconds from 0");
  return ms;
}

// The "serve" object: kvlab simulate --serve's load and server flags. A
// worker thread runs it, so its work is bounded: generated tokens in all at
// most kMaxApiTokens.
perf::ServeOptions serve_options(const json& s) {
  constexpr int64_t kMaxApiTokens = int64_t(1) << 20;
  if (!s.is_object())
    throw ApiException{ApiError{400, "'serve' must be an object", "invalid_request_error", "serve", "invalid_type"}};
  perf::ServeOptions o;
  o.sched.n_seq = get_or<int>(s, "parallel", 4);
  o.sched.n_ctx = get_or<int>(s, "ctx_size", 4096);
  o.sched.prefill_chunk = get_or<int>(s, "prefill_chunk", 128);
  o.sched.max_queue = get_or<int>(s, "max_queue", 32);
  o.sched.kv_blocks = get_or<int>(s, "kv_blocks", 0);
  o.sched.pass_target_ms = pass_target_field(s);
  o.sched.draft.max_tokens = get_or<int>(s, "draft", 0);
  if (o.sched.n_seq > 256 || o.sched.n_ctx > (1 << 20) || o.sched.max_queue < 0 || o.sched.max_queue > 4096 ||
      o.sched.kv_blocks < 0 || o.sched.kv_blocks > (1 << 24))
    throw Error("'serve': parallel at most 256, ctx_size at most 1048576, max_queue 0 to 4096, kv_blocks 0 to 16777216");
  o.load.rate = get_or<double>(s, "rate", 0);
  o.load.concurrency = get_or<int>(s, "concurrency", 0);
  o.load.ramp_s = get_or<double>(s, "ramp_s", 0);
  o.load.requests = get_or<int64_t>(s, "requests", 200);
  o.load.prompt = length_field(s, "prompt_len", 512);
  o.load.output = length_field(s, "output_len", 128);
  o.load.prefix_share = get_or<double>(s, "prefix_share", 0);
  o.load.prefix_tokens = get_or<int>(s, "prefix_len", 0);
  o.load.draft_found = get_or<double>(s, "draft_found", 1);
  o.load.draft_accept = get_or<double>(s, "draft_accept", 0);
  o.load.seed = get_or<uint64_t>(s, "seed", 1);
  o.series_points = get_or<int>(s, "series_points", o.series_points);
  perf::check_load(o.load);
  if (o.load.requests * o.load.output.hi > kMaxApiTokens)
    throw Error("'serve': requests x output_len must be at most " + std::to_string(kMaxApiTokens) + " tokens");
  return o;
}

}  // namespace

std::string simulate_request(const std::string& body) {
  const json j = parse_body(body);
  const perf::ResolvedModel m = catalog_model(get_or<std::string>(j, "model", "llama-3.1-8b"));
  const perf::Hardware hw = perf::find_hardware(get_or<std::string>(j, "hw", "h100"));
  perf::SimOptions opt;
  opt.prompt = get_or<int64_t>(j, "prompt", 512);
  opt.gen = get_or<int64_t>(j, "gen", 256);
  opt.batch = get_or<int64_t>(j, "batch", 1);
  if (opt.prompt < 1 || opt.prompt > (1 << 22)) throw Error("'prompt' must be in [1, 4194304]");
  if (opt.gen < 0 || opt.gen > (1 << 16)) throw Error("'gen' must be in [0, 65536]");
  if (opt.batch < 1 || opt.batch > (1 << 16)) throw Error("'batch' must be in [1, 65536]");
  const perf::PricedWeights weights = perf::priced_weights(get_or<std::string>(j, "weights", "auto"), m);
  opt.weights = weights.format;
  opt.weight_bits = weights.bits;
  opt.kv = get_or<std::string>(j, "kv", "f16");
  const std::string compute = get_or<std::string>(j, "compute", "auto");
  if (compute != "auto") opt.compute = perf::parse_precision(compute);
  opt.with_cache = !get_or<bool>(j, "no_kv_cache", false);
  opt.eff = perf::efficiency_for(hw, opt.weights, opt.kv, m.config);  // measured for a probed "this"
  // Each checked here, so that the product make_layout checks (tp·pp <=
  // kMaxDevices) cannot overflow. "" takes the hardware's own link.
  const int64_t tp = get_or<int64_t>(j, "tp", 1), pp = get_or<int64_t>(j, "pp", 1);
  if (tp < 1 || pp < 1 || tp > perf::kMaxDevices || pp > perf::kMaxDevices)
    throw Error("'tp' and 'pp' must each be in [1, " + std::to_string(perf::kMaxDevices) + "], got tp " +
                std::to_string(tp) + ", pp " + std::to_string(pp));
  opt.layout = perf::make_layout(int(tp), int(pp), get_or<std::string>(j, "link", ""), hw);
  if (const auto serve = j.find("serve"); serve != j.end() && !serve->is_null())
    return perf::render_serving(perf::simulate_serving(m.id, m.config, hw, opt, serve_options(*serve)),
                                perf::Format::Json);
  return perf::render_simulation(perf::simulate(m.id, m.config, hw, opt), perf::Format::Json);
}

std::string diagnose_request(const std::string& body) {
  const json j = parse_body(body);
  perf::DiagnoseOptions d;
  d.obs.ttft_s = get_or<double>(j, "ttft_ms", 50) / 1e3;
  d.obs.decode_tok_s = get_or<double>(j, "decode_tok_s", 2);
  d.obs.prompt_tokens = get_or<int64_t>(j, "prompt_tokens", 512);
  d.obs.gen_tokens = get_or<int64_t>(j, "gen_tokens", 128);
  d.obs.kv_cache = !get_or<bool>(j, "no_kv_cache", false);
  if (!(d.obs.ttft_s > 0) || !(d.obs.decode_tok_s > 0)) throw Error("'ttft_ms' and 'decode_tok_s' must be > 0");
  if (d.obs.prompt_tokens < 1 || d.obs.gen_tokens < 1) throw Error("'prompt_tokens' and 'gen_tokens' must be >= 1");
  const perf::ResolvedModel m = catalog_model(get_or<std::string>(j, "model", "llama-3.1-8b"));
  d.model_id = m.id;
  d.model = m.config;
  const perf::PricedWeights weights = perf::priced_weights(get_or<std::string>(j, "weights", "auto"), m);
  d.weights = weights.format;
  d.weight_bits = weights.bits;
  d.kv = get_or<std::string>(j, "kv", "f16");
  const std::string hw = get_or<std::string>(j, "hw", "");
  if (!hw.empty()) d.hw = perf::find_hardware(hw);
  d.target_ttft_s = get_or<double>(j, "target_ttft_ms", d.target_ttft_s * 1e3) / 1e3;
  d.target_tok_s = get_or<double>(j, "target_tok_s", d.target_tok_s);
  const perf::Diagnosis result = perf::diagnose(d);
  const std::string answer = get_or<std::string>(j, "answer", "");
  if (!answer.empty())
    return perf::render_grade(perf::grade_answer(answer, perf::expected_from(result)), perf::Format::Json);
  return perf::render_diagnosis(result, perf::Format::Json);
}

std::string catalog_response() {
  json models = json::array(), hardware = json::array(), links = json::array();
  for (const perf::ModelEntry& m : perf::model_catalog())
    models.push_back({{"id", m.id}, {"name", m.config.name}, {"layers", m.config.n_layer}});
  for (const perf::Hardware& h : perf::hardware_catalog())
    hardware.push_back({{"id", h.id}, {"name", h.name}, {"kind", perf::hw_kind_name(h.kind)}});
  for (const perf::Link& l : perf::link_catalog()) links.push_back({{"id", l.id}, {"name", l.name}});
  return dump(json{{"models", models},
                   {"hardware", hardware},
                   {"links", links},
                   {"defaults", {{"model", "llama-3.1-8b"}, {"hw", "h100"}}}});
}

}  // namespace kvlab::server
