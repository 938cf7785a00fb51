// kvlab run: generate from a prompt, streaming the text, then report timings.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "engine/generate.h"
#include "engine/output_processor.h"
#include "lab/bench/attribution.h"

namespace kvlab::cli {
namespace {

struct RunOptions {
  ModelOptions m;
  std::optional<std::string> prompt;  // set, even to "", when -p is given
  std::string file;
  int n_predict = 128;
  sample::Params sampling;               // the sampler's defaults; the seed below
  std::vector<std::string> logit_bias;   // ID+BIAS or ID-BIAS, as llama.cpp's -l
  int64_t seed = -1;
  engine::DraftOptions draft;
  bool ignore_eos = false, chat = false, json = false;
};

// "15043+1.5", "15043-inf": a token id, then its signed bias.
std::pair<int32_t, float> parse_logit_bias(const std::string& arg) {
  const auto bad = [&] { return Error("--logit-bias '" + arg + "': expected ID+BIAS or ID-BIAS, e.g. 15043+1 or 15043-inf"); };
  size_t i = 0;
  while (i < arg.size() && std::isdigit(static_cast<unsigned char>(arg[i]))) ++i;
  if (i == 0 || i > 9 || i == arg.size() || (arg[i] != '+' && arg[i] != '-')) throw bad();
  const std::string bias = arg.substr(i);
  char* end = nullptr;
  const float b = std::strtof(bias.c_str(), &end);
  if (end != bias.c_str() + bias.size() || bias.size() < 2) throw bad();
  return {int32_t(std::stol(arg.substr(0, i))), b};
}

nlohmann::json phase_json(const engine::PhaseWork& w, const std::optional<perf::Verdict>& v) {
  nlohmann::json j = {{"passes", w.passes},       {"seconds", w.seconds},         {"flops", w.flops},
                      {"weight_bytes", w.weight_bytes}, {"kv_bytes", w.kv_bytes},
                      {"gflop_s", w.seconds > 0 ? w.flops / w.seconds / 1e9 : 0.0},
                      {"gb_s", w.seconds > 0 ? w.bytes() / w.seconds / 1e9 : 0.0}};
  if (v) add_verdict_fields(j, *v);
  return j;
}

// The run on this machine's roofline: perf::Cost for the work, the trace for
// the time, kvlab probe's profile for the peaks (absent before a probe).
nlohmann::json roofline_json(const engine::Attribution& a) {
  nlohmann::json j;
  j["prefill"] = phase_json(a.prefill, a.prefill_verdict);
  j["decode"] = phase_json(a.decode, a.decode_verdict);
  j["decode"]["bytes_per_token"] = a.decode_bytes_per_step();
  if (a.peaks) {
    j["peaks"] = {{"flops", a.peaks->flops}, {"kind", a.peaks->flops_kind}, {"bytes_per_s", a.peaks->bytes_per_s},
                  {"source", a.peaks->source}};
    if (const double s = a.peaks->sustained_bytes_per_s; s > 0) {
      j["peaks"]["sustained_bytes_per_s"] = s;
      if (a.decode_verdict) j["decode"]["pct_of_sustained_bandwidth"] = 100 * a.decode_verdict->achieved_bytes_per_s / s;
    }
    if (const double ws = a.peaks->working_set_bytes_per_s; ws > 0) {
      j["peaks"]["working_set_bytes_per_s"] = ws;
      if (a.decode_verdict) j["decode"]["pct_of_working_set_bandwidth"] = 100 * a.decode_verdict->achieved_bytes_per_s / ws;
    }
  } else
    j["peaks"] = nullptr;
  return j;
}

engine::GenerateOptions generate_options(const RunOptions& o, const tokenizer::Tokenizer& tok) {
  engine::GenerateOptions g;
  g.n_predict = o.n_predict;
  g.ignore_eos = o.ignore_eos;
  g.sampling = o.sampling;
  g.sampling.seed = o.seed >= 0 ? uint64_t(o.seed) : std::random_device{}();
  for (const std::string& b : o.logit_bias) g.sampling.logit_bias.push_back(parse_logit_bias(b));
  sample::validate(g.sampling, tok.n_vocab());
  g.draft = o.draft;
  return g;
}

std::vector<int32_t> prompt_tokens(std::string text, bool chat, const tokenizer::Tokenizer& tok) {
  if (chat) text = tok.apply_chat({{"user", text}});
  std::vector<int32_t> prompt = tok.encode(text, true, true);
  if (prompt.empty()) throw Error("the prompt is empty and this model adds no BOS token: nothing to start from");
  return prompt;
}

// The KV cache's size at the end of the run (0 without one).
size_t kv_bytes_used(const engine::Session& session) {
  return session.options().kv_cache ? session.cache().bytes_per_token() * size_t(session.n_past()) : 0;
}

nlohmann::json speculative_json(const engine::DraftOptions& draft, const engine::GenerateResult& r) {
  return {{"method", "ngram"},
          {"draft_max", draft.max_tokens},
          {"ngram_max", draft.ngram_max},
          {"verify_passes", r.verify_passes},
          {"drafted", r.drafted},
          {"accepted", r.accepted},
          {"acceptance", r.drafted ? double(r.accepted) / r.drafted : 0.0}};
}

void print_json(const Loaded& l, const engine::Session& session, const engine::GenerateOptions& g,
                const engine::GenerateResult& r) {
  std::vector<int32_t> shown = r.tokens;
  if (r.stop == engine::StopReason::Eos) shown.pop_back();
  nlohmann::json j;
  j["text"] = l.tokenizer->decode(shown);
  j["prompt_tokens"] = r.prompt_tokens;
  j["tokens"] = r.tokens;
  j["stop"] = engine::stop_reason_name(r.stop);
  j["ttft_ms"] = r.ttft_seconds * 1e3;
  j["prefill_ms"] = r.prefill_seconds * 1e3;
  j["prefill_tok_s"] = r.prefill_tok_s();
  j["decode_tok_s"] = r.decode_tok_s();
  std::vector<double> ms;
  for (double s : r.token_seconds) ms.push_back(s * 1e3);
  j["token_ms"] = ms;
  j["kv_cache"] = session.options().kv_cache;
  if (g.draft.max_tokens > 0) j["speculative"] = speculative_json(g.draft, r);
  j["kv_type"] = tensor::dtype_info(session.options().kv_type).name;
  j["kv_bytes"] = kv_bytes_used(session);
  j["kv_bytes_per_token"] = session.cache().bytes_per_token();
  j["n_ctx"] = session.options().n_ctx;
  j["threads"] = session.options().n_threads;
  j["model"] = l.model->file().path();
  j["model_name"] = l.model->config().name;
  j["roofline"] = roofline_json(engine::attribute(session.trace(), *l.model, session.cache().elem_bytes(),
                                                  session.options().n_threads, engine::try_load_profile()));
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

// The timings on stderr, after the streamed text.
void print_stats(const engine::Session& session, const engine::GenerateOptions& g, const engine::GenerateResult& r) {
  if (r.stop == engine::StopReason::Context)
    std::fprintf(stderr, "kvlab: stopped: the context of %d tokens is full\n", session.options().n_ctx);
  if (g.draft.max_tokens > 0) {
    const size_t passes = session.trace().passes(engine::Phase::Decode);
    std::fprintf(stderr, "speculative (ngram, up to %d drafts): %d of %d drafted tokens kept (%.0f%%) in %d verify passes; "
                 "%.2f tokens per decode pass\n", g.draft.max_tokens, r.accepted, r.drafted,
                 r.drafted ? 100.0 * r.accepted / r.drafted : 0.0, r.verify_passes,
                 passes ? double(r.tokens.size() - 1) / double(passes) : 0.0);
  }
  std::fprintf(stderr,
               "prompt tokens: %d | generated: %zu (%s) | TTFT: %.1f ms | prefill: %.1f tok/s | decode: %.1f tok/s | "
               "KV cache: %s (%s, %d threads)\n",
               r.prompt_tokens, r.tokens.size(), engine::stop_reason_name(r.stop), r.ttft_seconds * 1e3,
               r.prefill_tok_s(), r.decode_tok_s(),
               session.options().kv_cache ? human_bytes(double(kv_bytes_used(session))).c_str()
                                          : "off (recomputed every step)",
               std::string(tensor::dtype_info(session.options().kv_type).name).c_str(), session.options().n_threads);
}

void run(const RunOptions& o) {
  if (o.prompt.has_value() == !o.file.empty()) throw Error("give exactly one of -p PROMPT or -f FILE");
  std::string text = o.prompt ? *o.prompt : read_file(o.file);
  Loaded l = load(o.m);
  const std::vector<int32_t> prompt = prompt_tokens(std::move(text), o.chat, *l.tokenizer);
  const engine::GenerateOptions g = generate_options(o, *l.tokenizer);

  engine::Session session(*l.model, session_options(o.m, l.model->config()));
  engine::OutputProcessor output(*l.tokenizer, {}, false);
  auto write = [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  };
  auto is_eog = [&](int32_t id) { return l.tokenizer->is_end_of_generation(id); };
  auto print = [&](int32_t id) {
    if (o.json || (!o.ignore_eos && is_eog(id))) return;
    output.append(id);
    write(output.release(false).text);
  };
  const engine::GenerateResult r = engine::generate(session, prompt, g, is_eog, print);
  if (o.json) return print_json(l, session, g, r);
  output.flush();
  write(output.release(true).text);
  std::printf("\n");
  std::fflush(stdout);
  print_stats(session, g, r);
}

}  // namespace

void add_run_command(CLI::App& root) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = root.add_subcommand("run", "generate text from a prompt, streaming it, with timings on stderr");
  add_model_option(*app, o->m);
  app->add_option("-p,--prompt", o->prompt, "prompt text");
  app->add_option("-f,--file", o->file, "read the prompt from a file");
  app->add_option("-n,--n-predict", o->n_predict, "tokens to generate (-1: until EOS or a full context)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
  add_session_options(*app, o->m);
  sample::Params& sp = o->sampling;
  app->add_option("--temp", sp.temperature, "temperature (0: greedy)")->capture_default_str();
  app->add_option("--top-k", sp.top_k, "keep the k most likely tokens (0: all)")->capture_default_str();
  app->add_option("--top-p", sp.top_p, "nucleus sampling mass (1: off)")->capture_default_str();
  app->add_option("--min-p", sp.min_p, "drop tokens below min-p x the top probability (0: off)")->capture_default_str();
  app->add_option("--repeat-penalty", sp.repeat_penalty, "divide a recent token's positive logit by this (1: off)")
      ->capture_default_str();
  app->add_option("--frequency-penalty", sp.frequency_penalty,
                  "subtract this x its count in the window from a recent token's logit (0: off)")->capture_default_str();
  app->add_option("--presence-penalty", sp.presence_penalty, "subtract this from a recent token's logit (0: off)")
      ->capture_default_str();
  app->add_option("--repeat-last-n", sp.repeat_last_n, "how many recent tokens (prompt included) the penalties see")
      ->capture_default_str();
  app->add_option("-l,--logit-bias", o->logit_bias, "ID+BIAS or ID-BIAS (-inf bans the token); repeatable");
  app->add_option("--seed", o->seed, "RNG seed (-1: random)")->capture_default_str();
  add_draft_options(*app, o->draft);
  app->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-generation tokens");
  app->add_flag("--chat", o->chat, "wrap the prompt in the model's chat template (the Jinja template in its GGUF)");
  app->add_flag("--json", o->json, "print one JSON object with the text, ids and timings instead");
  app->callback([o] { run(*o); });
}

}  // namespace kvlab::cli
