#include "lab/simulate/serve_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <random>
#include <string>

#include "common/error.h"
#include "kv/block_manager.h"

namespace kvlab::perf {
namespace {

constexpr int kBlock = kv::Cache::kBlockTokens;

// Percentiles of many samples in bounded memory: buckets a factor 1.001
// apart from 1 ns to 1000 s, so a percentile is within 0.1% of the sample's.
class LogHistogram {
 public:
  LogHistogram() : counts_(size_t(std::ceil(std::log(kMax / kMin) / std::log(kRatio))) + 1, 0) {}
  void add(double v, int64_t n = 1) {
    const double x = std::clamp(v, kMin, kMax);
    counts_[size_t(std::lround(std::log(x / kMin) / std::log(kRatio)))] += n;
    total_ += n;
    sum_ += v * double(n);
  }
  double mean() const { return total_ > 0 ? sum_ / double(total_) : 0; }
  // Nearest rank: the smallest sample with at least q of them at or below it.
  double quantile(double q) const {
    if (total_ == 0) return 0;
    const int64_t rank = std::max<int64_t>(1, int64_t(std::ceil(q * double(total_))));
    int64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i)
      if ((seen += counts_[i]) >= rank) return kMin * std::pow(kRatio, double(i));
    return kMax;
  }

 private:
  static constexpr double kMin = 1e-9, kMax = 1e3, kRatio = 1.001;
  std::vector<int64_t> counts_;
  int64_t total_ = 0;
  double sum_ = 0;
};

Percentiles ms_percentiles(const LogHistogram& h) {
  return {h.quantile(0.5) * 1e3, h.quantile(0.9) * 1e3, h.quantile(0.99) * 1e3, h.mean() * 1e3};
}

struct SimRequest {
  LoadRequest load;
  double arrival = 0, first_token = -1, last_token = 0;
  int n_past = 0, generated = 0;
  int own_blocks = 0, hit_blocks = 0;  // fresh blocks, and shared-prefix blocks mapped from the cache
};

struct Event {
  enum Kind { Arrival, PassDone };
  double t = 0;
  int64_t order = 0;  // ties: the order they were scheduled in
  Kind kind = Arrival;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : order > o.order; }
};

// One planned pass: which request each row group belongs to, and how many
// of each decode row's drafts will be kept.
struct Plan {
  PassRows rows;
  std::vector<size_t> decode_req, chunk_req;
  std::vector<int> kept;
};

class ServeSim {
 public:
  ServeSim(const ServeOptions& o, const PassPricer& price);
  ServeResult run();

 private:
  void push(double t, Event::Kind kind) {
    events_.push({t, next_order_++, kind});
    arrivals_pushed_ += kind == Event::Arrival;
  }
  void on_arrival(double now);
  void send_next(double now);
  void admit();
  bool try_admit(size_t id, int slot);
  void start_pass(double now);
  int plan_decode_row(size_t id);
  int kept_drafts(int drafts);
  void on_pass_done(double now);
  void apply_chunk(size_t id, const PassRows::Chunk& ch, double now);
  bool on_token(size_t id, double now);
  void end_request(size_t id, double now);
  int blocks_in_use() const;
  bool prefix_referenced() const;
  void account(double now);
  void sample(double now);

  const ServeOptions& o_;
  engine::SchedulerOptions sched_;
  const PassPricer& price_;
  engine::PassCosts costs_;  // the passes' times so far, as the engine measures its own
  std::vector<SimRequest> reqs_;
  size_t next_send_ = 0;        // the next request to arrive
  size_t arrivals_pushed_ = 0;  // arrival events scheduled so far
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  int64_t next_order_ = 0;
  std::deque<size_t> waiting_;
  std::vector<int64_t> slots_;  // request id, -1 when free
  int running_ = 0;
  bool busy_ = false;
  Plan plan_;
  // The shared prefix's cached blocks (kv::BlockManager keys them as they
  // fill) and the request that computed them.
  int prefix_keyed_ = 0;
  int64_t prefix_owner_ = -1;
  LogHistogram ttft_, itl_, e2e_, tpot_;
  double first_arrival_ = -1, last_token_ = 0;
  double in_system_area_ = 0, last_event_ = 0;
  int64_t series_stride_ = 1;
  // Draft outcomes: a stream of their own, so drafts leave the load's
  // arrivals and lengths as they are for its seed.
  std::mt19937_64 draft_rng_;
  ServeResult r_;
};

