// kvlab demo: the main job. Generates from one fixed prompt twice on the
// default model, with the KV cache and with full recomputation, shows that
// the tokens are identical, and puts the two timings side by side.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "engine/generate.h"
#include "lab/bench/attribution.h"
#include "lab/bench/stage_profile.h"
#include "lab/hardware/hardware.h"
#include "lab/report/report.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/simulate.h"

namespace kvlab::cli {
namespace {

struct DemoOptions {
  ModelOptions m;
  int n_predict = 128;
  std::string prompt = "Explain why the sky is blue, in a few sentences.";
};

struct Pass {
  engine::GenerateResult r;
  engine::Attribution roofline;
};

// Every demo run: greedy, n tokens whatever the model samples.
engine::GenerateOptions greedy(int n) {
  engine::GenerateOptions g;
  g.n_predict = n;
  g.ignore_eos = true;  // same length for both modes, so the positions line up
  g.sampling.temperature = 0;
  return g;
}

// `profile`: the hardware profile the run is put against (none: the
// roofline's work without its peaks, as for the untimed warm-up).
Pass generate_once(const Loaded& l, const ModelOptions& mo, bool kv_cache, const std::vector<int32_t>& prompt, int n,
                   const char* label, const std::optional<perf::HwProfile>& profile) {
  ModelOptions o = mo;
  o.no_kv_cache = !kv_cache;
  engine::Session session(*l.model, session_options(o, l.model->config()));
  const engine::GenerateOptions g = greedy(n);
  std::fprintf(stderr, "  %s ...", label);
  Pass p;
  p.r = engine::generate(session, prompt, g, [](int32_t) { return false; });
  p.roofline = engine::attribute(session.trace(), *l.model,
                                 session.cache().elem_bytes(),
                                 session.options().n_threads, profile);
  std::fprintf(stderr, " %.1f s\n", p.r.prefill_seconds + p.r.decode_seconds + (p.r.ttft_seconds - p.r.prefill_seconds));
  return p;
}

// A third, short cached generation with the stage clock on from the first
// decode step (model/stage_times.h): where a decode step's time goes. Run
// apart from the two above so their timings are the clock-free ones.
engine::StageProfile profile_decode(const Loaded& l, const ModelOptions& mo, const std::vector<int32_t>& prompt, int n) {
  engine::Session session(*l.model, session_options(mo, l.model->config()));
  model::StageTimes times;
  engine::generate(session, prompt, greedy(n), [](int32_t) { return false; },
                   [&](int32_t) { session.collect_stage_times(&times); });  // after the prefill's token
  session.collect_stage_times(nullptr);
  engine::Trace decode;
  for (const auto& st : session.trace().steps)
    if (st.phase == engine::Phase::Decode) decode.steps.push_back(st);
  return engine::stage_profile(times, decode, *l.model, session.cache().elem_bytes());
}

void print_decode_stages(const engine::StageProfile& p, const engine::Attribution& cached) {
  if (p.passes == 0 || p.pass_seconds <= 0) return;
  using model::Stage;
  struct Group {
    const char* name;
    std::vector<Stage> stages;
  };
  const Group groups[] = {
      {"weight matmuls (QKV, O, gate+up, down)", {Stage::Qkv, Stage::O, Stage::GateUp, Stage::Down}},
      {"LM head (logits)", {Stage::LmHead}},
      {"attention over the KV cache", {Stage::Attention}},
      {"norms, RoPE + KV store, activation, residuals", {Stage::Embedding, Stage::AttnNorm, Stage::RopeStore,
                                                          Stage::Residual, Stage::FfnNorm, Stage::Activation}},
  };
  const double bw = cached.peaks ? cached.peaks->bytes_per_s : 0;
  std::printf("\n## Where a cached decode step goes\n\n");
  std::printf("%d more cached steps with a clock on every stage: %.2f ms per step.\n\n", p.passes,
              p.pass_seconds / p.passes * 1e3);
  std::printf("| stage | us per step | share | GB/s (weights + KV) |%s\n|---|--:|--:|--:|%s\n",
              bw > 0 ? " of probed bandwidth |" : "", bw > 0 ? "--:|" : "");
  for (const Group& g : groups) {
    engine::StageWork w;
    for (Stage s : g.stages) {
      const engine::StageWork& x = p.stages[size_t(s)];
      w.seconds += x.seconds, w.weight_bytes += x.weight_bytes, w.kv_bytes += x.kv_bytes;
    }
    const double rate = w.seconds > 0 ? w.bytes() / w.seconds : 0;
    std::printf("| %s | %.1f | %.1f%% | %.1f |", g.name, w.seconds / p.passes * 1e6, 100 * w.seconds / p.pass_seconds,
                rate / 1e9);
    if (bw > 0) std::printf(" %.0f%% |", 100 * rate / bw);
    std::printf("\n");
  }
  std::printf("\nThe matmuls read each weight once per token: decode is a stream of the weights from memory\n"
              "(`kvlab bench -p 0 -n 128 --profile` splits every stage).\n");
}

// Where the two phases sit on this machine's roofline (kvlab probe's peaks).
void print_roofline(const engine::Attribution& cached, const engine::Attribution& naive) {
  std::printf("\n## On this machine's roofline\n\n");
  if (!cached.peaks) {
    std::printf("No hardware profile yet: run `kvlab probe` (about 10 s) to put these runs against the\n"
                "machine's measured peaks.\n");
    return;
  }
  const engine::Peaks& pk = *cached.peaks;
  char sustained[64] = "";
  if (pk.sustained_bytes_per_s > 0)
    std::snprintf(sustained, sizeof sustained, " (%.1f GB/s sustained)", pk.sustained_bytes_per_s / 1e9);
  std::printf("peaks (%s): %.1f GOP/s %s, %.1f GB/s read bandwidth in the best window%s; ridge %.1f FLOP/byte\n\n",
              pk.source.c_str(), pk.flops / 1e9, pk.flops_kind.c_str(), pk.bytes_per_s / 1e9, sustained,
              pk.flops / pk.bytes_per_s);
  std::printf("| phase | work | achieved | of peak | intensity | verdict |\n|---|---|---|---|---|---|\n");
  auto row = [](const char* name, const engine::PhaseWork& w, const std::optional<perf::Verdict>& v) {
    if (!v) return;
    std::printf("| %s | %.2f GFLOP, %.1f MB over %d passes | %.1f GFLOP/s, %.2f GB/s | %.0f%% compute, %.0f%% bandwidth "
                "| %.1f FLOP/byte | %s |\n",
                name, w.flops / 1e9, w.bytes() / 1e6, w.passes, v->achieved_flops / 1e9, v->achieved_bytes_per_s / 1e9,
                100 * v->flops_utilization, 100 * v->bw_utilization, v->intensity,
                std::string(perf::bound_name(v->bound)).c_str());
  };
  row("prefill", cached.prefill, cached.prefill_verdict);
  row("decode (KV cache)", cached.decode, cached.decode_verdict);
  row("decode (no cache)", naive.decode, naive.decode_verdict);
  std::printf("\nA cached decode step reads %.1f MB (weights + KV) to make one token", cached.decode_bytes_per_step() / 1e6);
  if (cached.decode_verdict && pk.sustained_bytes_per_s > 0)
    std::printf(", at %.0f%% of the sustained bandwidth", 100 * cached.decode_verdict->achieved_bytes_per_s / pk.sustained_bytes_per_s);
  // Only a working set within the L3 is said to fit: past it the curve can
  // still read above the DRAM figure (with a 32 MiB L3, a 99 MB step can
  // interpolate to above it), which is no cache of this machine's.
  const bool within_l3 = pk.l3_bytes == 0 || cached.decode_bytes_per_step() <= pk.l3_bytes;
  if (cached.decode_verdict && within_l3 && pk.working_set_bytes_per_s > 1.1 * pk.bytes_per_s)
    std::printf(".\nThat much fits in this machine's caches: the probe reads a working set that size at %.1f GB/s,\n"
                "and the step ran at %.0f%% of that",
                pk.working_set_bytes_per_s / 1e9, 100 * cached.decode_verdict->achieved_bytes_per_s / pk.working_set_bytes_per_s);
  std::printf(".\n");
}

// The seed's "Run Simulation": an 8B model on an H100, both modes, predicted
// by the same cost model that attributed the runs above.
void print_simulation(const Pass& cached, const Pass& naive, int prompt_tokens) {
  perf::SimOptions so;
  so.prompt = 128;
  so.gen = 4096;
  const auto model = perf::resolve_model("llama-3.1-8b");
  const perf::Simulation sim = perf::simulate("llama-3.1-8b", model.config, perf::find_hardware("h100"), so);
  std::printf("\n## The same comparison for Llama-3.1-8B (bf16) on an H100 SXM, simulated\n\n");
  std::printf("%s\n", perf::render_simulation_summary(sim).c_str());
  std::printf("| position | 8B on H100: cached tok/s | 8B on H100: no cache tok/s | this run: cached tok/s | this run: "
              "no cache tok/s |\n|---|---|---|---|---|\n");
  for (int pos : {128, 256, 512, 1024, 2048, 4096}) {
    const auto& st = sim.steps[size_t(pos - so.prompt)];
    std::string here_c = "-", here_n = "-";
    const int i = pos - prompt_tokens;  // generated-token index at that position
    if (i >= 1 && i < int(cached.r.token_seconds.size())) {
      here_c = std::to_string(int(1.0 / cached.r.token_seconds[size_t(i)] + 0.5));
      here_n = std::to_string(int(1.0 / naive.r.token_seconds[size_t(i)] + 0.5));
    }
    std::printf("| %d | %.0f | %.1f | %s | %s |\n", pos, 1.0 / st.cached.seconds, 1.0 / st.naive.seconds,
                here_c.c_str(), here_n.c_str());
  }
  std::printf("\n`kvlab simulate --model llama-3.1-8b --hw h100 --prompt 128 --gen 4096 --plot sim.png` draws it.\n");
}

// Several tokens per pass: the same greedy generation, plain and with
// prompt-lookup drafts (engine/ngram_draft.h), on a prompt whose
// continuation repeats its own structure. Returns whether the tokens match.
bool print_speculative(const Loaded& l, const ModelOptions& mo, int n) {
  constexpr int kDraft = 4;
  const std::vector<int32_t> prompt = l.tokenizer->encode(
      "class Vector3:\n    def __init__(self, x, y, z):\n        self.x = x\n        self.y = y\n        self.z = z\n\n"
      "    def __add__(self, other):\n        return Vector3(self.x + other.x, self.y + other.y, self.z + other.z)\n\n"
      "    def __sub__(self, other):\n        return Vector3(self.x - other.x, self.y - other.y, self.z - other.z)\n\n"
      "    def __mul__(self, other):\n",
      true, true);
  std::fprintf(stderr, "  speculative decoding ...\n");
  struct Run {
    engine::GenerateResult r;
    size_t passes = 0;
  };
  auto run = [&](int draft) {
    engine::Session session(*l.model, session_options(mo, l.model->config()));
    engine::GenerateOptions g = greedy(n);
    g.draft.max_tokens = draft;
    engine::GenerateResult r = engine::generate(session, prompt, g, [](int32_t) { return false; });
    return Run{std::move(r), session.trace().passes(engine::Phase::Decode)};
  };
  const Run plain = run(0), spec = run(kDraft);
  const bool same = plain.r.tokens == spec.r.tokens;
  std::printf("\n## Several tokens per pass: speculative decoding\n\n");
  std::printf("A decode pass reads every weight once, however many tokens it carries. With `--draft %d`,\n"
              "`kvlab run` drafts up to %d tokens from the context (what followed the same few tokens\n"
              "before) and checks them in one pass, keeping those the model would have picked.\n\n",
              kDraft, kDraft);
  std::printf("| code that repeats itself, %d tokens | plain | --draft %d |\n", n, kDraft);
  std::printf("|---|--:|--:|\n");
  std::printf("| decode tok/s | %.1f | %.1f (%.2fx) |\n", plain.r.decode_tok_s(), spec.r.decode_tok_s(),
              plain.r.decode_tok_s() > 0 ? spec.r.decode_tok_s() / plain.r.decode_tok_s() : 0.0);
  std::printf("| decode passes | %zu | %zu |\n", plain.passes, spec.passes);
  std::printf("| drafts kept | - | %d of %d |\n", spec.r.accepted, spec.r.drafted);
  std::printf("\nidentical tokens with and without drafts: %s\n", same ? "YES" : "NO");
  return same;
}

void demo(const DemoOptions& o) {
  if (o.n_predict < 2) throw Error("--n-predict must be at least 2");
  Loaded l = load(o.m);
  const std::string chat = l.tokenizer->apply_chat({{"user", o.prompt}});
  const std::vector<int32_t> prompt = l.tokenizer->encode(chat, true, true);
  const model::Config& c = l.model->config();
  std::printf("kvlab demo: %s (%s, %d layers, %.0f M params), greedy, %d tokens, prompt %zu tokens\n\n",
              c.name.c_str(), c.arch.c_str(), c.n_layer, double(l.model->n_params()) / 1e6, o.n_predict, prompt.size());
  std::printf("prompt: %s\n\n", o.prompt.c_str());
  std::fprintf(stderr, "generating:\n");
  // Untimed, as kvlab bench warms up: otherwise the first timed run alone
  // pays for waking the pool and the process's first passes, and the table
  // puts that on the KV cache (its TTFT came out about 1.2x the no-cache
  // one without this warm-up; one short prefill stays noisy either way).
  generate_once(l, o.m, true, prompt, 8, "warm-up (untimed)", std::nullopt);
  const auto profile = engine::try_load_profile();
  const Pass cached = generate_once(l, o.m, true, prompt, o.n_predict, "with KV cache", profile);
  const Pass naive = generate_once(l, o.m, false, prompt, o.n_predict, "without KV cache (recompute)", profile);

  const std::string first_eos = [&] {
    std::vector<int32_t> upto;
    for (int32_t id : cached.r.tokens) {
      if (l.tokenizer->is_end_of_generation(id)) break;
      upto.push_back(id);
    }
    return l.tokenizer->decode(upto);
  }();
  std::printf("output (up to the first end-of-turn token):\n%s\n\n", first_eos.c_str());
  const bool same = cached.r.tokens == naive.r.tokens;
  std::printf("identical tokens with and without the KV cache: %s (%zu tokens)\n\n", same ? "YES" : "NO",
              cached.r.tokens.size());

  std::printf("| metric                  | KV cache    | no KV cache | ratio  |\n");
  std::printf("|-------------------------|-------------|-------------|--------|\n");
  auto row = [](const char* name, double a, double b, const char* unit) {
    std::printf("| %-23s | %8.2f %-2s | %8.2f %-2s | %5.2fx |\n", name, a, unit, b, unit, b > 0 ? a / b : 0.0);
  };
  row("TTFT", cached.r.ttft_seconds * 1e3, naive.r.ttft_seconds * 1e3, "ms");
  row("prefill tok/s", cached.r.prefill_tok_s(), naive.r.prefill_tok_s(), "");
  row("decode tok/s", cached.r.decode_tok_s(), naive.r.decode_tok_s(), "");
  std::printf("\nper-token latency by position (ms; position = prompt + generated so far):\n\n");
  std::printf("| token # | position | KV cache | no KV cache | no-cache / cached |\n");
  std::printf("|---------|----------|----------|-------------|-------------------|\n");
  for (int i : {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}) {
    if (i > int(cached.r.token_seconds.size())) break;
    const double a = cached.r.token_seconds[size_t(i - 1)] * 1e3, b = naive.r.token_seconds[size_t(i - 1)] * 1e3;
    std::printf("| %7d | %8zu | %8.2f | %11.2f | %16.1fx |\n", i, prompt.size() + size_t(i - 1), a, b, b / a);
  }
  std::printf("\nWithout the cache every step recomputes the keys and values of all earlier positions,\n"
              "so its latency grows with the position; with the cache a step processes one token.\n");
  print_roofline(cached.roofline, naive.roofline);
  print_decode_stages(profile_decode(l, o.m, prompt, std::min(32, o.n_predict)), cached.roofline);
  const bool same_drafted = print_speculative(l, o.m, std::min(96, o.n_predict));
  print_simulation(cached, naive, int(prompt.size()));
  if (!same) throw Error("the two modes produced different tokens");
  if (!same_drafted) throw Error("speculative decoding produced different tokens");
}

}  // namespace

void add_demo_command(CLI::App& root) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* app = root.add_subcommand("demo", "the main job: generate with and without the KV cache and compare");
  add_model_option(*app, o->m);
  app->add_option("-n,--n-predict", o->n_predict, "tokens to generate in each mode")->capture_default_str()
      ->check(CLI::Range(2, 4096));
  app->add_option("-p,--prompt", o->prompt, "user message (wrapped in the chat template)")->capture_default_str();
  add_session_options(*app, o->m);
  app->callback([o] { demo(*o); });
}

}  // namespace kvlab::cli
