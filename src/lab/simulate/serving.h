// kvlab simulate --serve on catalog (or this probed) hardware: the
// discrete-event serving model (lab/simulate/serve_sim.h) with every pass
// priced by the roofline model (serve_pass.h) at the simulation's formats,
// efficiencies and layout, and its report.
#pragma once
#include <string>

#include "lab/hardware/hardware.h"
#include "lab/report/report.h"
#include "lab/simulate/serve_sim.h"
#include "lab/simulate/simulate.h"
#include "model/config.h"

namespace kvlab::perf {

struct ServingSimulation {
  std::string model_id;
  model::Config model;
  Hardware hw;
  SimOptions opt;  // formats, efficiencies, layout; its prompt, gen and batch are unused
  ServeOptions serve;
  Machine machine;
  ServeResult result;
};

// Throws kvlab::Error for bad options (simulate_serve's, make_machine's,
// check_layout's).
ServingSimulation simulate_serving(const std::string& model_id, const model::Config& model, const Hardware& hw,
                                   const SimOptions& opt, const ServeOptions& serve);

// md: the latency percentiles, throughput and a compact time series; json:
// the same under "serve" (serve.ttft_ms.p50, serve.throughput_tok_s, ...).
std::string render_serving(const ServingSimulation& s, Format f);

}  // namespace kvlab::perf
