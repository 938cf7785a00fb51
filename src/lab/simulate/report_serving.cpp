// Rendering of a ServingSimulation (lab/simulate/serving.h) as md or json.
#include <nlohmann/json.hpp>
#include <sstream>

#include "lab/report/units.h"
#include "lab/simulate/serving.h"

namespace kvlab::perf {
namespace {

using nlohmann::json;

std::string length_text(const LengthSpec& l) {
  return l.lo == l.hi ? std::to_string(l.lo) : std::to_string(l.lo) + "-" + std::to_string(l.hi) + " (uniform)";
}

std::string load_text(const ServeLoad& l) {
  std::string s = std::to_string(l.requests) + " requests, " +
                  (l.rate > 0 ? "Poisson arrivals at " + fmt_num(l.rate) + " req/s"
                              : "a closed loop of " + std::to_string(l.concurrency) + " clients" +
                                    (l.ramp_s > 0 ? " starting over " + fmt_num(l.ramp_s) + " s" : "")) +
                  "; prompt " + length_text(l.prompt) + " tokens, output " + length_text(l.output) + " tokens";
  if (l.prefix_share > 0)
    s += "; " + fmt_percent(l.prefix_share) + " share a " + std::to_string(l.prefix_tokens) + "-token prefix";
  if (l.draft_accept > 0 || l.draft_found < 1)
    s += "; drafts found for " + fmt_percent(l.draft_found) + " of decode rows, each kept with chance " +
         fmt_num(l.draft_accept);
  return s + "; seed " + std::to_string(l.seed);
}

json percentiles_json(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}};
}

json series_json(const std::vector<ServeSample>& series) {
  json a = json::array();
  for (const ServeSample& x : series)
    a.push_back({{"t_s", x.t_s}, {"running", x.running}, {"waiting", x.waiting}, {"kv_blocks_used", x.kv_blocks_used}});
  return a;
}

json serve_json(const ServeResult& r) {
  return {{"ttft_ms", percentiles_json(r.ttft_ms)},
          {"itl_ms", percentiles_json(r.itl_ms)},
          {"e2e_ms", percentiles_json(r.e2e_ms)},
          {"tpot_ms", percentiles_json(r.tpot_ms)},
          {"throughput_tok_s", r.throughput_tok_s},
          {"requests_per_s", r.requests_per_s},
          {"completed", r.completed},
          {"rejected", r.rejected},
          {"duration_s", r.duration_s},
          {"passes", r.passes},
          {"prompt_tokens", r.prompt_tokens},
          {"output_tokens", r.output_tokens},
          {"cached_tokens", r.cached_tokens},
          {"decode_steps", r.decode_steps},
          {"drafted", r.drafted},
          {"drafts_kept", r.drafts_kept},
          {"mean_in_system", r.mean_in_system},
          {"max_waiting", r.max_waiting},
          {"kv_blocks", r.kv_blocks},
          {"max_kv_blocks_used", r.max_kv_blocks_used},
          {"series", series_json(r.series)}};
}

std::string render_json(const ServingSimulation& s) {
  const engine::SchedulerOptions& e = s.serve.sched;
  const ServeLoad& l = s.serve.load;
  json j = {{"model", s.model_id},
            {"hardware", s.hw.id},
            {"weights", s.opt.weights},
            {"kv_dtype", s.opt.kv},
            {"tp", s.opt.layout.tp},
            {"pp", s.opt.layout.pp},
            {"efficiency_source", s.opt.eff.source},
            {"engine",
             {{"parallel", e.n_seq},
              {"ctx", e.n_ctx},
              {"prefill_chunk", e.prefill_chunk},
              {"pass_target_ms", e.pass_target_ms < 0 ? json("auto") : json(e.pass_target_ms)},
              {"max_queue", e.max_queue},
              {"draft", e.draft.max_tokens},
              {"pass_overhead_us", s.serve.overhead.pass_s * 1e6},
              {"row_overhead_us", s.serve.overhead.sampled_row_s * 1e6}}},
            {"load",
             {{"requests", l.requests},
              {"rate", l.rate},
              {"concurrency", l.concurrency},
              {"ramp_s", l.ramp_s},
              {"prompt", {l.prompt.lo, l.prompt.hi}},
              {"output", {l.output.lo, l.output.hi}},
              {"prefix_share", l.prefix_share},
              {"prefix_len", l.prefix_tokens},
              {"draft_found", l.draft_found},
              {"draft_accept", l.draft_accept},
              {"seed", l.seed}}},
            {"serve", serve_json(s.result)}};
  return j.dump(2) + "\n";
}

std::string render_md(const ServingSimulation& s) {
  const ServeResult& r = s.result;
  const engine::SchedulerOptions& e = s.serve.sched;
  std::ostringstream o;
  o << "# Serving simulation: " << s.model_id << " on " << s.hw.name << "\n\n";
  o << "Load: " << load_text(s.serve.load) << ".\n";
  o << "Engine: --parallel " << e.n_seq << ", --ctx " << e.n_ctx << ", --prefill-chunk " << e.prefill_chunk
    << ", --pass-target-ms " << (e.pass_target_ms < 0 ? "auto" : fmt_num(e.pass_target_ms))
    << ", --max-queue " << e.max_queue << (e.draft.max_tokens > 0 ? ", --draft " + std::to_string(e.draft.max_tokens) : "")
    << ", KV pool " << r.kv_blocks << " blocks; per pass +"
    << fmt_seconds(s.serve.overhead.pass_s) << ", per sampled row +" << fmt_seconds(s.serve.overhead.sampled_row_s)
    << "; tp " << s.opt.layout.tp << " x pp " << s.opt.layout.pp << ".\n";
  o << "Efficiencies: " << s.opt.eff.source << ".\n\n";
  o << "| latency | p50 | p90 | p99 | mean |\n|---|---|---|---|---|\n";
  auto row = [&o](const char* name, const Percentiles& p) {
    o << "| " << name << " | " << fmt_num(p.p50) << " ms | " << fmt_num(p.p90) << " ms | " << fmt_num(p.p99)
      << " ms | " << fmt_num(p.mean) << " ms |\n";
  };
  row("TTFT", r.ttft_ms);
  row("inter-token", r.itl_ms);
  row("end-to-end", r.e2e_ms);
  row("time per output token", r.tpot_ms);
  o << "\nThroughput: " << fmt_num(r.throughput_tok_s) << " output tok/s, " << fmt_num(r.requests_per_s)
    << " req/s over " << fmt_seconds(r.duration_s) << " (" << r.completed << " completed, " << r.rejected
    << " rejected by the queue limit, " << r.passes << " passes, " << r.cached_tokens
    << " prompt tokens from the prefix cache; on average " << fmt_num(r.mean_in_system)
    << " requests in the system).\n";
  if (r.drafted > 0)
    o << "Speculative decoding: " << r.drafts_kept << " of " << r.drafted << " drafts kept, "
      << fmt_num(1 + double(r.drafts_kept) / double(r.decode_steps)) << " tokens per decode row.\n";
  o << "\n";
  o << "| t | running | waiting | KV blocks used |\n|---|---|---|---|\n";
  for (const ServeSample& x : r.series)
    o << "| " << fmt_seconds(x.t_s) << " | " << x.running << " | " << x.waiting << " | " << x.kv_blocks_used << " / "
      << r.kv_blocks << " |\n";
  return o.str();
}

}  // namespace

std::string render_serving(const ServingSimulation& s, Format f) {
  return f == Format::Json ? render_json(s) : render_md(s);
}

}  // namespace kvlab::perf
