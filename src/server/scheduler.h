// Continuous batching. One scheduler thread owns the model's KV cache (one
// slot per concurrent sequence), the workspace and the thread pool. Every
// iteration builds ONE batch: a decode entry for each running sequence plus a
// chunk of prompt tokens of sequences still prefilling (chunked prefill, so a
// long prompt does not stall running streams), runs one forward pass, samples
// each sequence that produced logits and hands the new text to the request's
// handle, which the HTTP handler thread waits on.
//
// Speculative decoding (--draft, engine/ngram_draft.h): a decoding
// sequence's entry may come with prompt-lookup drafts at the positions after
// it. Its rows are sampled in order, each on the history with the drafts
// before it, and kept while they are the draft; the KV rows of rejected
// drafts lie past n_past and are overwritten by the next pass. Logits do not
// depend on the batch, so the tokens are those of plain decoding.
//
// KV memory is a pool of 16-position blocks (kv::BlockManager). A request is
// admitted only when the pool can give it blocks for its whole budget
// (prompt + max_tokens, capped by the context), so a running sequence never
// runs out; otherwise it waits in FIFO order. At admission the longest cached
// prefix of its prompt is mapped instead of recomputed (prefix caching), and
// its own full blocks become reusable as they fill.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/ngram_draft.h"
#include "kv/block_manager.h"
#include "model/model.h"
#include "sample/json_mode.h"
#include "sample/sampler.h"
#include "server/metrics.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::server {

using Clock = std::chrono::steady_clock;

struct GenRequest {
  std::vector<int32_t> prompt;  // at least one token, shorter than n_ctx
  sample::Params sampling;
  int max_tokens = 16;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int logprobs = -1;  // -1: none; else each token's log-probability and this many alternatives (0..20)
  // OpenAI's echo (completions): the text starts with the prompt's, and with
  // logprobs every prompt token has its entry too (the first one's logprob
  // is NaN: nothing predicts it). max_tokens may then be 0.
  bool echo = false;
  bool scores_prompt() const { return echo && logprobs >= 0; }  // every prompt position's logits are needed
  // JSON mode (response_format json_object): every token keeps the text the
  // start of a JSON object (sample/json_mode.h), and the reply ends, "stop",
  // when the object closes.
  bool json_object = false;
};

// One generated token for the API's logprobs: its bytes, where its text
// starts in the completion (in characters, as OpenAI's text_offset), its
// log-probability under the model's raw distribution (before temperature
// and the other sampling steps, as vLLM reports by default) and the most
// likely alternatives.
struct TokenLogprobs {
  struct Alt {
    int32_t id;
    std::string bytes;
    double logprob;
  };
  int32_t id = 0;
  std::string bytes;
  size_t text_offset = 0;
  double logprob = 0;
  std::vector<Alt> top;
};

struct Timings {
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int completion_tokens = 0;
  double queue_ms = 0;
  double prompt_ms = 0;   // admission -> first token
  double decode_ms = 0;   // first token -> last token
  double ttft_ms = 0;     // arrival -> first token
  int sequences = 1;      // choices summed into these (server/choices.h), each with a first token from its prefill
  int drafted = 0;        // speculative decoding: tokens drafted, and those kept
  int draft_accepted = 0;
};

// Shared between the scheduler (producer) and one HTTP handler (consumer).
class Handle {
 public:
  struct Update {
    std::string text;                   // new text since the last update
    std::vector<TokenLogprobs> logprobs;  // the tokens whose text starts in it (when asked for)
    bool done = false;
    std::string finish_reason;          // "stop" | "length" | "error" (when done)
    std::string error;                  // when finish_reason == "error"
  };
  // Waits up to `timeout` for news; returns nullopt on timeout.
  std::optional<Update> next(std::chrono::milliseconds timeout);
  // Blocks until done; returns all text.
  Update wait_all();
  // The same, giving up after `timeout` (nullopt; the text stays pending).
  std::optional<Update> wait_all_for(std::chrono::milliseconds timeout);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  Timings timings() const;

 private:
  // Moves the pending text and state out; the caller holds mu_.
  Update take_locked();
  friend class Scheduler;
  void push(const std::string& text, std::vector<TokenLogprobs> logprobs);
  void finish(const std::string& reason, const std::string& error = {});

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  std::vector<TokenLogprobs> pending_logprobs_;
  bool done_ = false;
  std::string finish_reason_, error_;
  std::atomic<bool> cancelled_{false};
  Timings timings_;
};

