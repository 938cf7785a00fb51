// What the serving engine reports: events as they happen (ServingObserver,
// which the server's Prometheus metrics implement) and gauges sampled on
// demand. The engine knows no exposition format; the server knows no
// scheduling.
#pragma once
#include <cstdint>
#include <string>

namespace kvlab::engine {

struct Gauges {
  int running = 0;
  int waiting = 0;
  int slots = 0;
  int kv_blocks = 0;          // KV cache blocks in the pool
  int kv_blocks_used = 0;     // referenced by running sequences
  int kv_blocks_cached = 0;   // unreferenced, holding a reusable prefix
  int64_t prefix_lookups = 0; // admissions that looked for a cached prefix
  int64_t prefix_hits = 0;    // ... and reused at least one block
};

// Called on the engine's thread; implementations must be thread-safe
// against their own readers. Durations in seconds.
class ServingObserver {
 public:
  virtual ~ServingObserver() = default;
  virtual void observe_queue(double s) = 0;
  virtual void observe_ttft(double s) = 0;
  virtual void observe_itl(double s) = 0;
  virtual void observe_e2e(double s) = 0;
  virtual void add_tokens(int64_t prompt, int64_t generated, int64_t cached = 0) = 0;
  virtual void add_drafts(int64_t drafted, int64_t accepted) = 0;  // speculative decoding
  virtual void request_finished(const std::string& finish_reason) = 0;  // stop | length | cancelled | error
};

}  // namespace kvlab::engine
