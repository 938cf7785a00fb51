#include "engine/session.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "engine/logprobs.h"

namespace kvlab::engine {
namespace {
SessionOptions checked(SessionOptions o) {
  if (o.n_threads == 0) o.n_threads = kernels::ThreadPool::default_threads();
  if (o.n_ctx < 1) throw Error("context size must be >= 1, got " + std::to_string(o.n_ctx));
  if (o.max_batch < 1) throw Error("batch size must be >= 1");
  o.max_batch = std::min(o.max_batch, o.n_ctx);
  return o;
}

RunnerOptions runner_options(const SessionOptions& o) {
  RunnerOptions r;
  r.n_seq = 1;
  r.n_ctx = o.n_ctx;
  r.n_threads = o.n_threads;
  r.max_tokens = o.max_batch;
  r.kv_type = o.kv_type;
  return r;
}
}  // namespace

Session::Session(const model::Model& model, SessionOptions opt)
    : opt_(checked(opt)), runner_(model, runner_options(opt_)) {
  batch_.reserve(size_t(opt_.max_batch));
  history_.reserve(size_t(opt_.n_ctx));
}

void Session::reset() {
  history_.clear();
  runner_.cache().clear(0);
}

std::span<const float> Session::pass(size_t start, size_t end, size_t logits_from, Phase phase, bool logits_for_all) {
  batch_.clear();
  for (size_t i = start; i < end; ++i) batch_.push_back({history_[i], int32_t(i), 0, i >= logits_from});
  const auto t0 = Clock::now();
  const std::span<const float> logits = runner_.step(batch_);
  trace_.steps.push_back({phase, int(end - start), int(start), seconds_since(t0), logits_for_all});
  return logits;
}

std::span<const float> Session::run(size_t from, Phase phase) {
  std::span<const float> logits;
  for (size_t start = from; start < history_.size(); start += size_t(opt_.max_batch))
    logits = pass(start, std::min(history_.size(), start + size_t(opt_.max_batch)), history_.size() - 1, phase);
  return logits;
}

std::span<const float> Session::prefill(std::span<const int32_t> ids) {
  if (ids.empty()) throw Error("prefill needs at least one token");
  if (history_.size() + ids.size() > size_t(opt_.n_ctx))
    throw Error("prompt of " + std::to_string(ids.size()) + " tokens does not fit the context of " +
                std::to_string(opt_.n_ctx) + " (raise -c)");
  const size_t from = history_.size();
  history_.insert(history_.end(), ids.begin(), ids.end());
  const std::span<const float> logits = run(opt_.kv_cache ? from : 0, Phase::Prefill);
  if (!opt_.kv_cache) runner_.cache().clear(0);
  return logits;
}

std::vector<double> Session::score(std::span<const int32_t> ids, size_t skip) {
  std::vector<double> out(ids.size() > skip + 1 ? ids.size() - skip - 1 : 0);
  score_rows(ids, skip, [&](size_t i, std::span<const float> logits) {
    out[i] = token_logprob(logits, ids[skip + i + 1]);
  });
  return out;
}

void Session::score_rows(std::span<const int32_t> ids, size_t skip, const ScoredRow& row) {
  if (ids.size() < skip + 2) throw Error("scoring needs at least two tokens past the skipped ones");
  if (history_.size() + ids.size() > size_t(opt_.n_ctx))
    throw Error(std::to_string(ids.size()) + " tokens do not fit the context of " + std::to_string(opt_.n_ctx) +
                " (raise -c)");
  const size_t V = runner_.n_vocab();
  const size_t chunk = std::clamp<size_t>(kScoreLogitBytes / (V * sizeof(float)), 1, size_t(opt_.max_batch));
  // Positions whose logits predict a scored id: [scored_from, end - 1).
  const size_t from = history_.size(), scored_from = from + skip;
  // Without a cache the appended ids still go through in passes over the
  // cache, as one recomputation would, and nothing is kept after.
  if (!opt_.kv_cache) runner_.cache().clear(0);
  history_.insert(history_.end(), ids.begin(), ids.end());
  const size_t last = history_.size() - 1;
  for (size_t start = opt_.kv_cache ? from : 0; start < history_.size(); start += chunk) {
    const size_t end = std::min(history_.size(), start + chunk);
    const std::span<const float> logits = pass(start, end, scored_from, Phase::Prefill);
    // Row r of `logits` is position first_row + r (the runner packs the rows
    // that asked for logits, in order).
    const size_t first_row = std::max(start, scored_from);
    const size_t rows_end = std::min(end, last), rows = rows_end > first_row ? rows_end - first_row : 0;
    runner_.pool().for_each(rows, [&](size_t r, int) { row(first_row + r - scored_from, logits.subspan(r * V, V)); });
  }
  if (!opt_.kv_cache) runner_.cache().clear(0);
}

std::span<const float> Session::verify(std::span<const int32_t> ids) {
  if (!opt_.kv_cache) throw Error("speculative decoding needs the KV cache");
  if (ids.empty() || ids.size() > size_t(opt_.max_batch))
    throw Error("a verify pass takes 1 to " + std::to_string(opt_.max_batch) + " tokens, got " +
                std::to_string(ids.size()));
  if (history_.size() + ids.size() > size_t(opt_.n_ctx))
    throw Error("context of " + std::to_string(opt_.n_ctx) + " is full");
  const size_t from = history_.size();
  history_.insert(history_.end(), ids.begin(), ids.end());
  return pass(from, history_.size(), from, Phase::Decode, true);
}

void Session::truncate(int n) {
  if (n < 0 || n > n_past()) throw Error("cannot truncate a sequence of " + std::to_string(n_past()) + " to " + std::to_string(n));
  history_.resize(size_t(n));
  kv::Cache& cache = runner_.cache();
  cache.set_used(0, std::min(cache.used(0), n));
}

std::span<const float> Session::decode(int32_t id) {
  if (history_.size() + 1 > size_t(opt_.n_ctx)) throw Error("context of " + std::to_string(opt_.n_ctx) + " is full");
  history_.push_back(id);
  if (opt_.kv_cache) return run(history_.size() - 1, Phase::Decode);
  // Nothing survives between steps: recompute every position's K and V.
  runner_.cache().clear(0);
  const std::span<const float> logits = run(0, Phase::Recompute);
  runner_.cache().clear(0);
  return logits;
}

}  // namespace kvlab::engine