ServeSim::ServeSim(const ServeOptions& o, const PassPricer& price)
    : o_(o),
      sched_(engine::checked(o.sched)),
      price_(price),
      slots_(size_t(sched_.n_seq), -1),
      draft_rng_(o.load.seed ^ 0x9e3779b97f4a7c15ull) {
  for (const LoadRequest& l : make_requests(o.load)) reqs_.push_back({l});
  for (const SimRequest& q : reqs_)
    if (q.load.prompt >= sched_.n_ctx)
      throw Error("prompt of " + std::to_string(q.load.prompt) + " tokens does not fit the context of " +
                  std::to_string(sched_.n_ctx) + " (--ctx-size) with room for an answer");
  if (o.series_points < 1 || o.series_points > 1000) throw Error("time series wants 1 to 1000 points");
  if (o.overhead.sampler_threads < 1) throw Error("the sampler needs at least one thread");
  r_.kv_blocks = sched_.kv_blocks;
}

// The state at `points` evenly spaced times: at each, the last sample taken
// by then. Passes are not evenly spaced (a long prefill pass, then short
// decode passes), so spacing by sample index would stretch some states
// over others' time.
std::vector<ServeSample> thin_series(const std::vector<ServeSample>& samples, size_t points) {
  if (samples.size() <= points) return samples;
  const double t0 = samples.front().t_s, span = samples.back().t_s - t0;
  std::vector<ServeSample> rows;
  size_t j = 0;
  for (size_t i = 0; i < points; ++i) {
    const double t = points == 1 ? t0 : t0 + span * double(i) / double(points - 1);
    while (j + 1 < samples.size() && samples[j + 1].t_s <= t) ++j;
    rows.push_back(samples[j]);
    rows.back().t_s = t;
  }
  return rows;
}

ServeResult ServeSim::run() {
  if (o_.load.rate > 0) {
    push(reqs_[0].load.arrival_s, Event::Arrival);
  } else {
    const size_t clients = std::min(reqs_.size(), size_t(o_.load.concurrency));
    for (size_t c = 0; c < clients; ++c) push(o_.load.ramp_s * double(c) / double(clients), Event::Arrival);
  }
  while (!events_.empty()) {
    const Event e = events_.top();
    events_.pop();
    account(e.t);
    if (e.kind == Event::Arrival) {
      on_arrival(e.t);
    } else {
      on_pass_done(e.t);
    }
  }
  r_.duration_s = std::max(0.0, last_token_ - first_arrival_);
  r_.ttft_ms = ms_percentiles(ttft_);
  r_.itl_ms = ms_percentiles(itl_);
  r_.e2e_ms = ms_percentiles(e2e_);
  r_.tpot_ms = ms_percentiles(tpot_);
  if (r_.duration_s > 0) {
    r_.throughput_tok_s = double(r_.output_tokens) / r_.duration_s;
    r_.requests_per_s = double(r_.completed) / r_.duration_s;
    r_.mean_in_system = in_system_area_ / r_.duration_s;
  }
  r_.series = thin_series(r_.series, size_t(o_.series_points));
  return r_;
}

// Little's law wants the time-average of the requests in the system.
void ServeSim::account(double now) {
  if (first_arrival_ >= 0) in_system_area_ += double(waiting_.size() + size_t(running_)) * (now - last_event_);
  last_event_ = now;
}

void ServeSim::on_arrival(double now) {
  const size_t id = next_send_++;
  if (o_.load.rate > 0 && arrivals_pushed_ < reqs_.size()) push(reqs_[arrivals_pushed_].load.arrival_s, Event::Arrival);
  SimRequest& q = reqs_[id];
  q.arrival = now;
  if (first_arrival_ < 0) first_arrival_ = last_event_ = now;
  // ServingEngine::submit_all → Scheduler::enqueue.
  if (!engine::queue_has_room(sched_, waiting_.size(), 1, running_)) {
    ++r_.rejected;
    send_next(now);
    return;
  }
  waiting_.push_back(id);
  r_.max_waiting = std::max(r_.max_waiting, int(waiting_.size()));
  if (!busy_) {  // the engine's thread wakes: admit, then plan a pass
    admit();
    start_pass(now);
  }
}

