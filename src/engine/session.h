// One generation stream over a loaded model: the one-sequence use of the
// BatchRunner (which owns the KV cache, the workspace and the thread pool),
// recording a Trace of every forward pass it runs.
//
//  prefill(ids)  the whole prompt in batched forward passes (GEMM-shaped)
//  decode(id)    one new token against the cache (GEMV-shaped)
//  with kv_cache = false, decode(id) clears the cache and recomputes the
//  whole sequence: the O(N²) path the KV cache exists to avoid.
//  verify(ids)   several tokens in one decode-phase pass, logits after each
//                (speculative decoding: engine/generate.h); truncate(n)
//                then drops the rejected ones
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/batch_runner.h"
#include "engine/trace.h"

namespace kvlab::engine {

struct SessionOptions {
  int n_ctx = 2048;       // positions the KV cache holds (-c)
  int n_threads = 0;      // 0: all cores (-t)
  int max_batch = 512;    // tokens per forward pass; longer inputs are chunked
  bool kv_cache = true;   // false: --no-kv-cache
  tensor::DType kv_type = tensor::DType::F16;
};

class Session {
 public:
  // Throws kvlab::Error for invalid options (n_ctx < 1, threads < 1, ...).
  Session(const model::Model& model, SessionOptions opt);

  // Appends `ids` (at least one) and returns the logits after the last one.
  // Throws kvlab::Error if the sequence would exceed n_ctx.
  std::span<const float> prefill(std::span<const int32_t> ids);
  // Appends one token and returns the logits that follow it.
  std::span<const float> decode(int32_t id);
  // Appends `ids` (at least two) as prefill does and returns, for each id
  // after the first `skip` + 1, its natural-log probability under the model
  // given all the tokens before it: out[i] = log p(ids[skip+i+1] | ...,
  // ids[skip+i]), from the raw logits (log-softmax in double; no temperature
  // or other sampling transform). The LM head runs on every scored position,
  // in passes whose logits stay under kScoreLogitBytes.
  std::vector<double> score(std::span<const int32_t> ids, size_t skip = 0);
  // What score() reads: appends `ids` as score() does and calls row(i,
  // logits) for each scored position, i as in score()'s out[i], `logits`
  // the n_vocab raw logits that predict ids[skip+i+1]. Called from the
  // thread pool's workers, several rows at once; a row's span is valid only
  // during its call.
  using ScoredRow = std::function<void(size_t i, std::span<const float> logits)>;
  void score_rows(std::span<const int32_t> ids, size_t skip, const ScoredRow& row);
  // Appends `ids` (1 to max_batch of them) in one forward pass and returns
  // the logits after each: row i (n_vocab floats at i * n_vocab) follows
  // ids[i]. A row equals the logits decode() would give at that position:
  // every matmul row and attention read is per token (kernels/matmul.h).
  // Needs the KV cache (throws kvlab::Error without it).
  std::span<const float> verify(std::span<const int32_t> ids);
  // Forgets every position from n on (n <= n_past()): the cache keeps the
  // rows, and the next pass overwrites them.
  void truncate(int n);
  static constexpr size_t kScoreLogitBytes = size_t(64) << 20;

  void reset();  // forget the sequence (keeps buffers)
  int n_past() const { return int(history_.size()); }
  const std::vector<int32_t>& history() const { return history_; }
  const SessionOptions& options() const { return opt_; }
  const model::Model& model() const { return runner_.model(); }
  const kv::Cache& cache() const { return runner_.cache(); }
  // Bytes the cache holds for this sequence (0 between steps without a cache).
  size_t kv_bytes_in_use() const { return opt_.kv_cache ? cache().bytes_used(0) : 0; }
  Trace& trace() { return trace_; }
  const Trace& trace() const { return trace_; }
  kernels::ThreadPool& pool() { return runner_.pool(); }
  // Non-null: every forward pass from now on adds its per-stage wall times
  // to `times` (model/stage_times.h); null stops it.
  void collect_stage_times(model::StageTimes* times) { runner_.collect_stage_times(times); }
  // Non-null: every forward pass from now on adds the cache positions its
  // attention scored, one per (token, KV head, layer, position), to `*n`.
  void count_attended(uint64_t* n) { runner_.count_attended(n); }

 private:
  // Forwards history_[from..] at their positions (chunked by max_batch) and
  // returns the logits after the final token.
  std::span<const float> run(size_t from, Phase phase);
  // One pass over history_[start, end): the rows from `logits_from` on want
  // logits. Recorded in the trace.
  std::span<const float> pass(size_t start, size_t end, size_t logits_from, Phase phase, bool logits_for_all = false);

  SessionOptions opt_;
  BatchRunner runner_;
  std::vector<model::BatchEntry> batch_;
  std::vector<int32_t> history_;
  Trace trace_;
};

}  // namespace kvlab::engine
