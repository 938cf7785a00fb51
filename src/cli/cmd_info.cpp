// kvlab info: what a GGUF model is, what it weighs and what its KV cache costs.
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "kernels/ops.h"
#include "lab/cost/cost.h"
#include "lab/simulate/model_catalog.h"

namespace kvlab::cli {
namespace {

struct InfoOptions {
  std::string model;
  bool metadata = false;
};

void info(const InfoOptions& o) {
  // Only metadata and shapes are read: map the file rather than copy it.
  const auto m = model::Model::load(resolve_model_path(o.model), gguf::Residency::Mapped);
  const model::Config& c = m->config();
  const gguf::File& f = m->file();
  std::map<std::string, std::pair<int, uint64_t>> by_dtype;  // name -> (tensors, bytes)
  for (const auto& t : f.tensors()) {
    auto& e = by_dtype[std::string(tensor::dtype_info(t.dtype).name)];
    ++e.first;
    e.second += t.n_bytes;
  }
  std::printf("file            %s\n", f.path().c_str());
  std::printf("file size       %s (%llu bytes), GGUF v%u, %zu tensors, %zu metadata keys\n",
              human_bytes(double(f.file_size())).c_str(), (unsigned long long)f.file_size(), f.version(),
              f.tensors().size(), f.metadata().size());
  std::printf("name            %s\n", c.name.c_str());
  std::printf("architecture    %s\n", c.arch.c_str());
  std::printf("parameters      %.1f M (%llu)", double(m->n_params()) / 1e6, (unsigned long long)m->n_params());
  if (c.is_moe())
    std::printf(", %.1f M active per token", (double(m->n_params()) - perf::param_count(c).idle_experts) / 1e6);
  std::printf("\n");
  std::printf("layers          %d\n", c.n_layer);
  std::printf("embedding       %d\n", c.n_embd);
  std::printf("feed-forward    %s (%s)\n", perf::describe_ffn(c).c_str(),
              c.ffn_act == model::FfnAct::GeluTanh ? "GeGLU" : "SwiGLU");
  std::printf("heads           %d query, %d KV (group %d), head dim %d\n", c.n_head, c.n_head_kv, c.gqa_group(),
              c.head_dim);
  std::printf("rope            %d dims, theta %g, %s order", c.rope_dim, double(c.rope_theta),
              c.rope_order == model::RopeOrder::NeoX ? "neox" : "normal");
  if (c.rope_yarn)
    std::printf(", YaRN: pairs up to %g unscaled, from %g positions x %g, blended between",
                double(c.rope_yarn_ramp[0]), double(c.rope_yarn_ramp[1]), double(c.rope_freq_scale));
  else if (c.rope_freq_scale != 1.f)
    std::printf(", positions x %g (linear scaling)", double(c.rope_freq_scale));
  auto divisors = [](const std::vector<float>& d, const char* what) {
    if (!d.empty())
      std::printf(", pair angles / %g .. %g (%s)", double(*std::min_element(d.begin(), d.end())),
                  double(*std::max_element(d.begin(), d.end())), what);
  };
  const model::Weights& w = m->weights();
  divisors(w.rope_freqs, "rope_freqs, Llama 3");
  if (!w.rope_long.empty()) std::printf(", LongRoPE above %d positions", c.rope_orig_ctx);
  divisors(w.rope_short, "short factors");
  divisors(w.rope_long, "long factors");
  const float magnitude = kernels::RopeScaling{.freq_scale = c.rope_freq_scale,
                                               .attn_factor = c.rope_attn_factor,
                                               .ext_factor = c.rope_yarn ? 1.f : 0.f}
                              .magnitude();
  if (magnitude != 1.f) std::printf(", cos and sin x %g", double(magnitude));
  if (c.attn_temp_scale != 0.f)
    std::printf(", queries x (1 + %g ln(floor(pos / %d) + 1))", double(c.attn_temp_scale), c.rope_orig_ctx);
  std::printf("\n");
  if (c.swa_window > 0)
    std::printf("attention       sliding window of %d in %d of every %d layers (rope theta %g there)\n", c.swa_window,
                c.swa_pattern - 1, c.swa_pattern, double(c.rope_theta_swa));
  if (c.qkv_bias || c.qk_norm || c.post_norms || !c.input_norms)
    std::printf("extras         %s%s%s%s\n", c.qkv_bias ? " q/k/v biases" : "",
                !c.qk_norm ? "" : c.qk_norm_whole ? " q/k norms (all heads at once)" : " q/k norms",
                c.post_norms ? " post-norms" : "", c.input_norms ? "" : " (no input norms)");
  if (c.attn_softcap > 0 || c.final_logit_softcap > 0)
    std::printf("soft caps       attention scores %g, logits %g (c·tanh(x/c); 0: none)\n", double(c.attn_softcap),
                double(c.final_logit_softcap));
  std::printf("rms eps         %g\n", double(c.rms_eps));
  std::printf("vocab           %d, %s output embedding\n", c.n_vocab, c.tied_embeddings ? "tied" : "separate");
  std::printf("context         %d (training)\n", c.n_ctx_train);
  std::printf("dtypes         ");
  for (const auto& [name, e] : by_dtype)
    std::printf(" %s: %d tensors, %s;", name.c_str(), e.first, human_bytes(double(e.second)).c_str());
  std::printf("\n");
  std::printf("weights/token   %s read per decode step (all matrices but the embedding table)\n",
              human_bytes(double(m->weights().matmul_bytes())).c_str());
  const double kv16 = 2.0 * c.n_layer * c.kv_dim() * 2, kv32 = kv16 * 2;
  std::printf("KV per token    %s in f16, %s in f32 (2 x %d layers x %d KV dims)\n", human_bytes(kv16).c_str(),
              human_bytes(kv32).c_str(), c.n_layer, c.kv_dim());
  std::printf("KV at context   %s in f16 for %d tokens\n", human_bytes(kv16 * c.n_ctx_train).c_str(), c.n_ctx_train);
  if (o.metadata) {
    std::printf("\nmetadata\n");
    for (const auto& [k, v] : f.metadata()) std::printf("  %-42s %s\n", k.c_str(), v.to_display().c_str());
  }
}

}  // namespace

void add_info_command(CLI::App& root) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* app = root.add_subcommand("info", "describe a GGUF model: architecture, sizes, dtypes, KV bytes per token");
  app->add_option("-m,--model", o->model, "GGUF model file (default: the default model)");
  app->add_flag("--metadata", o->metadata, "also list every metadata key");
  app->callback([o] { info(*o); });
}

}  // namespace kvlab::cli
