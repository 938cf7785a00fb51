// Continuous batching, the deciding half: which requests run, and what goes
// into each forward pass. It runs no model and samples nothing (that is
// ServingEngine's, with the BatchRunner); it keeps the waiting queue, the
// running sequences in their slots and the KV block pool, and turns them
// into one StepPlan per pass:
//  - a decode row for each running sequence, with its prompt-lookup drafts
//    after it when speculative decoding is on (engine/speculative.h);
//  - then chunks of the prompts still prefilling, prefill_budget tokens in
//    all (chunked prefill, so a long prompt does not stall running streams):
//    at most prefill_chunk, fewer while streams decode when the passes'
//    measured costs (engine/pass_costs.h) say more would take the pass past
//    its time target.
// KV memory is a pool of 16-position blocks (kv::BlockManager). A request is
// admitted only when the pool can give it blocks for its whole budget
// (prompt + max_tokens, capped by the context), so a running sequence never
// runs out; otherwise it waits in FIFO order and nothing overtakes it. At
// admission the longest cached prefix of its prompt is mapped instead of
// recomputed (prefix caching), and its own full blocks become reusable as
// they fill.
#pragma once
#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/ngram_draft.h"
#include "engine/pass_costs.h"
#include "engine/sequence.h"
#include "kv/block_manager.h"
#include "model/model.h"

namespace kvlab::engine {

struct SchedulerOptions {
  int n_seq = 4;             // --parallel
  int n_ctx = 2048;          // per sequence
  int n_threads = 0;         // 0: all cores
  int prefill_chunk = 128;   // most prompt tokens per iteration (all prefilling sequences together)
  // --pass-target-ms: the time a pass with decode rows aims at, the streams'
  // inter-token latency. < 0: auto, kAutoPassTarget times a decode-only
  // pass; 0: off, every pass takes prefill_chunk prompt tokens.
  double pass_target_ms = -1;
  int max_queue = 64;        // waiting requests beyond the slots; more: rejected
  tensor::DType kv_type = tensor::DType::F16;
  int kv_blocks = 0;         // KV pool size in 16-position blocks; 0: n_seq full contexts
  // Speculative decoding (--draft): each decoding sequence's pass also
  // carries up to draft.max_tokens prompt-lookup drafts, kept while they are
  // what it samples, so its tokens are those of plain decoding.
  DraftOptions draft;
};
// Fills in the defaults (threads, pool size) and checks the rest; throws
// kvlab::Error.
SchedulerOptions checked(SchedulerOptions o);
// Rows one pass may carry: the prefill chunk plus every slot's decode row
// and drafts.
int max_pass_tokens(const SchedulerOptions& o);
// The auto pass target, in decode-only passes: a pass that carries a
// prompt chunk may take twice the time of one that does not, so a long
// prompt at most doubles the streams' inter-token latency while it
// prefills, and still advances by a decode pass's worth of time per pass.
constexpr double kAutoPassTarget = 2.0;
// The longest target --pass-target-ms takes (checked() enforces it).
constexpr double kMaxPassTargetMs = 60000;
// The fewest prompt tokens a pass takes (with prefill_chunk the lesser):
// one KV block, so a prompt advances even when the decode rows alone take
// the pass past its target, and a chunk the first cost estimate comes from.
constexpr int kMinPrefillChunk = 16;
// The prompt tokens the next pass may take, with `decode_rows` sequences
// decoding: all of prefill_chunk with the target off, no stream decoding, or
// no decode-only pass measured yet; else as many as the measured costs fit
// in the target, between kMinPrefillChunk and prefill_chunk (the smallest
// until a prompt token's cost is measured).
int prefill_budget(const SchedulerOptions& o, const PassCosts& costs, int decode_rows);
// The KV positions a request is admitted with: its prompt and every token it
// may generate, capped by the context (Scheduler::admit takes the blocks for
// all of them at once, so a running sequence never runs out).
int admission_budget(const SchedulerOptions& o, int prompt_tokens, int max_tokens);
// The drafts a decode row at n_past may carry when `wanted` tokens are still
// to come, its own included: at most draft.max_tokens, none past the last
// wanted token or the context (the pass writes n_past .. n_past + drafts).
int draft_room(const SchedulerOptions& o, int wanted, int n_past);
// Whether the queue takes `incoming` more requests while `waiting` wait and
// `running` slots are busy: up to max_queue beyond the free slots, which
// absorb a burst before the engine's thread gets to admit it.
bool queue_has_room(const SchedulerOptions& o, size_t waiting, size_t incoming, int running);

struct WaitingRequest {
  GenRequest req;
  std::shared_ptr<Handle> handle;
  Clock::time_point arrival;
};

// One forward pass, and what each run of its logits rows is for: one row,
// or with drafts one row for the fed token and one per draft.
struct StepPlan {
  struct Rows {
    Sequence* seq;
    int pos;         // the position whose logits the first row is
    bool sample;     // the next token is sampled from it (else: a prompt token's logprob)
    size_t first;    // its first logits row
    int drafts = 0;  // rows after the first, those of seq->draft
  };
  std::vector<model::BatchEntry> batch;
  std::vector<Rows> rows;
  std::vector<std::pair<Sequence*, int>> advanced;  // positions each sequence's entries add
  int decode_rows = 0;     // sequences decoding
  int prefill_tokens = 0;  // prompt tokens
  bool empty() const { return batch.empty(); }
};

class Scheduler {
 public:
  // Builds a running sequence for an admitted request; null when it cannot
  // run (its error already reported), which frees the slot again.
  using MakeSequence = std::function<std::unique_ptr<Sequence>(WaitingRequest&&, int slot, int reused)>;