// Closed loop: the client whose request ended sends its next one.
void ServeSim::send_next(double now) {
  if (o_.load.rate == 0 && arrivals_pushed_ < reqs_.size()) push(now, Event::Arrival);
}

// Shared-prefix blocks some running request maps (its own or from the cache).
bool ServeSim::prefix_referenced() const {
  for (int64_t id : slots_)
    if (id >= 0 && (id == prefix_owner_ || reqs_[size_t(id)].hit_blocks > 0)) return true;
  return false;
}

// Blocks referenced by running requests: each one's fresh blocks, plus the
// cached prefix blocks they map once its owner, whose fresh blocks they
// were, has gone.
int ServeSim::blocks_in_use() const {
  int used = 0, hit = 0;
  bool owner_running = false;
  for (int64_t id : slots_) {
    if (id < 0) continue;
    used += reqs_[size_t(id)].own_blocks;
    hit = std::max(hit, reqs_[size_t(id)].hit_blocks);
    owner_running = owner_running || id == prefix_owner_;
  }
  return used + (owner_running ? 0 : hit);
}

// Mirrors kv::BlockManager::admit: the head needs blocks for its whole
// budget less the cached prefix blocks it maps; cached blocks nobody
// references count as available, but not those it is about to map.
bool ServeSim::try_admit(size_t id, int slot) {
  SimRequest& q = reqs_[id];
  const int need = kv::Cache::blocks_for(engine::admission_budget(sched_, q.load.prompt, q.load.output));
  const int hit = std::min({prefix_keyed_, kv::BlockManager::max_reused_blocks(q.load.prompt), q.load.shared_prefix / kBlock});
  const int hits_unreferenced = hit > 0 && !prefix_referenced() ? hit : 0;
  if (sched_.kv_blocks - blocks_in_use() - hits_unreferenced < need - hit) return false;
  q.hit_blocks = hit;
  q.own_blocks = need - hit;
  q.n_past = hit * kBlock;
  slots_[size_t(slot)] = int64_t(id);
  ++running_;
  // Fresh blocks come from the free list first, then evict the least
  // recently released cached ones: the prefix goes when nothing else is left.
  const int unreferenced_prefix = prefix_referenced() ? 0 : prefix_keyed_;
  prefix_keyed_ -= std::max(0, unreferenced_prefix - (sched_.kv_blocks - blocks_in_use()));
  r_.cached_tokens += q.n_past;
  return true;
}

// Scheduler::admit: free slots in order, the queue's head first.
void ServeSim::admit() {
  for (size_t slot = 0; slot < slots_.size() && !waiting_.empty(); ++slot) {
    if (slots_[slot] >= 0) continue;
    if (!try_admit(waiting_.front(), int(slot))) break;  // the head waits; nothing overtakes it
    waiting_.pop_front();
  }
  r_.max_kv_blocks_used = std::max(r_.max_kv_blocks_used, blocks_in_use());
}

// Scheduler::schedule: a decode row per decoding sequence, then the
// prompts' chunks from the chunk budget (engine::prefill_budget, on the
// simulated passes' times), in slot order.
void ServeSim::start_pass(double now) {
  busy_ = running_ > 0;
  if (!busy_) return;
  plan_ = Plan{};
  int sampled = 0;  // rows the engine samples: each decode row's token and kept drafts, and finished prompts
  for (int64_t id : slots_)
    if (id >= 0 && reqs_[size_t(id)].first_token >= 0) sampled += 1 + plan_decode_row(size_t(id));
  const int decode_rows = int(plan_.decode_req.size());
  const int chunk = engine::prefill_budget(sched_, costs_, decode_rows);
  int budget = chunk;
  for (int64_t id : slots_) {
    if (id < 0 || reqs_[size_t(id)].first_token >= 0 || budget == 0) continue;
    const SimRequest& q = reqs_[size_t(id)];
    const int n = std::min(budget, q.load.prompt - q.n_past);
    plan_.rows.chunks.push_back({q.n_past, n, q.n_past + n == q.load.prompt});
    plan_.chunk_req.push_back(size_t(id));
    sampled += plan_.rows.chunks.back().logits;
    budget -= n;
  }
  const int sampling_rounds = (sampled + o_.overhead.sampler_threads - 1) / o_.overhead.sampler_threads;
  const double seconds = price_(plan_.rows) + o_.overhead.pass_s + double(sampling_rounds) * o_.overhead.sampled_row_s;
  costs_.observe(decode_rows, chunk - budget, seconds * 1e3);  // as the engine times the pass it ran
  sample(now);
  ++r_.passes;
  push(now + seconds, Event::PassDone);
}

