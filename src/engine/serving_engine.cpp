#include "engine/serving_engine.h"

#include <algorithm>
#include <limits>

#include "engine/logprobs.h"
#include "engine/speculative.h"

namespace kvlab::engine {
namespace {
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

RunnerOptions runner_options(const SchedulerOptions& o) {
  RunnerOptions r;
  r.n_seq = o.n_seq;
  r.n_ctx = o.n_ctx;
  r.n_threads = o.n_threads;
  r.max_tokens = max_pass_tokens(o);
  r.kv_type = o.kv_type;
  r.kv_blocks = o.kv_blocks;
  return r;
}
}  // namespace

ServingEngine::ServingEngine(const model::Model& model, const tokenizer::Tokenizer& tok, SchedulerOptions opt,
                             ServingObserver& observer)
    : tok_(tok),
      grammar_vocab_(tok),
      opt_(checked(opt)),
      observer_(observer),
      runner_(model, runner_options(opt_)),
      scheduler_(opt_, runner_.cache()) {
  thread_ = std::thread([this] { loop(); });
}

ServingEngine::~ServingEngine() { shutdown(); }

void ServingEngine::shutdown() {
  {
    std::lock_guard l(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard l(mu_);
  for (const auto& s : scheduler_.slots())
    if (s) s->handle->finish("error", "server shutting down");
  for (WaitingRequest& w : scheduler_.take_waiting()) w.handle->finish("error", "server shutting down");
}

std::shared_ptr<Handle> ServingEngine::submit(GenRequest req) {
  std::vector<GenRequest> one;
  one.push_back(std::move(req));
  std::vector<std::shared_ptr<Handle>> handles = submit_all(std::move(one));
  return handles.empty() ? nullptr : handles.front();
}

std::vector<std::shared_ptr<Handle>> ServingEngine::submit_all(std::vector<GenRequest> reqs) {
  std::vector<std::shared_ptr<Handle>> handles;
  std::vector<WaitingRequest> waiting;
  const Clock::time_point now = Clock::now();
  for (GenRequest& r : reqs) {
    handles.push_back(std::make_shared<Handle>());
    waiting.push_back({std::move(r), handles.back(), now});
  }
  {
    std::lock_guard l(mu_);
    if (stop_ || !scheduler_.enqueue(waiting)) return {};
  }
  cv_.notify_all();
  return handles;
}

Gauges ServingEngine::gauges() const {
  Gauges g;
  {
    std::lock_guard l(mu_);
    g.waiting = int(scheduler_.waiting());
  }
  g.running = scheduler_.running();
  g.slots = opt_.n_seq;
  g.kv_blocks = opt_.kv_blocks;
  g.kv_blocks_used = kv_used_.load();
  g.kv_blocks_cached = kv_cached_.load();
  g.prefix_lookups = prefix_lookups_.load();
  g.prefix_hits = prefix_hits_.load();
  return g;
}

void ServingEngine::loop() {
  for (;;) {
    {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stop_ || scheduler_.running() > 0 || scheduler_.waiting() > 0; });
      if (stop_) return;
    }
    try {
      admit();
      step();
    } catch (const std::exception& e) {
      // Never let one bad request take the server down: fail what is running.
      for (const auto& s : scheduler_.slots())
        if (s) finish(*s, "error", e.what());
    }
  }
}

void ServingEngine::publish_kv_stats() {
  const kv::BlockManager::Stats st = scheduler_.kv_stats();
  kv_used_ = st.in_use;
  kv_cached_ = st.cached;
  prefix_lookups_ = st.lookups;
  prefix_hits_ = st.hits;
}

void ServingEngine::admit() {
  std::lock_guard l(mu_);
  for (WaitingRequest& w : scheduler_.take_cancelled()) {
    w.handle->finish("cancelled");
    observer_.request_finished("cancelled");
  }
  scheduler_.admit([this](WaitingRequest&& w, int slot, int reused) { return make_sequence(std::move(w), slot, reused); });
  publish_kv_stats();
}

std::unique_ptr<Sequence> ServingEngine::make_sequence(WaitingRequest&& w, int slot, int reused) {
  const std::shared_ptr<Handle> h = w.handle;
  std::unique_ptr<Sequence> s;
  try {
    s = std::make_unique<Sequence>(slot, std::move(w.req), h, w.arrival, reused, tok_, grammar_vocab_);
  } catch (const std::exception& e) {  // sampling parameters the sampler refuses
    observer_.request_finished("error");
    h->finish("error", e.what());
    return nullptr;
  }
  observer_.observe_queue(ms_between(s->times.arrival, s->times.admitted) / 1e3);
  return s;
}

void ServingEngine::step() {
  // Clients that went away free their slot before the next pass.
  for (const auto& s : scheduler_.slots())
    if (s && s->handle->cancelled()) finish(*s, "cancelled");

  const StepPlan plan = scheduler_.schedule();
  if (plan.empty()) return;
  const Clock::time_point start = Clock::now();
  std::span<const float> logits;
  try {
    logits = runner_.step(plan.batch);
  } catch (const std::exception& e) {
    for (const auto& [s, n] : plan.advanced) finish(*s, "error", e.what());
    return;
  }
  scheduler_.advance(plan);
  // Prompts done now that asked for no token at all (echo with max_tokens
  // 0): no row of theirs is sampled, so none of them finishes below.
  std::vector<Sequence*> silent;
  for (const auto& [s, n] : plan.advanced)
    if (s->prefilling && s->req.max_tokens == 0 && s->n_past == int(s->req.prompt.size())) silent.push_back(s);

  std::vector<Sampled> sampled = sample_rows(plan, logits);
  // The pass as a stream waits for it: the forward pass and the sampling.
  scheduler_.observe(plan, ms_between(start, Clock::now()));
  for (size_t i = 0; i < plan.rows.size(); ++i)
    if (plan.rows[i].sample) apply(plan.rows[i], sampled[i]);
  for (Sequence* s : silent) {
    s->times.first_token = s->times.last_token = Clock::now();  // the prompt's time is its answer's
    end_prefill(*s);
    s->output.flush();
    finish(*s, "length");
  }
  publish_kv_stats();
}

std::vector<ServingEngine::Sampled> ServingEngine::sample_rows(const StepPlan& plan, std::span<const float> logits) {
  // Done one after another, a 49152-token vocabulary per sequence left the
  // other core idle for ~4% of a batch of 8's step (bench/serve-load).
  const size_t V = runner_.n_vocab();
  std::vector<Sampled> sampled(plan.rows.size());
  runner_.pool().run(plan.rows.size(), [&](size_t i, int) {
    const StepPlan::Rows& r = plan.rows[i];
    if (r.sample) {
      sampled[i] = sample_run(r, logits);
      return;
    }
    // A prompt token's entry: the logprob of the prompt token after it.
    const size_t next = size_t(r.pos) + 1;
    r.seq->prompt_logprobs[next] =
        logprob_entry(logits.subspan(r.first * V, V), r.seq->req.prompt[next], r.seq->req.logprobs, tok_);
  });
  return sampled;
}

ServingEngine::Sampled ServingEngine::sample_run(const StepPlan::Rows& r, std::span<const float> logits) {
  Sequence& s = *r.seq;
  const size_t V = runner_.n_vocab(), base = s.tokens.size();
  Sampled out;
  // Row j follows the drafts before it: its token is drawn on the history
  // with them, as plain decoding would once they were kept.
  out.ids = accept_drafts(s.draft, [&](size_t j) -> std::optional<int32_t> {
    if (j > 0) s.tokens.push_back(s.draft[j - 1]);
    const std::span<const float> row = logits.subspan((r.first + j) * V, V);
    const std::optional<int32_t> id = s.sampler.draw(row, s.tokens);
    if (id && s.req.logprobs >= 0) out.logprobs.push_back(logprob_entry(row, *id, s.req.logprobs, tok_));
    return id;
  });
  s.tokens.resize(base);
  return out;
}

void ServingEngine::apply(const StepPlan::Rows& r, Sampled& sampled) {
  Sequence& s = *r.seq;
  const int slot = s.slot;
  if (sampled.ids.empty()) {  // a grammar at a state no token of the vocabulary continues
    finish(s, "error", "the grammar: no token of this model's vocabulary continues the text");
    return;
  }
  if (s.prefilling) end_prefill(s);
  const int kept = int(sampled.ids.size()) - 1;
  s.drafted += r.drafts;
  s.draft_accepted += kept;
  observer_.add_drafts(r.drafts, kept);
  for (size_t j = 0; j < sampled.ids.size(); ++j) {
    if (j > 0) ++s.n_past;  // the draft kept before this token holds its KV now
    on_token(s, sampled.ids[j], sampled.logprobs.empty() ? TokenLogprobs{} : std::move(sampled.logprobs[j]));
    if (!scheduler_.slots()[size_t(slot)]) return;  // finished (and freed)
  }
  if (r.drafts > 0) scheduler_.truncate(s);
}

void ServingEngine::end_prefill(Sequence& s) {
  s.prefilling = false;
  observer_.add_tokens(int64_t(s.req.prompt.size()), 0, s.n_cached);
  if (!s.req.echo) return;
  for (size_t i = 0; i < s.req.prompt.size(); ++i) {
    TokenLogprobs lp;
    if (s.req.scores_prompt()) {
      lp = std::move(s.prompt_logprobs[i]);
      if (i == 0) lp.logprob = std::numeric_limits<double>::quiet_NaN();  // nothing before it predicts it
    }
    s.output.append_prompt(s.req.prompt[i], std::move(lp));
  }
  s.prompt_logprobs.clear();
  // Out at once: a stop sequence is looked for in the completion only.
  emit(s, true);
}

void ServingEngine::on_token(Sequence& s, int32_t id, TokenLogprobs lp) {
  const auto now = Clock::now();
  if (s.times.first_token == Clock::time_point{}) {
    s.times.first_token = now;
    observer_.observe_ttft(ms_between(s.times.arrival, now) / 1e3);
  } else {
    observer_.observe_itl(ms_between(s.times.last_token, now) / 1e3);
  }
  s.times.last_token = now;
  if (!s.req.ignore_eos && tok_.is_end_of_generation(id)) return finish(s, "stop");
  ++s.n_generated;
  observer_.add_tokens(0, 1);
  s.tokens.push_back(id);
  if (s.output.append(id, std::move(lp))) return finish(s, "stop");
  if (s.sampler.grammar_complete()) {  // the grammar is done: nothing may follow
    s.output.flush();
    return finish(s, "stop");
  }
  if (s.n_generated >= s.req.max_tokens || s.n_past + 1 > opt_.n_ctx) {
    s.output.flush();
    return finish(s, "length");
  }
  emit(s, false);
}

void ServingEngine::emit(Sequence& s, bool final) {
  OutputProcessor::Delta d = s.output.release(final);
  if (!d.empty()) s.handle->push(std::move(d.text), std::move(d.logprobs));
}

void ServingEngine::finish(Sequence& s, const std::string& reason, const std::string& error) {
  const bool answered = reason == "stop" || reason == "length";
  if (answered) emit(s, true);
  const auto now = Clock::now();
  Timings t;
  t.prompt_tokens = int(s.req.prompt.size());
  t.cached_tokens = s.n_cached;
  t.completion_tokens = s.n_generated;
  t.drafted = s.drafted;
  t.draft_accepted = s.draft_accepted;
  t.queue_ms = ms_between(s.times.arrival, s.times.admitted);
  if (s.times.first_token != Clock::time_point{}) {
    t.prompt_ms = ms_between(s.times.admitted, s.times.first_token);
    t.ttft_ms = ms_between(s.times.arrival, s.times.first_token);
    t.decode_ms = ms_between(s.times.first_token, s.times.last_token);
  }
  if (answered) observer_.observe_e2e(ms_between(s.times.arrival, now) / 1e3);
  observer_.request_finished(reason);
  s.handle->set_timings(t);
  // Free the slot before telling the client, so a finished request is never
  // still counted as running.
  const std::shared_ptr<Handle> h = s.handle;
  scheduler_.release(s);  // destroys s
  publish_kv_stats();
  h->finish(reason, error);
}

}  // namespace kvlab::engine
