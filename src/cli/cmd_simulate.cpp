// kvlab simulate: the analytical model's prediction of a generation on
// catalog hardware (TTFT, then every decode step with and without the KV
// cache), its chart, the catalogs, the check against published numbers, and
// with --serve a serving load through the continuous-batching scheduler.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "lab/hardware/hardware.h"
#include "lab/hardware/interconnect.h"
#include "lab/report/report.h"
#include "lab/report/units.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/plot.h"
#include "lab/simulate/serving.h"
#include "lab/simulate/simulate.h"
#include "lab/simulate/validate.h"

namespace kvlab::cli {
namespace {

struct SimulateOptions {
  std::string model = "llama-3.1-8b";
  std::string hw = "h100";
  std::string hw_profile = perf::default_hw_profile_path();
  int64_t prompt = 512;
  int64_t gen = 2048;
  int64_t batch = 1;
  int tp = 1, pp = 1;
  std::string link;
  bool no_kv_cache = false;
  std::string weights = "auto";
  std::string kv = "f16";
  std::string compute = "auto";
  double eff_bw = perf::Efficiency{}.bandwidth;
  double eff_compute = perf::Efficiency{}.compute;
  double eff_attention = perf::Efficiency{}.compute;
  double layer_overhead_us = perf::Efficiency{}.layer_overhead_s * 1e6;
  // Set when the flag was given: it then overrides what the hardware measured.
  CLI::Option *eff_bw_flag = nullptr, *eff_compute_flag = nullptr, *eff_attention_flag = nullptr,
              *overhead_flag = nullptr;
  std::string output = "md";
  std::string plot;
  std::string validate;
  bool list = false;
  // --serve: the load and the server's flags (kvlab serve's names and defaults).
  bool serve = false;
  perf::ServeLoad load;
  std::string prompt_len = "512", output_len = "128";
  int parallel = 4, ctx_size = 4096, prefill_chunk = 128, max_queue = 32, kv_blocks = 0;
  double pass_target_ms = -1;  // auto
  double pass_overhead_us = 0, row_overhead_us = 0;
  int draft = 0;
};

perf::Efficiency efficiency(const SimulateOptions& o) {
  perf::Efficiency e{o.eff_bw, o.eff_compute, o.layer_overhead_us * 1e-6};
  if (o.eff_attention_flag->count()) e.attention = o.eff_attention;
  return e;
}

// The hardware's own efficiencies (measured ones for a probed "this"), with
// every flag given on the command line in place of its figure.
perf::Efficiency efficiency(const SimulateOptions& o, const perf::Hardware& hw, const perf::SimOptions& opt,
                            const model::Config& c) {
  perf::Efficiency e = perf::efficiency_for(hw, opt.weights, opt.kv, c);
  const bool any = o.eff_bw_flag->count() || o.eff_compute_flag->count() || o.eff_attention_flag->count() ||
                   o.overhead_flag->count();
  if (o.eff_bw_flag->count()) e.bandwidth = o.eff_bw;
  if (o.eff_compute_flag->count()) e.compute = o.eff_compute;
  if (o.eff_attention_flag->count()) e.attention = e.attention_decode = o.eff_attention;
  if (o.overhead_flag->count()) e.layer_overhead_s = o.layer_overhead_us * 1e-6;
  if (any) e.source += ", with command-line overrides";
  return e;
}

void list_catalogs() {
  std::printf(
      "## Hardware (dense peaks)\n\n| id | name | kind | fp32 | bf16/fp16 | fp8 | int8 | bandwidth | memory | link "
      "| source | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  auto peak = [](const std::optional<double>& v) { return v ? perf::fmt_flops(*v) : std::string("-"); };
  auto tops = [](const std::optional<double>& v) { return v ? perf::fmt_num(*v / 1e12) + " TOPS" : std::string("-"); };
  for (const perf::Hardware& h : perf::hardware_catalog())
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", h.id.c_str(), h.name.c_str(),
                std::string(perf::hw_kind_name(h.kind)).c_str(), peak(h.fp32).c_str(), peak(h.bf16).c_str(),
                peak(h.fp8).c_str(), tops(h.int8).c_str(), perf::fmt_bandwidth(h.mem_bw).c_str(), h.memory.c_str(),
                h.link.empty() ? "-" : h.link.c_str(), h.source.c_str(), h.compute_note.c_str());
  std::printf("| this | this machine | cpu | from `kvlab probe` (%s) | | | | | | | | |\n\n",
              perf::default_hw_profile_path().c_str());
  std::printf(
      "## Links between devices (--tp, --pp; --link)\n\n| id | name | per direction | per hop | source |\n"
      "|---|---|---|---|---|\n");
  for (const perf::Link& l : perf::link_catalog())
    std::printf("| %s | %s | %s | %s | %s |\n", l.id.c_str(), l.name.c_str(),
                perf::fmt_bandwidth(l.bytes_per_s).c_str(), perf::fmt_seconds(l.hop_latency_s).c_str(),
                l.source.c_str());
  std::printf("\n");
  std::printf(
      "## Models\n\n| id | params | layers | d_model | d_ff | heads (q/kv) | vocab | source |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (const perf::ModelEntry& e : perf::model_catalog()) {
    const model::Config& c = e.config;
    std::printf("| %.*s | %s | %d | %d | %s | %d/%d | %d | %.*s |\n", int(e.id.size()), e.id.data(),
                perf::describe_params(c).c_str(), c.n_layer, c.n_embd, perf::describe_ffn(c).c_str(), c.n_head,
                c.n_head_kv, c.n_vocab, int(e.source.size()), e.source.data());
  }
}

perf::ServeOptions serve_options(const SimulateOptions& o) {
  perf::ServeOptions so;
  so.sched.n_seq = o.parallel;
  so.sched.n_ctx = o.ctx_size;
  so.sched.prefill_chunk = o.prefill_chunk;
  so.sched.pass_target_ms = o.pass_target_ms;
  so.sched.max_queue = o.max_queue;
  so.sched.kv_blocks = o.kv_blocks;
  so.sched.draft.max_tokens = o.draft;
  so.load = o.load;
  so.load.prompt = perf::parse_length(o.prompt_len, "--prompt-len");
  so.load.output = perf::parse_length(o.output_len, "--output-len");
  so.overhead = {o.pass_overhead_us * 1e-6, o.row_overhead_us * 1e-6};
  return so;
}

void simulate(const SimulateOptions& o) {
  const perf::Format format = perf::parse_format(o.output, !o.serve);
  if (o.list) {
    list_catalogs();
    return;
  }
  if (!o.validate.empty()) {
    const perf::Efficiency eff = efficiency(o);
    std::cout << perf::render_validation(perf::validate(perf::load_measurements(o.validate), eff), eff, format);
    return;
  }
  const perf::ResolvedModel m = perf::resolve_model(o.model);
  const perf::Hardware hw = perf::find_hardware(o.hw, o.hw_profile);
  perf::SimOptions opt;
  opt.prompt = o.prompt;
  opt.gen = o.gen;
  opt.batch = o.batch;
  const perf::PricedWeights weights = perf::priced_weights(o.weights, m);
  opt.weights = weights.format;
  opt.weight_bits = weights.bits;
  opt.kv = o.kv;
  if (o.compute != "auto") opt.compute = perf::parse_precision(o.compute);
  opt.eff = efficiency(o, hw, opt, m.config);
  opt.with_cache = !o.no_kv_cache;
  opt.layout = perf::make_layout(o.tp, o.pp, o.link, hw);
  if (o.serve) {
    std::cout << perf::render_serving(perf::simulate_serving(m.id, m.config, hw, opt, serve_options(o)), format);
    return;
  }
  const perf::Simulation s = perf::simulate(m.id, m.config, hw, opt);
  std::cout << perf::render_simulation(s, format);
  if (!o.plot.empty()) {
    perf::plot_simulation(s, o.plot);
    std::fprintf(stderr, "kvlab: wrote %s\n", o.plot.c_str());
  }
}

void add_serve_options(CLI::App& app, SimulateOptions& o) {
  CLI::Option* serve = app.add_flag(
      "--serve", o.serve, "simulate kvlab serve under a load: TTFT, inter-token and end-to-end latency percentiles, throughput");
  app.add_option("--rate", o.load.rate, "--serve: Poisson arrivals, requests/s")->check(CLI::Range(1e-6, 1e6));
  app.add_option("--concurrency", o.load.concurrency, "--serve: closed loop of this many clients")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ramp", o.load.ramp_s, "--serve: closed-loop clients start evenly over this many seconds")
      ->capture_default_str();
  app.add_option("--requests", o.load.requests, "--serve: requests in all")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), perf::kMaxServeRequests));
  app.add_option("--prompt-len", o.prompt_len, "--serve: prompt tokens, N or LO:HI (uniform)")->capture_default_str();
  app.add_option("--output-len", o.output_len, "--serve: output tokens, N or LO:HI (uniform)")->capture_default_str();
  app.add_option("--prefix-share", o.load.prefix_share, "--serve: fraction of prompts that start with a shared prefix")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--prefix-len", o.load.prefix_tokens, "--serve: tokens of the shared prefix")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--seed", o.load.seed, "--serve: seed of the arrivals and lengths")->capture_default_str();
  app.add_option("-P,--parallel", o.parallel, "--serve: sequence slots (kvlab serve --parallel)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--ctx-size", o.ctx_size, "--serve: context per slot")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  app.add_option("--prefill-chunk", o.prefill_chunk, "--serve: most prompt tokens per pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 8192));
  add_pass_target_option(app, o.pass_target_ms, "--serve");
  app.add_option("--max-queue", o.max_queue, "--serve: requests that may wait for a slot")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--kv-blocks", o.kv_blocks, "--serve: KV pool in 16-position blocks (0: parallel x ctx-size)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("--draft", o.draft, "--serve: speculative decoding, up to N drafts per decode row (kvlab serve --draft)")
      ->capture_default_str()
      ->check(CLI::Range(0, engine::kMaxDraftTokens));
  app.add_option("--draft-found", o.load.draft_found,
                 "--serve: the chance prompt lookup finds drafts for a decode row (the workload's)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--draft-accept", o.load.draft_accept,
                 "--serve: the chance each draft is kept once those before it were (the workload's)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--pass-overhead-us", o.pass_overhead_us, "--serve: fixed engine cost per pass, us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--row-overhead-us", o.row_overhead_us,
                 "--serve: fixed cost per sampled row (sampling, detokenising), us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  // The load and the server's flags mean nothing for one generation.
  for (CLI::Option* opt : app.get_options())
    if (opt != serve && opt->get_description().starts_with("--serve: ")) opt->needs(serve);
}

}  // namespace

