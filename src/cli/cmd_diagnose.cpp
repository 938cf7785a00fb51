// kvlab diagnose: which phase struggles given a user's TTFT and decode rate,
// why (roofline of each phase), which upgrade and which software remedies
// help; with --answer, grades a free-text diagnosis of the same case.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "lab/diagnose/diagnose.h"
#include "lab/diagnose/grade.h"
#include "lab/report/report.h"
#include "lab/simulate/model_catalog.h"

namespace kvlab::cli {
namespace {

struct DiagnoseCliOptions {
  double ttft_ms = 50;  // the seed's case
  double decode_tok_s = 2;
  int64_t prompt_tokens = 512;
  int64_t gen_tokens = 128;
  bool no_kv_cache = false;
  std::string model = "llama-3.1-8b";
  std::string weights = "auto";
  std::string kv = "f16";
  std::string hw;
  std::string hw_profile = perf::default_hw_profile_path();
  int tp = 1, pp = 1;
  std::string link;
  std::string from;
  std::string answer;
  std::string output = "md";
  double target_ttft_ms = perf::DiagnoseOptions{}.target_ttft_s * 1e3;
  double target_tok_s = perf::DiagnoseOptions{}.target_tok_s;
  double eff_bw = perf::Efficiency{}.bandwidth;
  double eff_compute = perf::Efficiency{}.compute;
  double layer_overhead_us = perf::Efficiency{}.layer_overhead_s * 1e6;
  CLI::Option* eff_options[3] = {};  // --eff-bw, --eff-compute, --layer-overhead-us
  bool eff_flags_given() const {
    for (const CLI::Option* opt : eff_options)
      if (opt && opt->count()) return true;
    return false;
  }
  bool model_given = false;
};

void diagnose(const DiagnoseCliOptions& o) {
  const perf::Format format = perf::parse_format(o.output, false);
  perf::DiagnoseOptions d;
  std::string model = o.model;
  if (!o.from.empty()) {
    const perf::RunRecord r = perf::parse_run_json(read_file(o.from), o.from);
    d.obs = r.obs;
    if (!o.model_given && !r.model.empty()) model = r.model;
  } else {
    d.obs.ttft_s = o.ttft_ms / 1e3;
    d.obs.decode_tok_s = o.decode_tok_s;
    d.obs.prompt_tokens = o.prompt_tokens;
    d.obs.gen_tokens = o.gen_tokens;
    d.obs.kv_cache = !o.no_kv_cache;
  }
  const perf::ResolvedModel m = perf::resolve_model(model);
  d.model_id = m.id;
  d.model = m.config;
  const perf::PricedWeights weights = perf::priced_weights(o.weights, m);
  d.weights = weights.format;
  d.weight_bits = weights.bits;
  d.kv = o.kv;
  if (!o.hw.empty()) {
    d.hw = perf::find_hardware(o.hw, o.hw_profile);
    d.layout = perf::make_layout(o.tp, o.pp, o.link, *d.hw);
  } else if (o.tp > 1 || o.pp > 1 || !o.link.empty()) {
    throw Error("--tp, --pp and --link need --hw: the devices the metrics come from");
  }
  d.eff = {o.eff_bw, o.eff_compute, o.layer_overhead_us * 1e-6};
  // A probed "this" knows how fast kvlab's kernels run on it: those
  // efficiencies for it, unless the command line sets them.
  if (d.hw && d.hw->kernels && !o.eff_flags_given()) d.hw_eff = perf::efficiency_for(*d.hw, d.weights, d.kv, d.model);
  d.target_ttft_s = o.target_ttft_ms / 1e3;
  d.target_tok_s = o.target_tok_s;

  const perf::Diagnosis result = perf::diagnose(d);
  if (!o.answer.empty()) {
    std::cout << perf::render_grade(perf::grade_answer(o.answer, perf::expected_from(result)), format);
    return;
  }
  std::cout << perf::render_diagnosis(result, format);
}

}  // namespace

void add_diagnose_command(CLI::App& root) {
  auto o = std::make_shared<DiagnoseCliOptions>();
  CLI::App* app =
      root.add_subcommand("diagnose",
                          "from TTFT and decode tok/s: which phase struggles, why, and which upgrade or remedy helps "
                          "(defaults: the seed's case, an 8B model at TTFT 50 ms and 2 tok/s)");
  app->add_option("--ttft-ms", o->ttft_ms, "measured time to first token, ms")
      ->capture_default_str()
      ->check(positive_number());
  app->add_option("--decode-tok-s", o->decode_tok_s, "measured decode rate, tokens/s per stream")
      ->capture_default_str()
      ->check(positive_number());
  app->add_option("--prompt-tokens", o->prompt_tokens, "prompt length behind the TTFT")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 22));
  app->add_option("--gen-tokens", o->gen_tokens, "tokens generated (sets the step size when there is no KV cache)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 22));
  app->add_flag("--no-kv-cache", o->no_kv_cache, "the run recomputed the sequence at every step");
  app->add_option("-m,--model", o->model, "catalog model id, a .gguf file, or a Hugging Face config.json")
      ->capture_default_str()
      ->each([o](const std::string&) { o->model_given = true; });
  app->add_option("--weights", o->weights,
                  "weight format: auto (bf16; a GGUF file's own size), f32, f16, bf16, fp8, "
                  "int8, q8_0, q4_1, q4_0")
      ->capture_default_str();
  app->add_option("--kv-dtype", o->kv, "KV cache format: f32, f16, bf16, fp8, q8_0, q4_0")->capture_default_str();
  app->add_option("--hw", o->hw, "the hardware the metrics come from (catalog id or 'this'); default: unknown");
  app->add_option("--hw-profile", o->hw_profile, "probe profile used by --hw this")->capture_default_str();
  app->add_option("--tp", o->tp, "tensor-parallel devices of --hw the model ran on")
      ->capture_default_str()
      ->check(CLI::Range(1, perf::kMaxDevices));
  app->add_option("--pp", o->pp, "pipeline stages of --hw the model ran on")
      ->capture_default_str()
      ->check(CLI::Range(1, perf::kMaxDevices));
  app->add_option("--link", o->link, "link between the devices (default: the device's own, see kvlab simulate --list)");
  app->add_option("--from", o->from,
                  "read ttft_ms, decode_tok_s, prompt_tokens, kv_cache and model from a "
                  "`kvlab run --json` output");
  app->add_option("--answer", o->answer, "grade this free-text diagnosis (phase, resource, upgrade) instead");
  app->add_option("--target-ttft-ms", o->target_ttft_ms, "TTFT a user should not have to exceed")
      ->capture_default_str()
      ->check(positive_number());
  app->add_option("--target-tok-s", o->target_tok_s, "decode rate a user should get at least")
      ->capture_default_str()
      ->check(positive_number());
  o->eff_options[0] = app->add_option("--eff-bw", o->eff_bw,
                                      "achievable fraction of peak memory bandwidth (with --hw this and none of "
                                      "these three set, the user's machine gets what kvlab's kernels reach on it)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  o->eff_options[1] = app->add_option("--eff-compute", o->eff_compute, "achievable fraction of dense peak FLOP/s")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  o->eff_options[2] =
      app->add_option("--layer-overhead-us", o->layer_overhead_us, "fixed launch/sync cost per layer per pass, us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e5));
  app->add_option("-o,--output", o->output, "md or json")->capture_default_str();
  app->callback([o] { diagnose(*o); });
}

}  // namespace kvlab::cli
