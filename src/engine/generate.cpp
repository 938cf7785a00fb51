#include "engine/generate.h"

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

  const auto t_start = Clock::now();
  std::span<const float> logits = s.prefill(prompt);
  r.prefill_seconds = seconds_since(t_start);

  auto t_token = t_start;
  for (;;) {
    if (opt.n_predict >= 0 && int(r.tokens.size()) >= opt.n_predict) {
      r.stop = StopReason::Length;
      break;
    }
    const int32_t id = sampler.sample(logits, s.history());
    const double dt = seconds_since(t_token);
    r.token_seconds.push_back(dt);
    if (r.tokens.empty()) r.ttft_seconds = dt;
    else r.decode_seconds += dt;
    r.tokens.push_back(id);
    if (on_token) on_token(id);
    if (!opt.ignore_eos && is_eog(id)) {
      r.stop = StopReason::Eos;
      break;
    }
    if (opt.n_predict >= 0 && int(r.tokens.size()) >= opt.n_predict) {
      r.stop = StopReason::Length;
      break;
    }
    if (s.n_past() >= n_ctx) {  // no room to feed the sampled token back
      r.stop = StopReason::Context;
      break;
    }
    t_token = Clock::now();
    logits = s.decode(id);
  }
  return r;
}

}  // namespace kvlab::engine
