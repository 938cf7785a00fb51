// kvlab perplexity: how well a model predicts a text (lab/quality/perplexity.h
// has the method, llama.cpp's), so the cost of a weight or KV format in
// quality can be put next to its speed.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "lab/quality/perplexity.h"

namespace kvlab::cli {
namespace {

struct PerplexityOptions {
  ModelOptions m;
  std::string file;
  int chunks = -1;
  bool json = false;
};

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
  const int32_t bos = l.tokenizer->vocab().add_bos ? l.tokenizer->vocab().bos : -1;
  if (!o.json)
    std::printf("%s on %s: %zu tokens, chunks of %d, the second half of each scored\n",
                l.model->config().name.c_str(), o.file.c_str(), tokens.size(), so.n_ctx);
  const engine::PerplexityResult r = engine::perplexity(session, tokens, bos, o.chunks, [&](int c, double ppl) {
    if (o.json) return;
    std::printf("%s[%d]%.4f", c == 0 ? "" : ",", c + 1, ppl);
    std::fflush(stdout);
  });
  const std::string kv(tensor::dtype_info(so.kv_type).name);
  if (o.json) {
    nlohmann::json j;
    j["model"] = l.model->file().path();
    j["file"] = o.file;
    j["tokens"] = tokens.size();
    j["n_ctx"] = so.n_ctx;
    j["chunks"] = r.chunks;
    j["scored"] = r.scored;
    j["ppl"] = r.ppl;
    j["ppl_err"] = r.ppl_err;
    j["nll"] = r.nll;
    j["running_ppl"] = r.running_ppl;
    j["tok_s"] = r.tok_s();
    j["threads"] = session.options().n_threads;
    j["kv_cache"] = so.kv_cache;
    j["kv_type"] = kv;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("\nPPL = %.4f +/- %.4f (mean NLL %.4f nats per token over %lld predictions in %d chunks)\n", r.ppl,
              r.ppl_err, r.nll, static_cast<long long>(r.scored), r.chunks);
  std::fprintf(stderr, "evaluated %d tokens at %.1f tok/s (%d threads, KV %s%s)\n", r.chunks * so.n_ctx, r.tok_s(),
               session.options().n_threads, kv.c_str(), so.kv_cache ? "" : ", recomputed: no KV cache");
}

}  // namespace

void add_perplexity_command(CLI::App& root) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* app = root.add_subcommand(
      "perplexity", "perplexity of a text under the model (llama-perplexity's chunks and scoring; -c default 512)");
  add_model_option(*app, o->m);
  app->add_option("-f,--file", o->file, "the text to score")->required();
  add_session_options(*app, o->m);
  app->add_option("--chunks", o->chunks, "score at most this many chunks (-1: all)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
  app->add_flag("--json", o->json, "print one JSON object with the figures instead");
  app->callback([o] { perplexity(*o); });
}

}  // namespace kvlab::cli
