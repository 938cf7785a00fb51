// Server metrics in the Prometheus text exposition format: latency
// histograms (TTFT, inter-token, end-to-end, queue time), token and request
// counters (speculative decoding's drafts among them), and gauges (running / waiting requests, KV cache blocks, prefix
// cache hits)
// sampled from the serving engine when /metrics is scraped. Thread-safe.
//
// Each quantity is rendered under kvlab's name and, where vLLM exports the
// same quantity, under vLLM's name(s) too (vllm:..., labelled model_name and
// engine as vLLM does), so dashboards built for vLLM read a kvlab server.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "engine/serving_stats.h"

namespace kvlab::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);  // not locked: Metrics holds the lock
  // The _bucket, _sum and _count samples of `name`; `labels` (`k="v",...`,
  // possibly empty) go on each before `le`.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // one per bound, plus +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};


class Metrics : public engine::ServingObserver {
 public:
  Metrics();
  void observe_queue(double s) override;
  void observe_ttft(double s) override;
  void observe_itl(double s) override;
  void observe_e2e(double s) override;
  void add_tokens(int64_t prompt, int64_t generated, int64_t cached = 0) override;
  void add_drafts(int64_t drafted, int64_t accepted) override;  // speculative decoding
  void request_finished(const std::string& finish_reason) override;  // stop | length | cancelled | error
  void request_rejected();                                    // queue full (503)
  // Called at render time for the gauges.
  void set_gauge_source(std::function<engine::Gauges()> f);
  // The served model's id: the model_name label of vLLM's names.
  void set_model_name(std::string name);
  std::string render() const;

 private:
  mutable std::mutex mu_;
  Histogram queue_, ttft_, itl_, e2e_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, cached_tokens_ = 0;
  int64_t drafted_tokens_ = 0, accepted_tokens_ = 0;
  std::array<int64_t, 4> outcomes_{};  // stop, length, cancelled, error
  int64_t rejected_ = 0;
  std::string model_name_;
  std::function<engine::Gauges()> gauges_;
};

}  // namespace kvlab::server