  // `cache` must be pooled and outlive the scheduler.
  Scheduler(const SchedulerOptions& opt, kv::Cache& cache);

  // Queues the requests, all or (false: the queue has no room for all) none.
  bool enqueue(std::vector<WaitingRequest>& ws);
  size_t waiting() const { return waiting_.size(); }
  int running() const { return running_.load(); }  // read by other threads
  // Removes and returns the queued requests whose clients went away.
  std::vector<WaitingRequest> take_cancelled();
  // Every queued request (at shutdown).
  std::deque<WaitingRequest> take_waiting() { return std::exchange(waiting_, {}); }
  // Moves queued requests into free slots, in arrival order, while the KV
  // pool has blocks for them.
  void admit(const MakeSequence& make);

  // The next pass.
  StepPlan schedule();
  // After the pass: the sequences' new positions are in the cache.
  void advance(const StepPlan& plan);
  // The pass took `ms` (PassCosts::observe): it sizes the next chunks.
  void observe(const StepPlan& plan, double ms) { costs_.observe(plan.decode_rows, plan.prefill_tokens, ms); }
  const PassCosts& costs() const { return costs_; }
  // After rejected drafts: the sequence keeps n_past positions.
  void truncate(Sequence& s);
  // Frees the sequence's slot and blocks (destroys it).
  void release(Sequence& s);

  const std::vector<std::unique_ptr<Sequence>>& slots() const { return slots_; }
  kv::BlockManager::Stats kv_stats() const { return blocks_.stats(); }

 private:
  void add_decode_rows(Sequence& s, StepPlan& plan);
  // Returns the prompt tokens taken from the chunk budget.
  int add_prefill_rows(Sequence& s, int budget, StepPlan& plan);

  SchedulerOptions opt_;
  kv::Cache& cache_;
  kv::BlockManager blocks_;
  std::deque<WaitingRequest> waiting_;
  std::vector<std::unique_ptr<Sequence>> slots_;  // index = slot; null when free
  std::atomic<int> running_{0};
  PassCosts costs_;
  size_t n_rows_ = 0;  // logits rows of the plan being built
};

}  // namespace kvlab::engine
