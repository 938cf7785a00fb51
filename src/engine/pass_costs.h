// What the passes cost, measured as they run: the time of a decode-only
// pass and the time each prompt token adds to a pass. The scheduler sizes
// each pass's prefill chunk from them so the pass stays near a time target
// (prefill_budget, engine/scheduler.h): every running stream gets a token
// per pass, so a pass's time is their inter-token latency.
//
// Measured rather than predicted by the perf model (lab/cost, which the
// engine may not include): the wall time already holds what the model
// leaves out or mispredicts (a CPU shared with other work, the sampler,
// attention growing with the positions) and follows it as it changes.
// Each estimate is an exponential moving average over the last few passes,
// so one slow pass (a descheduled thread) moves it by a fraction.
#pragma once

namespace kvlab::engine {

class PassCosts {
 public:
  // One pass of `decode_rows` decoding sequences and `prefill_tokens` prompt
  // tokens took `ms` (forward pass and sampling: what a stream waits for).
  void observe(int decode_rows, int prefill_tokens, double ms);
  bool decode_known() const { return decode_ms_ > 0; }
  bool prefill_known() const { return prefill_token_ms_ > 0; }
  // A pass of decode rows only, as the last ones took.
  double decode_ms() const { return decode_ms_; }
  // What a prompt token adds to a pass (a prefill-only pass: its time per
  // token, the pass's fixed cost shared out).
  double prefill_token_ms() const { return prefill_token_ms_; }

 private:
  // Weight of the newest pass: about the last 4 passes count.
  static constexpr double kNewest = 0.25;
  static double moved(double average, double sample) {
    return average > 0 ? average + kNewest * (sample - average) : sample;
  }
  double decode_ms_ = 0, prefill_token_ms_ = 0;
};

}  // namespace kvlab::engine
