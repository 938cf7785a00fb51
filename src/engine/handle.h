// The meeting point of the serving engine's thread (producer) and one
// client's thread (consumer): new text and logprob entries as they are
// released, then the finish reason and the request's timings.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"

namespace kvlab::engine {

class Handle {
 public:
  struct Update {
    std::string text;                     // new text since the last update
    std::vector<TokenLogprobs> logprobs;  // the tokens whose text starts in it (when asked for)
    bool done = false;
    std::string finish_reason;            // "stop" | "length" | "cancelled" | "error" (when done)
    std::string error;                    // when finish_reason == "error"
  };
  // Waits up to `timeout` for news; returns nullopt on timeout.
  std::optional<Update> next(std::chrono::milliseconds timeout);
  // Blocks until done; returns all text.
  Update wait_all();
  // The same, giving up after `timeout` (nullopt; the text stays pending).
  std::optional<Update> wait_all_for(std::chrono::milliseconds timeout);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  Timings timings() const;

  // The producer's side (the serving engine's thread).
  void push(std::string text, std::vector<TokenLogprobs> logprobs);
  void set_timings(const Timings& t);
  void finish(const std::string& reason, const std::string& error = {});

 private:
  // Moves the pending text and state out; the caller holds mu_.
  Update take_locked();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  std::vector<TokenLogprobs> pending_logprobs_;
  bool done_ = false;
  std::string finish_reason_, error_;
  std::atomic<bool> cancelled_{false};
  Timings timings_;
};

}  // namespace kvlab::engine
