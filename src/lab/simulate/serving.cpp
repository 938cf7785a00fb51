#include "lab/simulate/serving.h"

#include "lab/hardware/formats.h"
#include "lab/simulate/layout.h"
#include "lab/simulate/serve_pass.h"

namespace kvlab::perf {

ServingSimulation simulate_serving(const std::string& model_id, const model::Config& model, const Hardware& hw,
                                   const SimOptions& opt, const ServeOptions& serve) {
  const NumberFormat& wf = weight_format(opt.weights);
  const NumberFormat& kf = kv_format(opt.kv);
  ServingSimulation s{model_id, model, hw, opt, serve, {}, {}};
  s.serve.sched = engine::checked(serve.sched);
  if (opt.eff.threads > 0) s.serve.overhead.sampler_threads = opt.eff.threads;  // the probed pool's
  // The same machine and pass shape simulate() prices a generation with.
  s.machine = make_machine(hw, opt.compute.value_or(dense_precision(hw, wf)), opt.eff, kf.compute);
  check_layout(model, opt.layout);
  Pass shape;
  shape.weight_bytes = opt.weight_bits.value_or(wf.bits) / 8.0;
  shape.kv_bytes = kf.bits / 8.0;
  const PassPricer price = [&s, &shape](const PassRows& rows) {
    return time_serve_pass(s.model, shape, rows, s.machine, s.opt.layout).seconds;
  };
  s.result = simulate_serve(serve, price);
  return s;
}

}  // namespace kvlab::perf
