#include "lab/simulate/layout.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace kvlab::perf {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

Layout make_layout(int tp, int pp, std::string_view link_id, const Hardware& hw) {
  if (tp < 1 || pp < 1 || tp * pp > kMaxDevices)
    throw Error("--tp and --pp must be at least 1 and use at most " + std::to_string(kMaxDevices) +
                " devices together, got tp " + std::to_string(tp) + ", pp " + std::to_string(pp));
  Layout l{tp, pp, std::nullopt};
  if (!link_id.empty())
    l.link = find_link(link_id);
  else if (l.devices() > 1 && !hw.link.empty())
    l.link = find_link(hw.link);
  if (l.devices() > 1 && !l.link) {
    std::string ids;
    for (const Link& k : link_catalog()) ids += (ids.empty() ? "" : ", ") + k.id;
    throw Error("hardware '" + hw.id + "' has no default link between devices in the catalog; name one with --link (" +
                ids + ")");
  }
  return l;
}

std::string layout_problem(const model::Config& c, const Layout& l) {
  const std::string tp = "--tp " + std::to_string(l.tp);
  if (c.n_head % l.tp != 0) return tp + " does not divide the model's " + std::to_string(c.n_head) + " query heads";
  if (c.ffn_width() % l.tp != 0)
    return tp + " does not divide the model's " + (c.is_moe() ? "expert " : "") + "MLP width " +
           std::to_string(c.ffn_width());
  if (c.n_head_kv % l.tp != 0 && l.tp % c.n_head_kv != 0)
    return tp + " neither divides nor is a multiple of the model's " + std::to_string(c.n_head_kv) + " KV heads";
  if (l.pp > c.n_layer)
    return "--pp " + std::to_string(l.pp) + " exceeds the model's " + std::to_string(c.n_layer) + " layers";
  return "";
}

void check_layout(const model::Config& c, const Layout& l) {
  if (std::string problem = layout_problem(c, l); !problem.empty()) throw Error(problem);
}

model::Config tp_shard(const model::Config& c, int tp) {
  model::Config s = c;
  if (tp == 1) return s;
  if (s.head_dim == 0) s.head_dim = c.n_embd / c.n_head;
  s.n_head = ceil_div(c.n_head, tp);
  // Beyond tp = n_kv_heads every device keeps one KV head (vLLM, TensorRT-LLM):
  // its K and V are computed and cached on tp / n_kv_heads devices alike.
  s.n_head_kv = std::max(1, ceil_div(c.n_head_kv, tp));
  s.n_ff = ceil_div(c.n_ff, tp);
  s.n_ff_exp = ceil_div(c.n_ff_exp, tp);  // each expert's columns; the router (n_expert rows) is whole
  s.n_vocab = ceil_div(c.n_vocab, tp);  // vocabulary-parallel embedding and LM head
  return s;
}

}  // namespace kvlab::perf
