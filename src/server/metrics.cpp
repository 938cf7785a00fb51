#include "server/metrics.h"

#include <cstdio>

namespace kvlab::server {
namespace {
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
const std::vector<double> kLatency = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
const std::vector<double> kItl = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.5};
}  // namespace

Histogram::Histogram(std::string name, std::string help, std::vector<double> bounds)
    : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out) const {
  out += "# HELP " + name_ + " " + help_ + "\n# TYPE " + name_ + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name_ + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts_.back();
  out += name_ + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name_ + "_sum " + num(sum_) + "\n";
  out += name_ + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : queue_("kvlab_request_queue_time_seconds", "Time a request waited for a sequence slot.", kLatency),
      ttft_("kvlab_time_to_first_token_seconds", "Time from request arrival to its first generated token.", kLatency),
      itl_("kvlab_inter_token_latency_seconds", "Time between consecutive generated tokens of a request.", kItl),
      e2e_("kvlab_e2e_request_latency_seconds", "Time from request arrival to its last token.", kLatency) {}

void Metrics::observe_queue(double s) { std::lock_guard l(mu_); queue_.observe(s); }
void Metrics::observe_ttft(double s) { std::lock_guard l(mu_); ttft_.observe(s); }
void Metrics::observe_itl(double s) { std::lock_guard l(mu_); itl_.observe(s); }
void Metrics::observe_e2e(double s) { std::lock_guard l(mu_); e2e_.observe(s); }

void Metrics::add_tokens(int64_t prompt, int64_t generated, int64_t cached) {
  std::lock_guard l(mu_);
  prompt_tokens_ += prompt;
  generation_tokens_ += generated;
  cached_tokens_ += cached;
}

void Metrics::add_drafts(int64_t drafted, int64_t accepted) {
  std::lock_guard l(mu_);
  drafted_tokens_ += drafted;
  accepted_tokens_ += accepted;
}

void Metrics::request_finished(const std::string& r) {
  std::lock_guard l(mu_);
  if (r == "stop") ++finished_stop_;
  else if (r == "length") ++finished_length_;
  else if (r == "cancelled") ++cancelled_;
  else ++errors_;
}

void Metrics::request_rejected() { std::lock_guard l(mu_); ++rejected_; }

void Metrics::set_gauge_source(std::function<engine::Gauges()> f) { std::lock_guard l(mu_); gauges_ = std::move(f); }

std::string Metrics::render() const {
  std::function<engine::Gauges()> gsrc;
  {
    std::lock_guard l(mu_);
    gsrc = gauges_;
  }
  const engine::Gauges g = gsrc ? gsrc() : engine::Gauges{};
  std::lock_guard l(mu_);
  std::string out;
  auto counter = [&](const char* name, const char* help, int64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(v) + "\n";
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + num(v) + "\n";
  };
  counter("kvlab_prompt_tokens_total", "Prompt tokens processed.", prompt_tokens_);
  counter("kvlab_generation_tokens_total", "Tokens generated.", generation_tokens_);
  counter("kvlab_cached_prompt_tokens_total", "Prompt tokens served from the KV cache (prefix reuse).", cached_tokens_);
  counter("kvlab_spec_draft_tokens_total", "Draft tokens verified by speculative decoding (--draft).", drafted_tokens_);
  counter("kvlab_spec_accepted_tokens_total", "Draft tokens kept: tokens gained without a decode pass of their own.",
          accepted_tokens_);
  out +=
      "# HELP kvlab_requests_total Finished requests by outcome.\n# TYPE kvlab_requests_total counter\n"
      "kvlab_requests_total{finish_reason=\"stop\"} " + std::to_string(finished_stop_) + "\n"
      "kvlab_requests_total{finish_reason=\"length\"} " + std::to_string(finished_length_) + "\n"
      "kvlab_requests_total{finish_reason=\"cancelled\"} " + std::to_string(cancelled_) + "\n"
      "kvlab_requests_total{finish_reason=\"error\"} " + std::to_string(errors_) + "\n";
  counter("kvlab_requests_rejected_total", "Requests refused with 503 because the queue was full.", rejected_);
  gauge("kvlab_requests_running", "Requests holding a sequence slot.", g.running);
  gauge("kvlab_requests_waiting", "Requests queued for a sequence slot.", g.waiting);
  gauge("kvlab_slots_total", "Sequence slots (--parallel).", g.slots);
  gauge("kvlab_kv_cache_usage_ratio", "Fraction of KV cache blocks referenced by running requests.",
        g.kv_blocks > 0 ? double(g.kv_blocks_used) / g.kv_blocks : 0.0);
  gauge("kvlab_kv_cache_blocks_total", "KV cache blocks (16 positions each).", g.kv_blocks);
  gauge("kvlab_kv_cache_blocks_used", "KV cache blocks referenced by running requests.", g.kv_blocks_used);
  gauge("kvlab_kv_cache_blocks_cached", "Unreferenced KV cache blocks kept for prefix reuse (evictable).",
        g.kv_blocks_cached);
  counter("kvlab_prefix_cache_queries_total", "Admitted requests that looked up a cached prompt prefix.",
          g.prefix_lookups);
  counter("kvlab_prefix_cache_hits_total", "Admitted requests that reused at least one cached KV block.",
          g.prefix_hits);
  queue_.render(out);
  ttft_.render(out);
  itl_.render(out);
  e2e_.render(out);
  return out;
}

}  // namespace kvlab::server
