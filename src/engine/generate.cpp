#include "engine/generate.h"

#include <algorithm>
#include <optional>

#include "common/error.h"
#include "engine/speculative.h"

namespace kvlab::engine {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Eos: return "eos";
    case StopReason::Length: return "length";
    case StopReason::Context: return "context";
  }
  return "?";
}

namespace {
// The state of one generate() call: the result so far and the clock of the
// last token.
class Generation {
 public:
  Generation(Session& s, const GenerateOptions& opt, const std::function<bool(int32_t)>& is_eog,
             const std::function<void(int32_t)>& on_token)
      : s_(s), opt_(opt), is_eog_(is_eog), on_token_(on_token), sampler_(opt.sampling) {}

  GenerateResult run(std::span<const int32_t> prompt);

 private:
  // Records a sampled token; false when generation ends with it.
  bool emit(int32_t id);
  // The drafts to feed after `id` (none without speculation), as many as
  // the context, the pass and the token budget take.
  std::vector<int32_t> drafts_after(int32_t id);
  // One verify pass of `id` and its drafts: emits the kept drafts and
  // returns the token after them (not fed yet), or nullopt when generation
  // ended on a kept draft.
  std::optional<int32_t> speculative_step(int32_t id, std::span<const int32_t> drafts);

  Session& s_;
  const GenerateOptions& opt_;
  const std::function<bool(int32_t)>& is_eog_;
  const std::function<void(int32_t)>& on_token_;
  sample::Sampler sampler_;
  GenerateResult r_;
  Clock::time_point t_token_;
};

bool Generation::emit(int32_t id) {
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - t_token_).count();
  t_token_ = now;
  r_.token_seconds.push_back(dt);
  if (r_.tokens.empty()) r_.ttft_seconds = dt;
  else r_.decode_seconds += dt;
  r_.tokens.push_back(id);
  if (on_token_) on_token_(id);
  if (!opt_.ignore_eos && is_eog_(id)) {
    r_.stop = StopReason::Eos;
    return false;
  }
  if (opt_.n_predict >= 0 && int(r_.tokens.size()) >= opt_.n_predict) {
    r_.stop = StopReason::Length;
    return false;
  }
  return true;
}

std::vector<int32_t> Generation::drafts_after(int32_t id) {
  if (opt_.draft.max_tokens <= 0) return {};
  std::vector<int32_t> context(s_.history().begin(), s_.history().end());
  context.push_back(id);
  int room = std::min(opt_.draft.max_tokens, s_.options().n_ctx - s_.n_past() - 1);
  room = std::min(room, s_.options().max_batch - 1);
  if (opt_.n_predict >= 0) room = std::min(room, opt_.n_predict - int(r_.tokens.size()));
  return ngram_draft(context, room, opt_.draft.ngram_max, opt_.draft.ngram_min);
}

std::optional<int32_t> Generation::speculative_step(int32_t id, std::span<const int32_t> drafts) {
  std::vector<int32_t> pass(1, id);
  pass.insert(pass.end(), drafts.begin(), drafts.end());
  const size_t base = size_t(s_.n_past()), V = s_.model().config().n_vocab;
  const std::span<const float> rows = s_.verify(pass);
  ++r_.verify_passes;
  r_.drafted += int(drafts.size());
  const std::vector<int32_t> drawn = accept_drafts(drafts, [&](size_t j) -> std::optional<int32_t> {
    return sampler_.sample(rows.subspan(j * V, V), std::span(s_.history()).first(base + j + 1));
  });
  size_t kept = 0;
  bool going = true;
  while (going && kept + 1 < drawn.size()) going = emit(drawn[kept++]);
  r_.accepted += int(kept);
  s_.truncate(int(base + 1 + kept));
  if (!going) return std::nullopt;
  return drawn.back();
}

GenerateResult Generation::run(std::span<const int32_t> prompt) {
  r_.prompt_tokens = int(prompt.size());
  const int n_ctx = s_.options().n_ctx;
  if (s_.n_past() + int(prompt.size()) > n_ctx)
    throw Error("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                std::to_string(n_ctx) + " (raise -c)");
  if (opt_.draft.max_tokens > 0 && !s_.options().kv_cache)
    throw Error("speculative decoding (--draft) needs the KV cache");

  const auto t_start = Clock::now();
  const std::span<const float> logits = s_.prefill(prompt);
  r_.prefill_seconds = seconds_since(t_start);
  t_token_ = t_start;
  if (opt_.n_predict == 0) return r_;

  int32_t id = sampler_.sample(logits, s_.history());
  while (emit(id)) {
    if (s_.n_past() >= n_ctx) {  // no room to feed the sampled token back
      r_.stop = StopReason::Context;
      break;
    }
    const std::vector<int32_t> drafts = drafts_after(id);
    if (drafts.empty()) {
      id = sampler_.sample(s_.decode(id), s_.history());
      continue;
    }
    const std::optional<int32_t> next = speculative_step(id, drafts);
    if (!next) break;
    id = *next;
  }
  return r_;
}
}  // namespace

GenerateResult generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& opt,
                        const std::function<bool(int32_t)>& is_eog, const std::function<void(int32_t)>& on_token) {
  return Generation(s, opt, is_eog, on_token).run(prompt);
}

}  // namespace kvlab::engine
