// A loaded model: the mapped GGUF file, its Config and bound weights, and the
// one forward pass that prefill, decode and no-KV-cache recomputation share.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/aligned_vector.h"
#include "gguf/file.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "kv/cache.h"
#include "model/config.h"
#include "model/stage_times.h"
#include "model/weights.h"

namespace kvlab::model {

// One token to process: it is written to the KV cache of `seq` at `pos` and
// attends to positions [0, pos] of that sequence (Config::first_visible .. pos
// in a sliding-window layer).
struct BatchEntry {
  int32_t token = 0;
  int32_t pos = 0;
  int32_t seq = 0;
  bool want_logits = false;
};

// Activation buffers for up to `max_tokens` tokens per forward pass, allocated
// once. Shapes are [tokens][features], row-major.
class Workspace {
 public:
  Workspace(const Config& cfg, int max_tokens, int n_ctx, int n_threads);
  int max_tokens() const { return max_tokens_; }
  // Non-null: every forward pass adds its per-stage wall times here.
  StageTimes* stage_times = nullptr;

 private:
  friend class Model;
  int max_tokens_;
  // Matmul inputs and outputs, on cache-line boundaries (common/aligned_vector.h).
  AlignedVector<float> x;     // (T, n_embd)  residual stream
  AlignedVector<float> xn;    // (T, n_embd)  normalised input of a sub-layer
  AlignedVector<float> q;     // (T, q_dim)
  AlignedVector<float> k;     // (T, kv_dim)
  AlignedVector<float> v;     // (T, kv_dim)
  AlignedVector<float> att;   // (T, q_dim)   attention output, heads concatenated
  AlignedVector<float> gate;  // (T, n_ff)
  AlignedVector<float> up;    // (T, n_ff)
  std::vector<float> rope;      // (T, rope_dim) cos/sin pairs per token
  std::vector<float> rope_swa;  // (T, rope_dim) the same for local layers (gemma3), else empty
  std::vector<kernels::AttnItem> attn_items;  // (T * n_head_kv) one per token and KV head
  // Where each run of batch entries that store into the same KV cache block
  // starts, and T last: Model::attention_block's K/V stores go one run per
  // task, so no two threads write one block's tiles.
  std::vector<uint32_t> kv_block_runs;
  kernels::AttnScratch attn;
  kernels::MatmulScratch mm;
};

class Model {
 public:
  // Opens, validates and binds `path`. Throws kvlab::Error on any problem.
  // Weights are read into huge-page memory by default (gguf::Residency).
  static std::unique_ptr<Model> load(const std::string& path,
                                     gguf::Residency residency = gguf::Residency::Resident);

  const Config& config() const { return cfg_; }
  const gguf::File& file() const { return file_; }
  const Weights& weights() const { return w_; }
  uint64_t n_params() const;

  // Runs the batch through all layers, writing each entry's K/V into `cache`,
  // and writes one row of n_vocab logits per entry with want_logits, in batch
  // order, to `logits`. Entries must be valid: token < n_vocab, pos < cache
  // n_ctx, seq < cache n_seq, and every position an entry attends to must be
  // in the cache or earlier in the batch (throws kvlab::Error otherwise).
  void forward(std::span<const BatchEntry> batch, kv::Cache& cache, Workspace& ws, kernels::ThreadPool& pool,
               float* logits) const;

 private:
  Model(gguf::File file, Config cfg, Weights w) : file_(std::move(file)), cfg_(std::move(cfg)), w_(std::move(w)) {}
  void attention_block(const LayerWeights& l, int layer, std::span<const BatchEntry> batch, kv::Cache& cache,
                       Workspace& ws, kernels::ThreadPool& pool, StageClock& clock) const;
  void ffn_block(const LayerWeights& l, size_t n_tokens, Workspace& ws, kernels::ThreadPool& pool,
                 StageClock& clock) const;
  void add_residual(const std::vector<float>& post_norm, size_t n_tokens, Workspace& ws,
                    kernels::ThreadPool& pool) const;

  gguf::File file_;
  Config cfg_;
  Weights w_;
};

}  // namespace kvlab::model
