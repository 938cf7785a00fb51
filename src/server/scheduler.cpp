#include "server/scheduler.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace kvlab::server {
namespace {
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

// ---- Handle ----------------------------------------------------------------

void Handle::push(const std::string& text, std::vector<TokenLogprobs> logprobs) {
  if (text.empty() && logprobs.empty()) return;
  {
    std::lock_guard l(mu_);
    pending_ += text;
    for (auto& e : logprobs) pending_logprobs_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void Handle::finish(const std::string& reason, const std::string& error) {
  {
    std::lock_guard l(mu_);
    done_ = true;
    finish_reason_ = reason;
    error_ = error;
  }
  cv_.notify_all();
}

std::optional<Handle::Update> Handle::next(std::chrono::milliseconds timeout) {
  std::unique_lock l(mu_);
  if (!cv_.wait_for(l, timeout, [&] { return done_ || !pending_.empty(); })) return std::nullopt;
  return take_locked();
}

Handle::Update Handle::wait_all() {
  std::unique_lock l(mu_);
  cv_.wait(l, [&] { return done_; });
  return take_locked();
}

std::optional<Handle::Update> Handle::wait_all_for(std::chrono::milliseconds timeout) {
  std::unique_lock l(mu_);
  if (!cv_.wait_for(l, timeout, [&] { return done_; })) return std::nullopt;
  return take_locked();
}

Handle::Update Handle::take_locked() {
  Update u;
  u.text = std::move(pending_);
  pending_.clear();
  u.logprobs = std::move(pending_logprobs_);
  pending_logprobs_.clear();
  u.done = done_;
  u.finish_reason = finish_reason_;
  u.error = error_;
  return u;
}

Timings Handle::timings() const {
  std::lock_guard l(mu_);
  return timings_;
}

// ---- Scheduler -------------------------------------------------------------

namespace {
SchedulerOptions checked(SchedulerOptions o) {
  if (o.n_threads <= 0) o.n_threads = kernels::ThreadPool::default_threads();
  if (o.n_seq < 1) throw Error("--parallel must be >= 1");
  if (o.n_ctx < 2) throw Error("context size must be >= 2");
  o.prefill_chunk = std::clamp(o.prefill_chunk, 1, o.n_ctx);
  if (o.draft.max_tokens < 0 || o.draft.max_tokens > engine::kMaxDraftTokens)
    throw Error("--draft must be 0 to " + std::to_string(engine::kMaxDraftTokens));
  if (o.draft.ngram_max < 1) throw Error("--draft-ngram must be at least 1");
  // At least one full context, or a long request could never be admitted.
  const int min_blocks = kv::Cache::blocks_for(o.n_ctx);
  if (o.kv_blocks <= 0) o.kv_blocks = o.n_seq * min_blocks;
  if (o.kv_blocks < min_blocks)
    throw Error("KV pool of " + std::to_string(o.kv_blocks) + " blocks cannot hold one context of " +
                std::to_string(o.n_ctx) + " (needs " + std::to_string(min_blocks) + ")");
  return o;
}
}  // namespace

Scheduler::Scheduler(const model::Model& model, const tokenizer::Tokenizer& tok, SchedulerOptions opt,
                     Metrics& metrics)
    : model_(model),
      tok_(tok),
      json_vocab_(tok),
      opt_(checked(opt)),
      metrics_(metrics),
      pool_(opt_.n_threads),
      cache_(model.config(), opt_.n_ctx, opt_.n_seq, opt_.kv_type, opt_.kv_blocks),
      blocks_(cache_),
      ws_(model.config(), opt_.prefill_chunk + opt_.n_seq * (1 + opt_.draft.max_tokens), opt_.n_ctx, opt_.n_threads),
      logits_(size_t(model.config().n_vocab) * size_t(opt_.n_seq)),
      active_(size_t(opt_.n_seq)) {
  batch_.reserve(size_t(ws_.max_tokens()));
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { shutdown(); }

void Scheduler::shutdown() {
  {
    std::lock_guard l(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard l(mu_);
  for (auto& s : active_)
    if (s) s->h->finish("error", "server shutting down");
  for (auto& w : waiting_) w.h->finish("error", "server shutting down");
  waiting_.clear();
}

std::shared_ptr<Handle> Scheduler::submit(GenRequest req) {
  auto h = std::make_shared<Handle>();
  {
    std::lock_guard l(mu_);
    if (stop_) return nullptr;
    // Free slots absorb a burst before the scheduler thread gets to admit it.
    const int free_slots = opt_.n_seq - running_.load();
    if (int(waiting_.size()) >= opt_.max_queue + std::max(0, free_slots)) return nullptr;
    waiting_.push_back({std::move(req), h, Clock::now()});
  }
  cv_.notify_all();
  return h;
}

Gauges Scheduler::gauges() const {
  Gauges g;
  {
    std::lock_guard l(mu_);
    g.waiting = int(waiting_.size());
  }
  g.running = running_.load();
  g.slots = opt_.n_seq;
  g.kv_blocks = opt_.kv_blocks;
  g.kv_blocks_used = kv_used_.load();
  g.kv_blocks_cached = kv_cached_.load();
  g.prefix_lookups = prefix_lookups_.load();
  g.prefix_hits = prefix_hits_.load();
  return g;
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stop_ || running_.load() > 0 || !waiting_.empty(); });
      if (stop_) return;
    }
    try {
      admit();
      step();
    } catch (const std::exception& e) {
      // Never let one bad request take the server down: fail what is running.
      for (auto& s : active_)
        if (s) finish(*s, "error", e.what());
    }
  }
}

void Scheduler::publish_kv_stats() {
  const kv::BlockManager::Stats st = blocks_.stats();
  kv_used_ = st.in_use;
  kv_cached_ = st.cached;
  prefix_lookups_ = st.lookups;
  prefix_hits_ = st.hits;
}

// Moves waiting requests into free slots, in arrival order, while the KV pool
// has blocks for them (drops the ones cancelled while queued).
void Scheduler::admit() {
  std::lock_guard l(mu_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (!it->h->cancelled()) {
      ++it;
      continue;
    }
    it->h->finish("cancelled");
    metrics_.request_finished("cancelled");
    it = waiting_.erase(it);
  }
  for (size_t slot = 0; slot < active_.size() && !waiting_.empty(); ++slot) {
    if (active_[slot]) continue;
    const GenRequest& head = waiting_.front().req;
    const int budget = int(std::min<int64_t>(opt_.n_ctx, int64_t(head.prompt.size()) + std::max(head.max_tokens, 0)));
    // A scored prompt needs every position's logits: none may come from the cache.
    const std::optional<int> reused = blocks_.admit(int(slot), head.prompt, budget, !head.scores_prompt());
    if (!reused) break;  // the head waits for blocks; nothing overtakes it
    Waiting w = std::move(waiting_.front());
    waiting_.pop_front();
    auto s = std::make_unique<Seq>();
    s->slot = int(slot);
    s->req = std::move(w.req);
    s->h = std::move(w.h);
    s->arrival = w.arrival;
    s->admitted = Clock::now();
    s->tokens = s->req.prompt;
    s->n_past = s->n_cached = *reused;
    try {
      s->sampler = std::make_unique<sample::Sampler>(s->req.sampling);
    } catch (const std::exception& e) {
      blocks_.release(int(slot));
      metrics_.request_finished("error");
      s->h->finish("error", e.what());
      continue;  // the slot stays free
    }
    s->decoder = std::make_unique<tokenizer::StreamDecoder>(tok_);
    if (s->req.scores_prompt()) s->prompt_logprobs.resize(s->tokens.size());
    if (s->req.json_object) s->json.emplace();
    metrics_.observe_queue(ms_between(s->arrival, s->admitted) / 1e3);
    active_[slot] = std::move(s);
    ++running_;
  }
  publish_kv_stats();
}

void Scheduler::step() {
  // Clients that went away free their slot before the next pass.
  for (auto& s : active_)
    if (s && s->h->cancelled()) finish(*s, "cancelled");

  batch_.clear();
  rows_.clear();
  size_t n_rows = 0;  // logits rows so far
  std::vector<std::pair<Seq*, int>> advanced;
  for (auto& s : active_) {
    if (!s || s->prefilling) continue;
    // Drafts for what follows tokens.back(), as many as the tokens still
    // wanted after it and the context take (the pass writes positions
    // n_past .. n_past + drafts; the blocks admitted cover max_tokens).
    s->draft.clear();
    if (opt_.draft.max_tokens > 0) {
      const int room = std::min({opt_.draft.max_tokens, s->req.max_tokens - s->n_generated - 1,
                                 opt_.n_ctx - s->n_past - 1});
      s->draft = engine::ngram_draft(s->tokens, room, opt_.draft.ngram_max, opt_.draft.ngram_min);
    }
    batch_.push_back({s->tokens.back(), s->n_past, s->slot, true});
    for (size_t i = 0; i < s->draft.size(); ++i)
      batch_.push_back({s->draft[i], s->n_past + 1 + int(i), s->slot, true});
    rows_.push_back({s.get(), s->n_past, true, n_rows, int(s->draft.size())});
    n_rows += 1 + s->draft.size();
    advanced.push_back({s.get(), 1});
  }
  int budget = opt_.prefill_chunk;
  for (auto& s : active_) {
    if (!s || !s->prefilling || budget == 0) continue;
    const int prompt = int(s->req.prompt.size());
    const int n = std::min(budget, prompt - s->n_past);
    for (int i = 0; i < n; ++i) {
      const int pos = s->n_past + i;
      // The last position's logits give the first token (none with
      // max_tokens 0); a scored prompt's others, its next token's logprob.
      const bool sample = pos + 1 == prompt && s->req.max_tokens > 0;
      const bool logits = sample || (s->req.scores_prompt() && pos + 1 < prompt);
      batch_.push_back({s->req.prompt[size_t(pos)], pos, s->slot, logits});
      if (logits) rows_.push_back({s.get(), pos, sample, n_rows++});
    }
    advanced.push_back({s.get(), n});
    budget -= n;
  }
  if (batch_.empty()) return;

  const size_t n_vocab = size_t(model_.config().n_vocab);
  if (logits_.size() < n_rows * n_vocab) logits_.resize(n_rows * n_vocab);
  try {
    model_.forward(batch_, cache_, ws_, pool_, logits_.data());
  } catch (const std::exception& e) {
    for (auto& [s, n] : advanced) finish(*s, "error", e.what());
    return;
  }
  // Prompts done now that asked for no token at all (echo with max_tokens
  // 0): no row of theirs is sampled, so none of them finishes below.
  std::vector<Seq*> silent;
  for (auto& [s, n] : advanced) {
    s->n_past += n;
    blocks_.commit(s->slot, s->tokens, s->n_past);
    if (s->prefilling && s->req.max_tokens == 0 && s->n_past == int(s->req.prompt.size())) silent.push_back(s);
  }

  // Each sequence samples from its own logits rows with its own sampler (and
  // random stream), so the runs are sampled on the pool's threads at once:
  // a 49152-token vocabulary per sequence, done one after another, left the
  // other core idle for ~4% of a batch of 8's step.
  sampled_.resize(rows_.size());
  sampled_logprobs_.resize(rows_.size());
  pool_.run(rows_.size(), [&](size_t i, int) {
    const Row& r = rows_[i];
    if (!r.sample) {  // a prompt token's entry
      const std::span<const float> row(logits_.data() + r.first * n_vocab, n_vocab);
      const size_t next = size_t(r.pos) + 1;
      r.s->prompt_logprobs[next] = logprob_entry(row, r.s->req.prompt[next], r.s->req.logprobs);
      return;
    }
    sample_run(r, sampled_[i], sampled_logprobs_[i]);
  });
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (!rows_[i].sample) continue;
    Seq* s = rows_[i].s;
    const int slot = s->slot;
    const std::vector<int32_t>& ids = sampled_[i];
    if (ids.empty()) {  // JSON mode at a state no token of the vocabulary continues
      finish(*s, "error", "response_format json_object: no token of this model's vocabulary continues the JSON");
      continue;
    }
    if (s->prefilling) end_prefill(*s);
    std::vector<TokenLogprobs>& lps = sampled_logprobs_[i];
    const int kept = int(ids.size()) - 1;
    s->drafted += rows_[i].drafts;
    s->draft_accepted += kept;
    metrics_.add_drafts(rows_[i].drafts, kept);
    for (size_t j = 0; j < ids.size(); ++j) {
      if (j > 0) ++s->n_past;  // the draft kept before this token holds its KV now
      on_token(*s, ids[j], lps.empty() ? TokenLogprobs{} : std::move(lps[j]));
      if (!active_[size_t(slot)]) break;  // finished (and freed)
    }
    if (active_[size_t(slot)] && rows_[i].drafts > 0) {
      // Rejected drafts' rows are past n_past: the next pass overwrites them.
      cache_.set_used(slot, s->n_past);
      blocks_.commit(slot, s->tokens, s->n_past);
    }
  }
  for (Seq* s : silent) {
    s->first_token = s->last_token = Clock::now();  // the prompt's time is its answer's
    end_prefill(*s);
    s->text += s->decoder->flush();
    finish(*s, "length");
  }
  publish_kv_stats();
}

void Scheduler::sample_run(const Row& r, std::vector<int32_t>& ids, std::vector<TokenLogprobs>& lps) {
  Seq& s = *r.s;
  const size_t n_vocab = size_t(model_.config().n_vocab), base = s.tokens.size();
  ids.clear();
  lps.clear();
  // Row j follows the drafts before it: its token is sampled on the history
  // with them, as plain decoding would once they were kept.
  for (size_t j = 0;; ++j) {
    const std::span<const float> row(logits_.data() + (r.first + j) * n_vocab, n_vocab);
    std::span<const float> drawn = row;
    if (s.json) {  // the draw sees only the tokens the grammar takes; logprobs stay the model's
      s.masked.assign(row.begin(), row.end());
      if (json_vocab_.mask(*s.json, s.masked) == 0) break;  // no token continues: on_token is not reached
      drawn = s.masked;
    }
    const int32_t id = s.sampler->sample(drawn, s.tokens);
    if (s.json) s.json->feed(json_vocab_.bytes(id));
    ids.push_back(id);
    if (const int n = s.req.logprobs; n >= 0) lps.push_back(logprob_entry(row, id, n));
    if (j == size_t(r.drafts) || id != s.draft[j]) break;
    s.tokens.push_back(id);
  }
  s.tokens.resize(base);
}

TokenLogprobs Scheduler::logprob_entry(std::span<const float> row, int32_t id, int n) const {
  TokenLogprobs lp;
  lp.id = id;
  const double lse = sample::log_sum_exp(row);
  lp.logprob = double(row[size_t(id)]) - lse;
  for (const sample::TokenLogprob& t : sample::top_logprobs(row, lse, n))
    lp.top.push_back({t.id, tok_.piece(t.id), t.logprob});
  return lp;
}

void Scheduler::end_prefill(Seq& s) {
  s.prefilling = false;
  metrics_.add_tokens(int64_t(s.req.prompt.size()), 0, s.n_cached);
  if (!s.req.echo) return;
  for (size_t i = 0; i < s.req.prompt.size(); ++i) {
    const int32_t id = s.req.prompt[i];
    if (s.req.scores_prompt()) {
      TokenLogprobs lp = std::move(s.prompt_logprobs[i]);
      lp.id = id;
      if (i == 0) lp.logprob = std::numeric_limits<double>::quiet_NaN();  // nothing before it predicts it
      lp.bytes = tok_.piece(id);
      lp.text_offset = s.piece_bytes;
      s.piece_bytes += lp.bytes.size();
      s.logprobs.push_back(std::move(lp));
    }
    s.text += s.decoder->push(id);
  }
  s.prompt_logprobs.clear();
  // Out at once: a stop sequence is looked for in the completion only.
  emit(s, true);
}

void Scheduler::on_token(Seq& s, int32_t id, TokenLogprobs lp) {
  const auto now = Clock::now();
  if (s.first_token == Clock::time_point{}) {
    s.first_token = now;
    metrics_.observe_ttft(ms_between(s.arrival, now) / 1e3);
  } else {
    metrics_.observe_itl(ms_between(s.last_token, now) / 1e3);
  }
  s.last_token = now;
  if (!s.req.ignore_eos && tok_.is_end_of_generation(id)) {
    finish(s, "stop");
    return;
  }
  ++s.n_generated;
  metrics_.add_tokens(0, 1);
  s.tokens.push_back(id);
  if (s.req.logprobs >= 0) {
    // The decoder releases the pieces' bytes in order, so this token's text
    // starts at the bytes of all pieces before it.
    lp.bytes = tok_.piece(id);
    lp.text_offset = s.piece_bytes;
    s.piece_bytes += lp.bytes.size();
    s.logprobs.push_back(std::move(lp));
  }
  s.text += s.decoder->push(id);
  for (const std::string& stop : s.req.stop) {
    const size_t p = s.text.find(stop, s.emitted);
    if (p != std::string::npos) {
      s.text.resize(p);
      finish(s, "stop");
      return;
    }
  }
  if (s.json && s.json->complete()) {  // the object has closed: nothing may follow it
    s.text += s.decoder->flush();
    finish(s, "stop");
    return;
  }
  if (s.n_generated >= s.req.max_tokens || s.n_past + 1 > opt_.n_ctx) {
    s.text += s.decoder->flush();
    finish(s, "length");
    return;
  }
  emit(s, false);
}

void Scheduler::emit(Seq& s, bool final) {
  size_t safe = s.text.size();
  if (!final && !s.req.stop.empty()) {
    size_t hold = 0;
    for (const auto& st : s.req.stop) hold = std::max(hold, st.size() - 1);
    safe = s.text.size() > hold ? s.text.size() - hold : 0;
    // never split a UTF-8 code point
    while (safe > s.emitted && safe < s.text.size() && (uint8_t(s.text[safe]) & 0xC0) == 0x80) --safe;
  }
  // The tokens whose text starts in what goes out now (a token cut off by a
  // stop sequence, at or past the text's end, never does), their offsets
  // turned into characters.
  std::vector<TokenLogprobs> released;
  while (s.logprobs_sent < s.logprobs.size() && s.logprobs[s.logprobs_sent].text_offset < std::max(safe, s.emitted)) {
    TokenLogprobs& e = s.logprobs[s.logprobs_sent++];
    for (; s.counted_bytes < e.text_offset; ++s.counted_bytes)
      s.counted_chars += (uint8_t(s.text[s.counted_bytes]) & 0xC0) != 0x80;
    e.text_offset = s.counted_chars;
    released.push_back(std::move(e));
  }
  if (safe > s.emitted || !released.empty()) {
    s.h->push(safe > s.emitted ? s.text.substr(s.emitted, safe - s.emitted) : std::string(), std::move(released));
    s.emitted = std::max(safe, s.emitted);
  }
}

void Scheduler::finish(Seq& s, const std::string& reason, const std::string& error) {
  if (reason == "stop" || reason == "length") emit(s, true);
  const auto now = Clock::now();
  Timings t;
  t.prompt_tokens = int(s.req.prompt.size());
  t.cached_tokens = s.n_cached;
  t.completion_tokens = s.n_generated;
  t.drafted = s.drafted;
  t.draft_accepted = s.draft_accepted;
  t.queue_ms = ms_between(s.arrival, s.admitted);
  if (s.first_token != Clock::time_point{}) {
    t.prompt_ms = ms_between(s.admitted, s.first_token);
    t.ttft_ms = ms_between(s.arrival, s.first_token);
    t.decode_ms = ms_between(s.first_token, s.last_token);
  }
  if (reason == "stop" || reason == "length") metrics_.observe_e2e(ms_between(s.arrival, now) / 1e3);
  metrics_.request_finished(reason);
  {
    std::lock_guard l(s.h->mu_);
    s.h->timings_ = t;
  }
  // Free the slot before telling the client, so a finished request is never
  // still counted as running.
  std::shared_ptr<Handle> h = s.h;
  const int slot = s.slot;
  blocks_.release(slot);
  publish_kv_stats();
  active_[size_t(slot)].reset();  // destroys s
  --running_;
  h->finish(reason, error);
}

}  // namespace kvlab::server
