#include "lab/simulate/device_memory.h"

#include <algorithm>
#include <vector>

#include "lab/cost/cost.h"
#include "lab/hardware/formats.h"

namespace kvlab::perf {

namespace {

constexpr double kLogitBytes = 4.0;  // engines keep logits in f32

// Tensor-parallel groups tried, smallest first: powers of two, as engines
// split attention heads.
std::vector<int> tp_candidates(const model::Config& c, const Layout& asked) {
  std::vector<int> out;
  for (int tp = 1; tp <= kMaxSuggestedTp; tp *= 2) {
    Layout l = asked;
    l.tp = tp;
    if (layout_problem(c, l).empty() && l.devices() <= kMaxDevices) out.push_back(tp);
  }
  return out;
}

// The first tp of `candidates` at which the weights of `s`, named `weights`, fit, if any.
std::optional<FitSuggestion> first_fit(const model::Config& c, const Layout& asked, const MemoryShape& s,
                                       std::string_view weights, const std::vector<int>& candidates,
                                       double device_mem_bytes) {
  for (int tp : candidates) {
    Layout l = asked;
    l.tp = tp;
    const DeviceMemory m = device_memory(c, l, s, device_mem_bytes);
    if (m.fits()) return FitSuggestion{tp, std::string(weights), m};
  }
  return std::nullopt;
}

}  // namespace

DeviceMemory device_memory(const model::Config& c, const Layout& l, const MemoryShape& s, double device_mem_bytes) {
  const model::Config shard = tp_shard(c, l.tp);
  const ParamCount n = param_count(shard);
  // The busiest stage: ceil(L / pp) layers, and the first stage's embedding or
  // the last one's LM head (a copy of the embedding when they are tied), not both.
  const double layer_share = double((c.n_layer + l.pp - 1) / l.pp) / double(c.n_layer);
  const double other_stage_matrix = l.pp > 1 && n.lm_head > 0 ? std::min(n.embedding, n.lm_head) : 0.0;
  DeviceMemory m;
  m.weights = weight_memory_bytes(shard, s.weight_bytes) -
              (n.layers * (1.0 - layer_share) + other_stage_matrix) * s.weight_bytes;
  m.kv = kv_cache_bytes(shard, s.kv_bytes, double(s.positions)) * double(s.batch) * layer_share;
  // The residual stream in and out of a layer and its widest intermediate
  // (gate and up of the MLP: of each of a token's experts in a MoE, and the
  // router's logits), for every token of the largest pass, and the logits of
  // each sequence's last token.
  const double rows = double(s.batch) * double(s.pass_tokens);
  m.activations = rows * (2.0 * shard.n_embd + 2.0 * ffn_hidden_per_token(shard) + shard.n_expert) * s.act_bytes +
                  double(s.batch) * double(shard.n_vocab) * kLogitBytes;
  m.usable = device_mem_bytes * kUsableMemoryFraction;
  return m;
}

std::optional<FitSuggestion> smallest_fit(const model::Config& c, const Layout& asked, const MemoryShape& s,
                                          std::string_view weights, double device_mem_bytes) {
  const std::vector<int> tps = tp_candidates(c, asked);
  if (auto fit = first_fit(c, asked, s, weights, tps, device_mem_bytes)) return fit;
  // Narrower formats than the weights priced, widest first: the least
  // quantisation that fits.
  std::vector<const NumberFormat*> narrower;
  for (const NumberFormat& f : number_formats())
    if (f.bytes() < s.weight_bytes) narrower.push_back(&f);
  std::stable_sort(narrower.begin(), narrower.end(),
                   [](const NumberFormat* a, const NumberFormat* b) { return a->bits > b->bits; });
  for (const NumberFormat* f : narrower) {
    MemoryShape q = s;
    q.weight_bytes = f->bytes();
    if (auto fit = first_fit(c, asked, q, f->name, tps, device_mem_bytes)) return fit;
  }
  return std::nullopt;
}

}  // namespace kvlab::perf
