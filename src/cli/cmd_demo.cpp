// kvlab demo: the main job. Generates from one fixed prompt twice on the
// default model, with the KV cache and with full recomputation, shows that
// the tokens are identical, and puts the two timings side by side.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "engine/generate.h"

namespace kvlab::cli {
namespace {

struct DemoOptions {
  ModelOptions m;
  int n_predict = 128;
  std::string prompt = "Explain why the sky is blue, in a few sentences.";
};

struct Pass {
  engine::GenerateResult r;
  std::string text;
};

Pass generate_once(const Loaded& l, const ModelOptions& mo, bool kv_cache, const std::vector<int32_t>& prompt, int n) {
  ModelOptions o = mo;
  o.no_kv_cache = !kv_cache;
  engine::Session session(*l.model, session_options(o, l.model->config()));
  engine::GenerateOptions g;
  g.n_predict = n;
  g.ignore_eos = true;  // same length for both modes, so the positions line up
  g.sampling.temperature = 0;
  std::fprintf(stderr, "  %s ...", kv_cache ? "with KV cache" : "without KV cache (recompute)");
  Pass p;
  p.r = engine::generate(session, prompt, g, [](int32_t) { return false; });
  p.text = l.tokenizer->decode(p.r.tokens);
  std::fprintf(stderr, " %.1f s\n", p.r.prefill_seconds + p.r.decode_seconds + (p.r.ttft_seconds - p.r.prefill_seconds));
  return p;
}

void demo(const DemoOptions& o) {
  if (o.n_predict < 2) throw Error("--n-predict must be at least 2");
  Loaded l = load(o.m);
  const std::string chat = tokenizer::apply_chatml({{"user", o.prompt}});
  const std::vector<int32_t> prompt = l.tokenizer->encode(chat, true, true);
  const model::Config& c = l.model->config();
  std::printf("kvlab demo: %s (%s, %d layers, %.0f M params), greedy, %d tokens, prompt %zu tokens\n\n",
              c.name.c_str(), c.arch.c_str(), c.n_layer, double(l.model->n_params()) / 1e6, o.n_predict, prompt.size());
  std::printf("prompt: %s\n\n", o.prompt.c_str());
  std::fprintf(stderr, "generating:\n");
  const Pass cached = generate_once(l, o.m, true, prompt, o.n_predict);
  const Pass naive = generate_once(l, o.m, false, prompt, o.n_predict);

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
  if (!same) throw Error("the two modes produced different tokens");
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
