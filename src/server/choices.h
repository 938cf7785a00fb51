// The n choices of one request (OpenAI's `n`): n sequences of the same
// prompt in the scheduler, choice i sampled with seed + i, so that sampled
// choices differ and a request with a seed gives the same n back. They run
// as any n requests do (continuous batching; the prefix cache serves the
// shared prompt to those admitted after the first has stored its blocks).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engine/serving_engine.h"
#include "server/openai_api.h"

namespace kvlab::server {

class Choices {
 public:
  // All n queued, or none (nullopt: the queue had room for fewer).
  static std::optional<Choices> submit(engine::ServingEngine& serving, const GenRequest& req, int n);

  int size() const { return int(handles_.size()); }
  void cancel();
  // Waits up to `timeout` for choice i to finish; its whole text then.
  std::optional<Handle::Update> wait_for(int i, std::chrono::milliseconds timeout);
  // News from any unfinished choice, or nullopt after `timeout` without any:
  // (choice index, update). Choices take turns, so a busy one cannot starve
  // the others.
  std::optional<std::pair<int, Handle::Update>> next(std::chrono::milliseconds timeout);
  bool all_done() const;
  // Usage over the choices: the prompt counted once (as OpenAI and vLLM
  // do), the completions summed; the phases' times of the slowest choice.
  Timings timings() const;

 private:
  std::vector<std::shared_ptr<Handle>> handles_;
  std::vector<bool> done_;
  int turn_ = 0;
};

}  // namespace kvlab::server
