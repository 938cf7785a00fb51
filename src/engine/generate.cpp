#include "engine/generate.h"

#include <algorithm>

#include "common/error.h"

namespace kvlab::engine {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Eos: return "eos";
    case StopReason::Length: return "length";
    case StopReason::Context: return "context";
  }
  return "?";
}

GenerateResult generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& opt,
                        const std::function<bool(int32_t)>& is_eog, const std::function<void(int32_t)>& on_token) {
  GenerateResult r;
  r.prompt_tokens = int(prompt.size());
  sample::Sampler sampler(opt.sampling);
  const int n_ctx = s.options().n_ctx;
  if (s.n_past() + int(prompt.size()) > n_ctx)
    throw Error("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                std::to_string(n_ctx) + " (raise -c)");
  const bool speculate = opt.draft.max_tokens > 0;
  if (speculate && !s.options().kv_cache) throw Error("speculative decoding (--draft) needs the KV cache");

  const auto t_start = Clock::now();
  std::span<const float> logits = s.prefill(prompt);
  r.prefill_seconds = seconds_since(t_start);

  auto t_token = t_start;
  // Records a sampled token; false when generation ends with it.
  auto emit = [&](int32_t id) {
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - t_token).count();
    t_token = now;
    r.token_seconds.push_back(dt);
    if (r.tokens.empty()) r.ttft_seconds = dt;
    else r.decode_seconds += dt;
    r.tokens.push_back(id);
    if (on_token) on_token(id);
    if (!opt.ignore_eos && is_eog(id)) {
      r.stop = StopReason::Eos;
      return false;
    }
    if (opt.n_predict >= 0 && int(r.tokens.size()) >= opt.n_predict) {
      r.stop = StopReason::Length;
      return false;
    }
    return true;
  };

  if (opt.n_predict == 0) return r;
  int32_t id = sampler.sample(logits, s.history());
  std::vector<int32_t> pass, context;  // reused: a verify pass's tokens; the drafter's view of the sequence
  while (emit(id)) {
    if (s.n_past() >= n_ctx) {  // no room to feed the sampled token back
      r.stop = StopReason::Context;
      break;
    }
    // Drafts after `id`, as many as the context and the token budget take.
    pass.assign(1, id);
    if (speculate) {
      context.assign(s.history().begin(), s.history().end());
      context.push_back(id);
      int room = std::min(opt.draft.max_tokens, n_ctx - s.n_past() - 1);
      room = std::min(room, s.options().max_batch - 1);
      if (opt.n_predict >= 0) room = std::min(room, opt.n_predict - int(r.tokens.size()));
      const std::vector<int32_t> d = ngram_draft(context, room, opt.draft.ngram_max, opt.draft.ngram_min);
      pass.insert(pass.end(), d.begin(), d.end());
    }
    if (pass.size() == 1) {
      logits = s.decode(id);
      id = sampler.sample(logits, s.history());
      continue;
    }
    // Row i of the pass follows pass[i]; its token is sampled on the prefix
    // up to pass[i], as plain decoding would, and kept while it is the draft.
    const size_t base = size_t(s.n_past()), V = logits.size();
    const std::span<const float> rows = s.verify(pass);
    ++r.verify_passes;
    r.drafted += int(pass.size()) - 1;
    bool going = true;
    size_t kept = 0;  // drafts accepted
    for (size_t i = 0; i < pass.size(); ++i) {
      const int32_t t = sampler.sample(rows.subspan(i * V, V), std::span(s.history()).first(base + i + 1));
      if (i + 1 < pass.size() && t == pass[i + 1]) {
        ++kept;
        if (!(going = emit(t))) break;
        continue;
      }
      id = t;  // the token after the kept ones, not fed yet
      break;
    }
    r.accepted += int(kept);
    s.truncate(int(base + 1 + kept));
    if (!going) break;
  }
  return r;
}

}  // namespace kvlab::engine
