#include "engine/session.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "sample/sampler.h"

namespace kvlab::engine {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Prefill: return "prefill";
    case Phase::Decode: return "decode";
    case Phase::Recompute: return "recompute";
  }
  return "?";
}

namespace {
SessionOptions checked(SessionOptions o) {
  if (o.n_threads == 0) o.n_threads = kernels::ThreadPool::default_threads();
  if (o.n_ctx < 1) throw Error("context size must be >= 1, got " + std::to_string(o.n_ctx));
  if (o.max_batch < 1) throw Error("batch size must be >= 1");
  o.max_batch = std::min(o.max_batch, o.n_ctx);
  return o;
}
}  // namespace

Session::Session(const model::Model& model, SessionOptions opt)
    : model_(model),
      opt_(checked(opt)),
      pool_(opt_.n_threads),
      cache_(model.config(), opt_.n_ctx, 1, opt_.kv_type, kv::Cache::PassLimit{opt_.max_batch}),
      ws_(model.config(), opt_.max_batch, opt_.n_ctx, opt_.n_threads),
      logits_(size_t(model.config().n_vocab)) {
  batch_.reserve(size_t(opt_.max_batch));
  history_.reserve(size_t(opt_.n_ctx));
}

void Session::reset() {
  history_.clear();
  cache_.clear(0);
}

void Session::run(size_t from, Phase phase) {
  for (size_t start = from; start < history_.size(); start += size_t(opt_.max_batch)) {
    const size_t end = std::min(history_.size(), start + size_t(opt_.max_batch));
    batch_.clear();
    for (size_t i = start; i < end; ++i)
      batch_.push_back({history_[i], int32_t(i), 0, i + 1 == history_.size()});
    const auto t0 = Clock::now();
    model_.forward(batch_, cache_, ws_, pool_, logits_.data());
    trace_.steps.push_back({phase, int(end - start), int(start), seconds_since(t0)});
  }
}

std::span<const float> Session::prefill(std::span<const int32_t> ids) {
  if (ids.empty()) throw Error("prefill needs at least one token");
  if (history_.size() + ids.size() > size_t(opt_.n_ctx))
    throw Error("prompt of " + std::to_string(ids.size()) + " tokens does not fit the context of " +
                std::to_string(opt_.n_ctx) + " (raise -c)");
  const size_t from = history_.size();
  history_.insert(history_.end(), ids.begin(), ids.end());
  run(opt_.kv_cache ? from : 0, Phase::Prefill);
  if (!opt_.kv_cache) cache_.clear(0);
  return logits_;
}

std::vector<double> Session::score(std::span<const int32_t> ids, size_t skip) {
  if (ids.size() < skip + 2) throw Error("scoring needs at least two tokens past the skipped ones");
  if (history_.size() + ids.size() > size_t(opt_.n_ctx))
    throw Error(std::to_string(ids.size()) + " tokens do not fit the context of " + std::to_string(opt_.n_ctx) +
                " (raise -c)");
  const size_t V = size_t(model_.config().n_vocab);
  const size_t pass = std::clamp<size_t>(kScoreLogitBytes / (V * sizeof(float)), 1, size_t(opt_.max_batch));
  std::vector<float> logits(pass * V);
  // Positions whose logits predict a scored id: [scored_from, end - 1).
  const size_t from = history_.size(), scored_from = from + skip;
  // Without a cache the appended ids still go through in passes over the
  // cache, as one recomputation would, and nothing is kept after.
  if (!opt_.kv_cache) cache_.clear(0);
  history_.insert(history_.end(), ids.begin(), ids.end());
  const size_t last = history_.size() - 1;
  std::vector<double> out(last - scored_from);
  for (size_t start = opt_.kv_cache ? from : 0; start < history_.size(); start += pass) {
    const size_t end = std::min(history_.size(), start + pass);
    batch_.clear();
    for (size_t i = start; i < end; ++i) batch_.push_back({history_[i], int32_t(i), 0, i >= scored_from});
    const auto t0 = Clock::now();
    model_.forward(batch_, cache_, ws_, pool_, logits.data());
    trace_.steps.push_back({Phase::Prefill, int(end - start), int(start), seconds_since(t0)});
    // Row r of `logits` is position first_row + r (forward packs the rows
    // that asked for logits, in order).
    const size_t first_row = std::max(start, scored_from);
    const size_t rows_end = std::min(end, last), rows = rows_end > first_row ? rows_end - first_row : 0;
    pool_.for_each(rows, [&](size_t r, int) {
      const size_t i = first_row + r;
      const std::span<const float> row(&logits[r * V], V);
      out[i - scored_from] = double(row[size_t(history_[i + 1])]) - sample::log_sum_exp(row);
    });
  }
  if (!opt_.kv_cache) cache_.clear(0);
  return out;
}

std::span<const float> Session::verify(std::span<const int32_t> ids) {
  if (!opt_.kv_cache) throw Error("speculative decoding needs the KV cache");
  if (ids.empty() || ids.size() > size_t(opt_.max_batch))
    throw Error("a verify pass takes 1 to " + std::to_string(opt_.max_batch) + " tokens, got " +
                std::to_string(ids.size()));
  if (history_.size() + ids.size() > size_t(opt_.n_ctx))
    throw Error("context of " + std::to_string(opt_.n_ctx) + " is full");
  const size_t from = history_.size(), V = size_t(model_.config().n_vocab);
  history_.insert(history_.end(), ids.begin(), ids.end());
  batch_.clear();
  for (size_t i = from; i < history_.size(); ++i) batch_.push_back({history_[i], int32_t(i), 0, true});
  verify_logits_.resize(ids.size() * V);
  const auto t0 = Clock::now();
  model_.forward(batch_, cache_, ws_, pool_, verify_logits_.data());
  trace_.steps.push_back({Phase::Decode, int(ids.size()), int(from), seconds_since(t0), true});
  return verify_logits_;
}

void Session::truncate(int n) {
  if (n < 0 || n > n_past()) throw Error("cannot truncate a sequence of " + std::to_string(n_past()) + " to " + std::to_string(n));
  history_.resize(size_t(n));
  cache_.set_used(0, std::min(cache_.used(0), n));
}

std::span<const float> Session::decode(int32_t id) {
  if (history_.size() + 1 > size_t(opt_.n_ctx)) throw Error("context of " + std::to_string(opt_.n_ctx) + " is full");
  history_.push_back(id);
  if (opt_.kv_cache) {
    run(history_.size() - 1, Phase::Decode);
  } else {
    // Nothing survives between steps: recompute every position's K and V.
    cache_.clear(0);
    run(0, Phase::Recompute);
    cache_.clear(0);
  }
  return logits_;
}

}  // namespace kvlab::engine
