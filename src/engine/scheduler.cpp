#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace kvlab::engine {

SchedulerOptions checked(SchedulerOptions o) {
  if (o.n_threads <= 0) o.n_threads = kernels::ThreadPool::default_threads();
  if (o.n_seq < 1) throw Error("--parallel must be >= 1");
  if (o.n_ctx < 2) throw Error("context size must be >= 2");
  o.prefill_chunk = std::clamp(o.prefill_chunk, 1, o.n_ctx);
  if (std::isnan(o.pass_target_ms) || o.pass_target_ms > kMaxPassTargetMs)
    throw Error("--pass-target-ms must be auto or 0 to " + std::to_string(int(kMaxPassTargetMs)) + " ms");
  if (o.draft.max_tokens < 0 || o.draft.max_tokens > kMaxDraftTokens)
    throw Error("--draft must be 0 to " + std::to_string(kMaxDraftTokens));
  if (o.draft.ngram_max < 1) throw Error("--draft-ngram must be at least 1");
  // At least one full context, or a long request could never be admitted.
  const int min_blocks = kv::Cache::blocks_for(o.n_ctx);
  if (o.kv_blocks <= 0) o.kv_blocks = o.n_seq * min_blocks;
  if (o.kv_blocks < min_blocks)
    throw Error("KV pool of " + std::to_string(o.kv_blocks) + " blocks cannot hold one context of " +
                std::to_string(o.n_ctx) + " (needs " + std::to_string(min_blocks) + ")");
  return o;
}

int max_pass_tokens(const SchedulerOptions& o) { return o.prefill_chunk + o.n_seq * (1 + o.draft.max_tokens); }

int prefill_budget(const SchedulerOptions& o, const PassCosts& costs, int decode_rows) {
  if (o.pass_target_ms == 0 || decode_rows == 0 || !costs.decode_known()) return o.prefill_chunk;
  const int fewest = std::min(kMinPrefillChunk, o.prefill_chunk);
  if (!costs.prefill_known()) return fewest;
  const double target = o.pass_target_ms > 0 ? o.pass_target_ms : kAutoPassTarget * costs.decode_ms();
  // target = decode + tokens * per token (the linear cost PassCosts measures).
  const double fit = (target - costs.decode_ms()) / costs.prefill_token_ms();
  return int(std::clamp(fit, double(fewest), double(o.prefill_chunk)));
}

int admission_budget(const SchedulerOptions& o, int prompt_tokens, int max_tokens) {
  return int(std::min<int64_t>(o.n_ctx, int64_t(prompt_tokens) + std::max(max_tokens, 0)));
}

int draft_room(const SchedulerOptions& o, int wanted, int n_past) {
  return std::max(0, std::min({o.draft.max_tokens, wanted - 1, o.n_ctx - n_past - 1}));
}

bool queue_has_room(const SchedulerOptions& o, size_t waiting, size_t incoming, int running) {
  const int free_slots = o.n_seq - running;
  return int(waiting + incoming) <= o.max_queue + std::max(0, free_slots);
}

Scheduler::Scheduler(const SchedulerOptions& opt, kv::Cache& cache)
    : opt_(opt), cache_(cache), blocks_(cache), slots_(size_t(opt.n_seq)) {}

bool Scheduler::enqueue(std::vector<WaitingRequest>& ws) {
  if (!queue_has_room(opt_, waiting_.size(), ws.size(), running_.load())) return false;
  for (WaitingRequest& w : ws) waiting_.push_back(std::move(w));
  return true;
}

std::vector<WaitingRequest> Scheduler::take_cancelled() {
  std::vector<WaitingRequest> out;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (!it->handle->cancelled()) {
      ++it;
      continue;
    }
    out.push_back(std::move(*it));
    it = waiting_.erase(it);
  }
  return out;
}

void Scheduler::admit(const MakeSequence& make) {
  for (size_t slot = 0; slot < slots_.size() && !waiting_.empty(); ++slot) {
    if (slots_[slot]) continue;
    const GenRequest& head = waiting_.front().req;
    const int budget = admission_budget(opt_, int(head.prompt.size()), head.max_tokens);
    // A scored prompt needs every position's logits: none may come from the cache.
    const std::optional<int> reused = blocks_.admit(int(slot), head.prompt, budget, !head.scores_prompt());
    if (!reused) break;  // the head waits for blocks; nothing overtakes it
    WaitingRequest w = std::move(waiting_.front());
    waiting_.pop_front();
    slots_[slot] = make(std::move(w), int(slot), *reused);
    if (!slots_[slot]) {
      blocks_.release(int(slot));
      continue;  // the slot stays free
    }
    ++running_;
  }
}

void Scheduler::add_decode_rows(Sequence& s, StepPlan& plan) {
  // Drafts for what follows tokens.back() (the blocks admitted cover
  // max_tokens, so every position draft_room allows has its block).
  s.draft.clear();
  if (opt_.draft.max_tokens > 0)
    s.draft = ngram_draft(s.tokens, draft_room(opt_, s.req.max_tokens - s.n_generated, s.n_past), opt_.draft.ngram_max,
                          opt_.draft.ngram_min);
  plan.batch.push_back({s.tokens.back(), s.n_past, s.slot, true});
  for (size_t i = 0; i < s.draft.size(); ++i) plan.batch.push_back({s.draft[i], s.n_past + 1 + int(i), s.slot, true});
  plan.rows.push_back({&s, s.n_past, true, n_rows_, int(s.draft.size())});
  n_rows_ += 1 + s.draft.size();
  plan.advanced.push_back({&s, 1});
}

int Scheduler::add_prefill_rows(Sequence& s, int budget, StepPlan& plan) {
  const int prompt = int(s.req.prompt.size());
  const int n = std::min(budget, prompt - s.n_past);
  for (int i = 0; i < n; ++i) {
    const int pos = s.n_past + i;
    // The last position's logits give the first token (none with
    // max_tokens 0); a scored prompt's others, its next token's logprob.
    const bool sample = pos + 1 == prompt && s.req.max_tokens > 0;
    const bool logits = sample || (s.req.scores_prompt() && pos + 1 < prompt);
    plan.batch.push_back({s.req.prompt[size_t(pos)], pos, s.slot, logits});
    if (logits) plan.rows.push_back({&s, pos, sample, n_rows_++});
  }
  plan.advanced.push_back({&s, n});
  return n;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  n_rows_ = 0;
  for (auto& s : slots_)
    if (s && !s->prefilling) add_decode_rows(*s, plan);
  plan.decode_rows = int(plan.rows.size());
  const int chunk = prefill_budget(opt_, costs_, plan.decode_rows);
  int budget = chunk;
  for (auto& s : slots_)
    if (s && s->prefilling && budget > 0) budget -= add_prefill_rows(*s, budget, plan);
  plan.prefill_tokens = chunk - budget;
  return plan;
}

void Scheduler::advance(const StepPlan& plan) {
  for (const auto& [s, n] : plan.advanced) {
    s->n_past += n;
    blocks_.commit(s->slot, s->tokens, s->n_past);
  }
}

void Scheduler::truncate(Sequence& s) {
  // Rejected drafts' rows are past n_past: the next pass overwrites them.
  cache_.set_used(s.slot, s.n_past);
  blocks_.commit(s.slot, s.tokens, s.n_past);
}

void Scheduler::release(Sequence& s) {
  const int slot = s.slot;
  blocks_.release(slot);
  slots_[size_t(slot)].reset();  // destroys s
  --running_;
}

}  // namespace kvlab::engine