// Scheduler::add_decode_rows: the row's token at n_past, then its drafts
// at the positions after it. Returns how many drafts will be kept.
int ServeSim::plan_decode_row(size_t id) {
  const SimRequest& q = reqs_[id];
  const int room = engine::draft_room(sched_, q.load.output - q.generated, q.n_past);
  const int drafts = room > 0 && unit_draw(draft_rng_) < o_.load.draft_found ? room : 0;
  for (int i = 0; i <= drafts; ++i) plan_.rows.decode_positions.push_back(q.n_past + i);
  plan_.decode_req.push_back(id);
  plan_.kept.push_back(kept_drafts(drafts));
  ++r_.decode_steps;
  r_.drafted += drafts;
  r_.drafts_kept += plan_.kept.back();
  return plan_.kept.back();
}

// Drafts are kept in order while each passes its draft_accept chance.
int ServeSim::kept_drafts(int drafts) {
  int kept = 0;
  while (kept < drafts && unit_draw(draft_rng_) < o_.load.draft_accept) ++kept;
  return kept;
}

void ServeSim::on_pass_done(double now) {
  // ServingEngine::apply: the kept drafts, then the row's own token.
  for (size_t i = 0; i < plan_.decode_req.size(); ++i)
    for (int j = 0; j <= plan_.kept[i]; ++j) {
      ++reqs_[plan_.decode_req[i]].n_past;
      if (!on_token(plan_.decode_req[i], now)) break;
    }
  for (size_t i = 0; i < plan_.chunk_req.size(); ++i) apply_chunk(plan_.chunk_req[i], plan_.rows.chunks[i], now);
  admit();
  start_pass(now);
}

void ServeSim::apply_chunk(size_t id, const PassRows::Chunk& ch, double now) {
  SimRequest& q = reqs_[id];
  q.n_past += ch.tokens;
  // BlockManager::commit keys the full blocks; the first request to fill a
  // block of the shared prefix is the one whose block serves later prompts.
  const int full = std::min(q.n_past, q.load.shared_prefix) / kBlock;
  if (full > prefix_keyed_) {
    prefix_keyed_ = full;
    prefix_owner_ = int64_t(id);
  }
  if (!ch.logits) return;
  r_.prompt_tokens += q.load.prompt;
  on_token(id, now);
}

// ServingEngine::on_token: the request ends at its output length, or when
// the context is full. Returns whether it goes on.
bool ServeSim::on_token(size_t id, double now) {
  SimRequest& q = reqs_[id];
  // A pass's tokens reach the client together, in one chunk (the handle
  // hands the HTTP thread all the text pending): one gap per pass.
  if (q.first_token < 0) {
    q.first_token = now;
    ttft_.add(now - q.arrival);
  } else if (now > q.last_token) {
    itl_.add(now - q.last_token);
  }
  q.last_token = now;
  ++q.generated;
  ++r_.output_tokens;
  if (q.generated < q.load.output && q.n_past + 1 <= sched_.n_ctx) return true;
  end_request(id, now);
  return false;
}

void ServeSim::end_request(size_t id, double now) {
  for (int64_t& slot : slots_)
    if (slot == int64_t(id)) slot = -1;
  --running_;
  const SimRequest& q = reqs_[id];
  e2e_.add(now - q.arrival);
  if (q.generated > 1) tpot_.add((q.last_token - q.first_token) / double(q.generated - 1));
  ++r_.completed;
  last_token_ = std::max(last_token_, now);
  send_next(now);
}

// Keeps at most kKept samples: when full, every other one goes and the
// stride between the passes sampled doubles.
void ServeSim::sample(double now) {
  constexpr size_t kKept = 1024;
  if (r_.passes % series_stride_ != 0) return;
  r_.series.push_back({now, running_, int(waiting_.size()), blocks_in_use()});
  if (r_.series.size() < kKept) return;
  for (size_t i = 0; i < kKept / 2; ++i) r_.series[i] = r_.series[2 * i];
  r_.series.resize(kKept / 2);
  series_stride_ *= 2;
}

}  // namespace

ServeResult simulate_serve(const ServeOptions& o, const PassPricer& price) { return ServeSim(o, price).run(); }

}  // namespace kvlab::perf
