// The many-sequence use of the engine, as `kvlab serve` runs it. One thread
// loops: the Scheduler admits requests and plans a pass, the BatchRunner
// runs it, each sequence that got logits samples its tokens
// (SequenceSampler, with speculative drafts checked by the one verify path,
// engine/speculative.h), and its OutputProcessor releases the new text to
// the request's Handle, which a client thread waits on.
// Logits do not depend on the batch (kernels/matmul.h), so every sequence
// gets the tokens it would get alone.
#pragma once
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/batch_runner.h"
#include "engine/handle.h"
#include "engine/scheduler.h"
#include "engine/serving_stats.h"
#include "sample/grammar_vocab.h"

namespace kvlab::engine {

class ServingEngine {
 public:
  // Throws kvlab::Error for invalid options.
  ServingEngine(const model::Model& model, const tokenizer::Tokenizer& tok, SchedulerOptions opt,
                ServingObserver& observer);
  ~ServingEngine();
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  // Queues a request; nullptr when the queue is full (or after shutdown).
  std::shared_ptr<Handle> submit(GenRequest req);
  // Queues the requests, all or none (empty: the queue has no room for all,
  // or after shutdown): a request of n choices is never half queued.
  std::vector<std::shared_ptr<Handle>> submit_all(std::vector<GenRequest> reqs);
  // Stops the engine's thread; unfinished requests end with an error.
  void shutdown();
  Gauges gauges() const;
  const SchedulerOptions& options() const { return opt_; }

 private:
  // The tokens sampled from one run of logits rows, with their logprob
  // entries where asked for.
  struct Sampled {
    std::vector<int32_t> ids;
    std::vector<TokenLogprobs> logprobs;
  };

  void loop();
  void admit();
  std::unique_ptr<Sequence> make_sequence(WaitingRequest&& w, int slot, int reused);
  void step();
  // Samples every run of rows at once, on the pool's threads: each sequence
  // has its own sampler and random stream.
  std::vector<Sampled> sample_rows(const StepPlan& plan, std::span<const float> logits);
  // Run `r`'s rows in turn while the drafts are kept (speculative.h).
  Sampled sample_run(const StepPlan::Rows& r, std::span<const float> logits);
  // Hands a run's tokens to its sequence (it may finish).
  void apply(const StepPlan::Rows& r, Sampled& sampled);
  // Handles a freshly sampled token (may finish and free the sequence).
  void on_token(Sequence& s, int32_t id, TokenLogprobs lp);
  // A prompt just prefilled: counted, and with echo its text (and its
  // logprob entries) sent at once at the head of the output.
  void end_prefill(Sequence& s);
  void emit(Sequence& s, bool final);
  void finish(Sequence& s, const std::string& reason, const std::string& error = {});
  // Copies the KV pool's counters for gauges() (read by other threads).
  void publish_kv_stats();

  const tokenizer::Tokenizer& tok_;
  const sample::GrammarVocab grammar_vocab_;
  SchedulerOptions opt_;
  ServingObserver& observer_;
  BatchRunner runner_;
  Scheduler scheduler_;

  mutable std::mutex mu_;  // guards the scheduler's queue and stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<int> kv_used_{0}, kv_cached_{0};
  std::atomic<int64_t> prefix_lookups_{0}, prefix_hits_{0};
  std::thread thread_;
};

}  // namespace kvlab::engine
