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
