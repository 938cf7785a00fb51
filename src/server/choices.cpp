#include "server/choices.h"

#include <algorithm>

namespace kvlab::server {

std::optional<Choices> Choices::submit(engine::ServingEngine& serving, const GenRequest& req, int n) {
  std::vector<GenRequest> reqs;
  for (int i = 0; i < n; ++i) {
    reqs.push_back(req);
    reqs.back().sampling.seed = req.sampling.seed + uint64_t(i);
  }
  Choices c;
  c.handles_ = serving.submit_all(std::move(reqs));
  if (c.handles_.empty()) return std::nullopt;
  c.done_.assign(size_t(n), false);
  return c;
}

void Choices::cancel() {
  for (const auto& h : handles_) h->cancel();
}

std::optional<Handle::Update> Choices::wait_for(int i, std::chrono::milliseconds timeout) {
  std::optional<Handle::Update> u = handles_[size_t(i)]->wait_all_for(timeout);
  if (u) done_[size_t(i)] = true;
  return u;
}

std::optional<std::pair<int, Handle::Update>> Choices::next(std::chrono::milliseconds timeout) {
  const int n = size();
  // First whatever is there already, from the choice after the last one
  // served; then a wait on the first unfinished one.
  for (int k = 0; k < n; ++k) {
    const int i = (turn_ + k) % n;
    if (done_[size_t(i)]) continue;
    if (std::optional<Handle::Update> u = handles_[size_t(i)]->next(std::chrono::milliseconds(0))) {
      done_[size_t(i)] = u->done;
      turn_ = (i + 1) % n;
      return std::pair{i, std::move(*u)};
    }
  }
  for (int i = 0; i < n; ++i) {
    if (done_[size_t(i)]) continue;
    std::optional<Handle::Update> u = handles_[size_t(i)]->next(timeout);
    if (!u) return std::nullopt;
    done_[size_t(i)] = u->done;
    turn_ = (i + 1) % n;
    return std::pair{i, std::move(*u)};
  }
  return std::nullopt;
}

bool Choices::all_done() const {
  return std::all_of(done_.begin(), done_.end(), [](bool d) { return d; });
}

Timings Choices::timings() const {
  Timings t = handles_.front()->timings();
  for (size_t i = 1; i < handles_.size(); ++i) {
    const Timings u = handles_[i]->timings();
    t.completion_tokens += u.completion_tokens;
    t.sequences += u.sequences;
    t.drafted += u.drafted;
    t.draft_accepted += u.draft_accepted;
    t.queue_ms = std::max(t.queue_ms, u.queue_ms);
    t.prompt_ms = std::max(t.prompt_ms, u.prompt_ms);
    t.decode_ms = std::max(t.decode_ms, u.decode_ms);
    t.ttft_ms = std::max(t.ttft_ms, u.ttft_ms);
  }
  return t;
}

}  // namespace kvlab::server
