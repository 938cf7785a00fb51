// kvlab perplexity: how well a model predicts a text (lab/quality/perplexity.h
// has the method, llama.cpp's), so the cost of a weight or KV format in
// quality can be put next to its speed. With --kl-divergence-base it also
// writes the model's log-probabilities as a base, or, with --kl-divergence,
// compares the model against such a base (lab/quality/kl_divergence.h);
// the flags and the file are llama-perplexity's.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "lab/quality/kl_divergence.h"
#include "lab/quality/logits_file.h"
#include "lab/quality/perplexity.h"

namespace kvlab::cli {
namespace {

struct PerplexityOptions {
  ModelOptions m;
  std::string file;
  int chunks = -1;
  bool json = false;
  std::string kld_base;  // --kl-divergence-base
  bool kld = false;      // --kl-divergence
};

int32_t bos_of(const Loaded& l) { return l.tokenizer->vocab().add_bos ? l.tokenizer->vocab().bos : -1; }

nlohmann::json run_fields(const engine::Session& session, const engine::SessionOptions& so) {
  return {{"threads", session.options().n_threads},
          {"kv_cache", so.kv_cache},
          {"kv_type", std::string(tensor::dtype_info(so.kv_type).name)}};
}

void print_run_line(int tokens, double tok_s, const engine::SessionOptions& so, int threads) {
  std::fprintf(stderr, "evaluated %d tokens at %.1f tok/s (%d threads, KV %s%s)\n", tokens, tok_s, threads,
               tensor::dtype_info(so.kv_type).name.data(), so.kv_cache ? "" : ", recomputed: no KV cache");
}

// Without --kl-divergence: the text's perplexity, and with a base path the
// base written along the way.
void perplexity(PerplexityOptions o) {
  const std::string text = read_file(o.file);
  Loaded l = load(o.m);
  // As llama-perplexity: BOS where the model adds one, special-token texts
  // read as plain text.
  const std::vector<int32_t> tokens = l.tokenizer->encode(text, true, false);
  if (o.m.n_ctx == 0) o.m.n_ctx = 512;  // llama-perplexity's default context
  engine::SessionOptions so = session_options(o.m, l.model->config());
  so.max_batch = so.n_ctx;
  engine::Session session(*l.model, so);
  std::unique_ptr<engine::LogitsFileWriter> base;
  if (!o.kld_base.empty()) {
    const engine::Chunks chunks = engine::plan_chunks(so.n_ctx, tokens.size(), o.chunks);
    base = std::make_unique<engine::LogitsFileWriter>(
        o.kld_base, engine::LogitsFileHeader{so.n_ctx, l.model->config().n_vocab, chunks.count}, tokens);
  }
  if (!o.json)
    std::printf("%s on %s: %zu tokens, chunks of %d, the second half of each scored\n",
                l.model->config().name.c_str(), o.file.c_str(), tokens.size(), so.n_ctx);
  const auto on_chunk = [&](int c, double ppl) {
    if (base) base->write_chunk();
    if (o.json) return;
    std::printf("%s[%d]%.4f", c == 0 ? "" : ",", c + 1, ppl);
    std::fflush(stdout);
  };
  const auto on_row = [&](size_t j, std::span<const float> logits) {
    engine::quantize_log_probs(logits, base->row(j));
  };
  const engine::PerplexityResult r = engine::perplexity(session, tokens, bos_of(l), o.chunks, on_chunk,
                                                        base ? engine::Session::ScoredRow(on_row) : nullptr);
  if (o.json) {
    nlohmann::json j = {{"model", l.model->file().path()}, {"file", o.file},       {"tokens", tokens.size()},
                        {"n_ctx", so.n_ctx},               {"chunks", r.chunks},   {"scored", r.scored},
                        {"ppl", r.ppl},                    {"ppl_err", r.ppl_err}, {"nll", r.nll},
                        {"running_ppl", r.running_ppl},    {"tok_s", r.tok_s()}};
    j.update(run_fields(session, so));
    if (base) j["kl_divergence_base"] = o.kld_base;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("\nPPL = %.4f +/- %.4f (mean NLL %.4f nats per token over %lld predictions in %d chunks)\n", r.ppl,
              r.ppl_err, r.nll, static_cast<long long>(r.scored), r.chunks);
  if (base) std::printf("base log-probabilities written to %s\n", o.kld_base.c_str());
  print_run_line(r.chunks * so.n_ctx, r.tok_s(), so, session.options().n_threads);
}

// The quantiles llama-perplexity prints, as (label, fraction).
using Quantiles = std::vector<std::pair<const char*, double>>;
const Quantiles kKldQuantiles = {{"max", 1},       {"99.9%", 0.999}, {"99.0%", 0.99}, {"95.0%", 0.95},
                                 {"90.0%", 0.9},   {"median", 0.5},  {"10.0%", 0.1},  {"5.0%", 0.05},
                                 {"1.0%", 0.01},   {"0.1%", 0.001},  {"min", 0}};
const Quantiles kDeltaPQuantiles = {{"max", 1},    {"99.9%", 0.999}, {"99.0%", 0.99}, {"95.0%", 0.95},
                                    {"90.0%", 0.9}, {"75.0%", 0.75}, {"median", 0.5},  {"25.0%", 0.25},
                                    {"10.0%", 0.1}, {"5.0%", 0.05},  {"1.0%", 0.01},   {"0.1%", 0.001},
                                    {"min", 0}};

nlohmann::json quantiles_of(std::vector<double> values, const Quantiles& at) {
  std::sort(values.begin(), values.end());
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [label, fraction] : at) j[label] = engine::quantile(values, fraction);
  return j;
}

nlohmann::json mean_err(const engine::MeanErr& m) { return {{"value", m.value}, {"err", m.err}}; }

nlohmann::json kld_json(const engine::KldStats& s, std::span<const engine::KldToken> tokens) {
  std::vector<double> kld, dp;
  for (const engine::KldToken& t : tokens) kld.push_back(t.kld), dp.push_back(t.p_diff);
  return {{"scored", s.count},
          {"ppl", mean_err(s.ppl)},
          {"ppl_base", mean_err(s.ppl_base)},
          {"ln_ppl_correlation", s.ln_ppl_correlation},
          {"ln_ppl_ratio", mean_err(s.ln_ppl_ratio)},
          {"ppl_ratio", mean_err(s.ppl_ratio)},
          {"ppl_diff", mean_err(s.ppl_diff)},
          {"kld", mean_err(s.kld)},
          {"kld_quantiles", quantiles_of(kld, kKldQuantiles)},
          {"p_diff", mean_err(s.p_diff)},
          {"p_diff_quantiles", quantiles_of(dp, kDeltaPQuantiles)},
          {"rms_p_diff", mean_err(s.rms_p_diff)},
          {"same_top", mean_err(s.same_top)}};
}

void print_kld_report(const nlohmann::json& k) {
  const auto pm = [&](const char* label, const char* key, double scale, const char* unit) {
    std::printf("%-30s: %10.6f ± %10.6f%s\n", label, scale * k[key]["value"].get<double>(),
                scale * k[key]["err"].get<double>(), unit);
  };
  std::printf("\n====== Perplexity statistics ======\n");
  pm("Mean PPL(Q)", "ppl", 1, "");
  pm("Mean PPL(base)", "ppl_base", 1, "");
  std::printf("%-30s: %6.2f%%\n", "Cor(ln(PPL(Q)), ln(PPL(base)))", 100 * k["ln_ppl_correlation"].get<double>());
  pm("Mean ln(PPL(Q)/PPL(base))", "ln_ppl_ratio", 1, "");
  pm("Mean PPL(Q)/PPL(base)", "ppl_ratio", 1, "");
  pm("Mean PPL(Q)-PPL(base)", "ppl_diff", 1, "");
  std::printf("\n====== KL divergence statistics ======\n");
  pm("Mean KLD", "kld", 1, "");
  for (const auto& [label, fraction] : kKldQuantiles)
    std::printf("%-7s KLD: %10.6f\n", label, k["kld_quantiles"][label].get<double>());
  std::printf("\n====== Token probability statistics ======\n");
  pm("Mean Δp", "p_diff", 100, " %");
  for (const auto& [label, fraction] : kDeltaPQuantiles)
    std::printf("%-7s Δp: %7.3f%%\n", label, 100 * k["p_diff_quantiles"][label].get<double>());
  pm("RMS Δp", "rms_p_diff", 100, " %");
  pm("Same top p", "same_top", 100, " %");
}

// --kl-divergence: the model against the base file's log-probabilities, on
// the file's tokens and chunks.
void compare_to_base(PerplexityOptions o) {
  engine::LogitsFileReader base(o.kld_base);
  const int n_ctx = base.header().n_ctx;
  if (o.m.n_ctx != 0 && o.m.n_ctx != n_ctx)
    throw Error("-c " + std::to_string(o.m.n_ctx) + " is not the base's chunk size of " + std::to_string(n_ctx) +
                " (leave -c out: it comes from the base)");
  o.m.n_ctx = n_ctx;
  Loaded l = load(o.m);
  engine::SessionOptions so = session_options(o.m, l.model->config());
  so.max_batch = so.n_ctx;
  engine::Session session(*l.model, so);
  if (!o.json)
    std::printf("%s against %s: %d chunks of %d, the second half of each scored\n%5s %12s %12s %10s\n",
                l.model->config().name.c_str(), o.kld_base.c_str(), base.header().n_chunk, n_ctx, "chunk", "PPL",
                "mean KLD", "same top");
  const auto on_chunk = [&](int c, std::span<const engine::KldToken> so_far) {
    if (o.json) return;
    const engine::KldStats s = engine::kld_stats(so_far);
    std::printf("%5d %12.4f %12.6f %9.3f%%\n", c + 1, s.ppl.value, s.kld.value, 100 * s.same_top.value);
    std::fflush(stdout);
  };
  const engine::KldResult r = engine::kl_divergence(session, base, bos_of(l), o.chunks, on_chunk);
  nlohmann::json k = kld_json(engine::kld_stats(r.tokens), r.tokens);
  const double tok_s = r.seconds > 0 ? double(r.chunks.count) * n_ctx / r.seconds : 0.0;
  if (o.json) {
    k.update({{"model", l.model->file().path()}, {"kl_divergence_base", o.kld_base}, {"n_ctx", n_ctx},
              {"chunks", r.chunks.count}, {"tok_s", tok_s}});
    k.update(run_fields(session, so));
    std::cout << k.dump(2) << "\n";
    return;
  }
  print_kld_report(k);
  print_run_line(r.chunks.count * n_ctx, tok_s, so, session.options().n_threads);
}

void run(const PerplexityOptions& o) {
  if (o.kld) {
    if (!o.file.empty()) throw Error("--kl-divergence reads its tokens from the base file: leave -f out");
    compare_to_base(o);
    return;
  }
  if (o.file.empty()) throw Error("perplexity needs a text (-f), or --kl-divergence to compare against a base");
  perplexity(o);
}

}  // namespace

void add_perplexity_command(CLI::App& root) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* app = root.add_subcommand(
      "perplexity", "perplexity of a text under the model (llama-perplexity's chunks and scoring; -c default 512)");
  add_model_option(*app, o->m);
  app->add_option("-f,--file", o->file, "the text to score");
  add_session_options(*app, o->m);
  app->add_option("--chunks", o->chunks, "score at most this many chunks (-1: all)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
  app->add_flag("--json", o->json, "print one JSON object with the figures instead");
  CLI::Option* base = app->add_option(
      "--kl-divergence-base", o->kld_base,
      "llama-perplexity's log-probabilities file: written from the model on -f, or read with --kl-divergence");
  app->add_flag("--kl-divergence", o->kld,
                "compare the model against --kl-divergence-base (KLD, Δp, same top p, PPL ratio; the tokens and -c "
                "come from the base)")
      ->needs(base);
  app->callback([o] { run(*o); });
}

}  // namespace kvlab::cli