struct SchedulerOptions {
  int n_seq = 4;             // --parallel
  int n_ctx = 2048;          // per sequence
  int n_threads = 0;         // 0: all cores
  int prefill_chunk = 128;   // prompt tokens per iteration (all prefilling sequences together)
  int max_queue = 64;        // waiting requests beyond the slots; more: rejected
  tensor::DType kv_type = tensor::DType::F16;
  int kv_blocks = 0;         // KV pool size in 16-position blocks; 0: n_seq full contexts
  // Speculative decoding (--draft): each decoding sequence's pass also
  // carries up to draft.max_tokens prompt-lookup drafts, kept while they are
  // what it samples, so its tokens are those of plain decoding.
  engine::DraftOptions draft;
};

class Scheduler {
 public:
  Scheduler(const model::Model& model, const tokenizer::Tokenizer& tok, SchedulerOptions opt, Metrics& metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; nullptr when the queue is full (or after shutdown).
  std::shared_ptr<Handle> submit(GenRequest req);
  // Stops the scheduler thread; unfinished requests end with an error.
  void shutdown();
  Gauges gauges() const;
  const SchedulerOptions& options() const { return opt_; }

 private:
  struct Waiting {
    GenRequest req;
    std::shared_ptr<Handle> h;
    Clock::time_point arrival;
  };
  struct Seq {
    int slot = -1;
    GenRequest req;
    std::shared_ptr<Handle> h;
    Clock::time_point arrival, admitted, first_token, last_token;
    std::vector<int32_t> tokens;  // prompt + generated
    int n_past = 0;               // positions in the KV cache
    int n_cached = 0;             // prompt positions reused from the prefix cache
    int n_generated = 0;
    bool prefilling = true;
    std::unique_ptr<sample::Sampler> sampler;
    std::unique_ptr<tokenizer::StreamDecoder> decoder;
    std::string text;             // generated text so far
    size_t emitted = 0;           // bytes of `text` sent
    // With req.logprobs >= 0: every generated token's entry (text_offset in
    // bytes until sent), the first not yet sent, the bytes of all pieces so
    // far, and how many characters `text` has up to counted_bytes.
    std::vector<TokenLogprobs> logprobs;
    size_t logprobs_sent = 0, piece_bytes = 0, counted_bytes = 0, counted_chars = 0;
    // echo with logprobs: the prompt's entries, filled as its chunks run.
    std::vector<TokenLogprobs> prompt_logprobs;
    std::optional<sample::JsonPrefix> json;  // JSON mode: the text so far, as the grammar has it
    std::vector<float> masked;    // JSON mode: a logits row with the tokens it refuses at -inf
    std::vector<int32_t> draft;   // this step's drafts: the tokens fed after tokens.back()
    int drafted = 0, draft_accepted = 0;
  };
  // What a run of logits rows of a step is for: one row, or with drafts one
  // row for the fed token and one per draft.
  struct Row {
    Seq* s;
    int pos;         // the position whose logits the first row is
    bool sample;     // the next token is sampled from it (else: a prompt token's logprob)
    size_t first;    // its first logits row
    int drafts = 0;  // rows after the first, those of s->draft
  };

  void loop();
  void admit();
  void step();
  // Samples row run `r` in turn while the drafts are kept: the tokens it
  // gives (the kept drafts, then the first that is not a draft) with their
  // logprob entries where asked for; in JSON mode, each drawn among the
  // tokens the grammar takes (none: JSON mode found no way on).
  void sample_run(const Row& r, std::vector<int32_t>& ids, std::vector<TokenLogprobs>& lps);
  // Handles a freshly sampled token (may finish and free the sequence).
  void on_token(Seq& s, int32_t id, TokenLogprobs lp);
  // A sequence whose prompt has just been prefilled: counted, and with echo
  // the prompt's text (and its logprob entries) sent at once at the head of
  // its output.
  void end_prefill(Seq& s);
  // A logprob entry for token `id` from its logits row (n alternatives).
  TokenLogprobs logprob_entry(std::span<const float> row, int32_t id, int n) const;
  void emit(Seq& s, bool final);
  void finish(Seq& s, const std::string& reason, const std::string& error = {});
  // Copies the block manager's counters for gauges() (read by other threads).
  void publish_kv_stats();

  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  const sample::JsonVocab json_vocab_;
  SchedulerOptions opt_;
  Metrics& metrics_;
  kernels::ThreadPool pool_;
  kv::Cache cache_;
  kv::BlockManager blocks_;
  model::Workspace ws_;
  std::vector<float> logits_;
  std::vector<model::BatchEntry> batch_;
  std::vector<Row> rows_;                       // the logits rows of a step, in runs
  std::vector<std::vector<int32_t>> sampled_;  // the tokens sampled from each run
  std::vector<std::vector<TokenLogprobs>> sampled_logprobs_;  // and their logprobs, where asked for

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Waiting> waiting_;
  std::vector<std::unique_ptr<Seq>> active_;  // index = slot; null when free
  std::atomic<int> running_{0};
  std::atomic<int> kv_used_{0}, kv_cached_{0};
  std::atomic<int64_t> prefix_lookups_{0}, prefix_hits_{0};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kvlab::server