void add_simulate_command(CLI::App& root) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* app = root.add_subcommand(
      "simulate", "predict TTFT and tok/s at every position, with and without the KV cache, on catalog hardware");
  app->add_option("-m,--model", o->model, "catalog model id, a .gguf file, or a Hugging Face config.json")
      ->capture_default_str();
  app->add_option("--hw", o->hw, "catalog hardware id (see --list), or 'this' for the probed machine")
      ->capture_default_str();
  app->add_option("--hw-profile", o->hw_profile, "probe profile used by --hw this")->capture_default_str();
  app->add_option("--prompt", o->prompt, "prompt tokens (prefill)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 22));
  app->add_option("--gen", o->gen, "decode steps after the prefill")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 22));
  app->add_option("--batch", o->batch, "sequences decoded together")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app->add_option("--tp", o->tp, "tensor-parallel devices: heads, MLP columns and vocabulary split over them")
      ->capture_default_str()
      ->check(CLI::Range(1, perf::kMaxDevices));
  app->add_option("--pp", o->pp, "pipeline stages: layers split over them (at batch 1, memory relief only)")
      ->capture_default_str()
      ->check(CLI::Range(1, perf::kMaxDevices));
  app->add_option("--link", o->link,
                  "link between the devices: nvlink3, nvlink4, nvlink5, pcie4, pcie5 (default: the device's own, "
                  "see --list)");
  app->add_flag("--no-kv-cache", o->no_kv_cache, "report only the no-cache mode (every step recomputes the sequence)");
  app->add_option("--weights", o->weights,
                  "weight format: auto (bf16; a GGUF file's own size), f32, f16, bf16, fp8, int8, q8_0, q4_1, q4_0")
      ->capture_default_str();
  app->add_option("--kv-dtype", o->kv, "KV cache format: f32, f16, bf16, fp8, q8_0, q4_0")->capture_default_str();
  app->add_option("--compute", o->compute,
                  "precision the matmuls are priced at: auto (from --weights), fp32, tf32, "
                  "bf16, fp8, int8")
      ->capture_default_str();
  const char* measured = " (--hw this after a kvlab probe that timed kvlab's kernels: measured)";
  o->eff_bw_flag = app->add_option("--eff-bw", o->eff_bw, std::string("achievable fraction of peak memory bandwidth") + measured)
                       ->capture_default_str()
                       ->check(CLI::Range(0.01, 1.0));
  o->eff_compute_flag =
      app->add_option("--eff-compute", o->eff_compute, std::string("achievable fraction of dense peak FLOP/s") + measured)
          ->capture_default_str()
          ->check(CLI::Range(0.01, 1.0));
  o->eff_attention_flag =
      app->add_option("--eff-attention", o->eff_attention,
                      std::string("achievable fraction of peak FLOP/s in attention, prefill and decode (default: --eff-compute)") +
                          measured)
          ->check(CLI::Range(0.001, 1.0));
  o->overhead_flag = app->add_option("--layer-overhead-us", o->layer_overhead_us,
                                     std::string("fixed launch/sync cost per layer per pass, us") + measured)
                         ->capture_default_str()
                         ->check(CLI::Range(0.0, 1e5));
  app->add_option("-o,--output", o->output, "md, json or csv")->capture_default_str();
  app->add_option("--plot", o->plot,
                  "also draw tok/s vs position to FILE.png or FILE.svg (needs gnuplot); "
                  "without a value: simulate.png")
      ->expected(0, 1)
      ->default_str("simulate.png");
  app->add_option("--validate", o->validate, "compare against published measurements (docs/validation/published.json)");
  app->add_flag("--list", o->list, "list the hardware and model catalogs with their sources");
  add_serve_options(*app, *o);
  app->callback([o] { simulate(*o); });
}

}  // namespace kvlab::cli
