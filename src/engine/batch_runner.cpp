#include "engine/batch_runner.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace kvlab::engine {
namespace {
RunnerOptions checked(RunnerOptions o) {
  if (o.n_threads <= 0) o.n_threads = kernels::ThreadPool::default_threads();
  if (o.n_seq < 1) throw Error("the runner needs at least one sequence");
  if (o.n_ctx < 1) throw Error("context size must be >= 1, got " + std::to_string(o.n_ctx));
  if (o.max_tokens < 1) throw Error("batch size must be >= 1");
  return o;
}

kv::Cache make_cache(const model::Config& cfg, const RunnerOptions& o) {
  const kv::Shape shape = model::kv_shape(cfg);
  if (o.kv_blocks > 0) return kv::Cache(shape, o.n_ctx, o.n_seq, o.kv_type, o.kv_blocks);
  return kv::Cache(shape, o.n_ctx, o.n_seq, o.kv_type, kv::Cache::PassLimit{o.max_tokens});
}
}  // namespace

BatchRunner::BatchRunner(const model::Model& model, RunnerOptions opt)
    : model_(model),
      opt_(checked(opt)),
      pool_(opt_.n_threads),
      cache_(make_cache(model.config(), opt_)),
      ws_(model.config(), opt_.max_tokens, opt_.n_ctx, opt_.n_threads),
      logits_(n_vocab()) {}

std::span<const float> BatchRunner::step(std::span<const model::BatchEntry> batch) {
  const size_t rows = size_t(std::count_if(batch.begin(), batch.end(), [](const auto& e) { return e.want_logits; }));
  // Grows to the largest pass seen and stays: a decode step reuses it.
  if (logits_.size() < rows * n_vocab()) logits_.resize(rows * n_vocab());
  model_.forward(batch, cache_, ws_, pool_, logits_.data());
  return std::span<const float>(logits_).first(rows * n_vocab());
}

}  // namespace kvlab::engine
