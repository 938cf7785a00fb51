// A loaded model: the mapped GGUF file, its Config and bound weights, and the
// one forward pass that prefill, decode and no-KV-cache recomputation share.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "kernels/thread_pool.h"
#include "model/config.h"
#include "model/kv_shape.h"
#include "model/stage_times.h"
#include "model/weights.h"

// Declared only: an includer that runs a forward pass includes kv/cache.h and
// model/workspace.h itself; the others do not compile the attention kernels'
// headers.
namespace kvlab::kv {
class Cache;
}

namespace kvlab::model {

class Workspace;

// One token to process: it is written to the KV cache of `seq` at `pos` and
// attends to positions [0, pos] of that sequence (Config::first_visible .. pos
// in a sliding-window layer).
struct BatchEntry {
  int32_t token = 0;
  int32_t pos = 0;
  int32_t seq = 0;
  bool want_logits = false;
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
  void rope_and_store(const LayerWeights& l, int layer, std::span<const BatchEntry> batch, kv::Cache& cache,
                      Workspace& ws, kernels::ThreadPool& pool) const;
  void attend(int layer, std::span<const BatchEntry> batch, const kv::Cache& cache, Workspace& ws,
              kernels::ThreadPool& pool) const;
  void ffn_block(const LayerWeights& l, size_t n_tokens, Workspace& ws, kernels::ThreadPool& pool,
                 StageClock& clock) const;
  void gated_ffn(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down, const float* in,
                 size_t n, float* out, Workspace& ws, kernels::ThreadPool& pool, StageClock& clock) const;
  void expert_ffn(const LayerWeights& l, size_t n_tokens, Workspace& ws, kernels::ThreadPool& pool,
                  StageClock& clock) const;
  void shared_expert(const LayerWeights& l, size_t n_tokens, Workspace& ws, kernels::ThreadPool& pool,
                     StageClock& clock) const;
  void input_norm(const std::vector<float>& weight, size_t n_tokens, Workspace& ws, kernels::ThreadPool& pool) const;
  void add_residual(const std::vector<float>& post_norm, size_t n_tokens, Workspace& ws,
                    kernels::ThreadPool& pool) const;

  gguf::File file_;
  Config cfg_;
  Weights w_;
};

}  // namespace kvlab::model
