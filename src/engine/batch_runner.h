// The model runner: the one place a forward pass is run. It owns what a pass
// needs besides the weights (the thread pool, the KV cache, the activation
// workspace and the logits) and steps a batch of (sequence, position, token)
// rows through the model. Session is its one-sequence use; ServingEngine,
// with the Scheduler deciding each batch, is its many-sequence use.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "engine/trace.h"
#include "kernels/thread_pool.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/workspace.h"

namespace kvlab::engine {

struct RunnerOptions {
  int n_seq = 1;
  int n_ctx = 2048;         // positions per sequence
  int n_threads = 0;        // 0: all cores
  int max_tokens = 512;     // rows per forward pass
  tensor::DType kv_type = tensor::DType::F16;
  // 0: each sequence owns n_ctx positions (a sliding-window layer keeps a
  // ring of window + max_tokens, kv/cache.h); else a pool of this many
  // 16-position blocks handed out by a kv::BlockManager.
  int kv_blocks = 0;
};

class BatchRunner {
 public:
  // Throws kvlab::Error for invalid options.
  BatchRunner(const model::Model& model, RunnerOptions opt);

  // One forward pass over `batch` (at most max_tokens rows). Returns the
  // logits of the rows with want_logits, in batch order, n_vocab floats
  // each; they stay valid until the next step.
  std::span<const float> step(std::span<const model::BatchEntry> batch);

  const model::Model& model() const { return model_; }
  const RunnerOptions& options() const { return opt_; }
  size_t n_vocab() const { return size_t(model_.config().n_vocab); }
  kv::Cache& cache() { return cache_; }
  const kv::Cache& cache() const { return cache_; }
  kernels::ThreadPool& pool() { return pool_; }
  // Non-null: every pass from now on adds its per-stage wall times to
  // `times` (model/stage_times.h); null stops it.
  void collect_stage_times(model::StageTimes* times) { ws_.stage_times = times; }
  // Non-null: every forward pass from now on adds the cache positions its
  // attention scored to `*n` (model/workspace.h); null stops it.
  void count_attended(uint64_t* n) { ws_.attended = n; }

 private:
  const model::Model& model_;
  RunnerOptions opt_;
  kernels::ThreadPool pool_;
  kv::Cache cache_;
  model::Workspace ws_;
  std::vector<float> logits_;
};

}  // namespace kvlab::engine
