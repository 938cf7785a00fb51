#include "engine/handle.h"

namespace kvlab::engine {

void Handle::push(std::string text, std::vector<TokenLogprobs> logprobs) {
  if (text.empty() && logprobs.empty()) return;
  {
    std::lock_guard l(mu_);
    pending_ += text;
    for (auto& e : logprobs) pending_logprobs_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void Handle::set_timings(const Timings& t) {
  std::lock_guard l(mu_);
  timings_ = t;
}

void Handle::finish(const std::string& reason, const std::string& error) {
  {
    std::lock_guard l(mu_);
    done_ = true;
    finish_reason_ = reason;
    error_ = error;
  }
  cv_.notify_all();
}

std::optional<Handle::Update> Handle::next(std::chrono::milliseconds timeout) {
  std::unique_lock l(mu_);
  if (!cv_.wait_for(l, timeout, [&] { return done_ || !pending_.empty(); })) return std::nullopt;
  return take_locked();
}

Handle::Update Handle::wait_all() {
  std::unique_lock l(mu_);
  cv_.wait(l, [&] { return done_; });
  return take_locked();
}

std::optional<Handle::Update> Handle::wait_all_for(std::chrono::milliseconds timeout) {
  std::unique_lock l(mu_);
  if (!cv_.wait_for(l, timeout, [&] { return done_; })) return std::nullopt;
  return take_locked();
}

Handle::Update Handle::take_locked() {
  Update u;
  u.text = std::move(pending_);
  pending_.clear();
  u.logprobs = std::move(pending_logprobs_);
  pending_logprobs_.clear();
  u.done = done_;
  u.finish_reason = finish_reason_;
  u.error = error_;
  return u;
}

Timings Handle::timings() const {
  std::lock_guard l(mu_);
  return timings_;
}

}  // namespace kvlab::engine
