#include "server/metrics.h"

#include <cstdio>
#include <variant>

namespace kvlab::server {
namespace {
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
const std::vector<double> kLatency = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
const std::vector<double> kItl = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.5};

// `{a,b}` from label lists that may be empty; "" when both are.
std::string braces(const std::string& a, const std::string& b = "") {
  if (a.empty() && b.empty()) return "";
  return "{" + a + (a.empty() || b.empty() ? "" : ",") + b + "}";
}

std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// A finished request's outcome as kvlab's finish_reason spells it, and as
// vLLM's finished_reason does (its FinishReason: a cancelled request is an abort).
constexpr std::array<const char*, 4> kOutcomes = {"stop", "length", "cancelled", "error"};
constexpr std::array<const char*, 4> kVllmOutcomes = {"stop", "length", "abort", "error"};
using Outcomes = std::array<int64_t, 4>;

// One quantity: its kvlab name, the names vLLM exports the same quantity
// under (the current name first, then deprecated ones older dashboards
// query), and its value. vLLM's histograms are rendered with kvlab's buckets.
struct Quantity {
  const char* type;  // counter | gauge | histogram
  const char* name;
  std::vector<const char*> vllm;
  const char* help;
  std::variant<int64_t, double, const Histogram*, const Outcomes*> value;
};

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// Clang before 17 deduces no aggregate's template arguments without a guide
// (the fuzzers' build uses clang).
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// One family: HELP, TYPE and the samples of `q` under `name`, each carrying `labels`.
void family(std::string& out, const Quantity& q, const std::string& name, const std::string& labels, bool vllm) {
  out += "# HELP " + name + " " + q.help + "\n# TYPE " + name + " " + q.type + "\n";
  std::visit(Overloaded{
                 [&](int64_t v) { out += name + braces(labels) + " " + std::to_string(v) + "\n"; },
                 [&](double v) { out += name + braces(labels) + " " + num(v) + "\n"; },
                 [&](const Histogram* h) { h->render(out, name, labels); },
                 [&](const Outcomes* o) {
                   for (size_t i = 0; i < o->size(); ++i)
                     out += name +
                            braces(labels, std::string(vllm ? "finished_reason" : "finish_reason") + "=\"" +
                                               (vllm ? kVllmOutcomes : kOutcomes)[i] + "\"") +
                            " " + std::to_string((*o)[i]) + "\n";
                 },
             },
             q.value);
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    out += name + "_bucket" + braces(labels, "le=\"" + le + "\"") + " " + std::to_string(cum) + "\n";
  }
  out += name + "_sum" + braces(labels) + " " + num(sum_) + "\n";
  out += name + "_count" + braces(labels) + " " + std::to_string(count_) + "\n";
}

Metrics::Metrics() : queue_(kLatency), ttft_(kLatency), itl_(kItl), e2e_(kLatency) {}

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
  size_t i = 0;
  while (i + 1 < kOutcomes.size() && r != kOutcomes[i]) ++i;  // anything unknown is an error
  ++outcomes_[i];
}

void Metrics::request_rejected() { std::lock_guard l(mu_); ++rejected_; }

void Metrics::set_gauge_source(std::function<engine::Gauges()> f) { std::lock_guard l(mu_); gauges_ = std::move(f); }
void Metrics::set_model_name(std::string name) { std::lock_guard l(mu_); model_name_ = std::move(name); }

std::string Metrics::render() const {
  std::function<engine::Gauges()> gsrc;
  {
    std::lock_guard l(mu_);
    gsrc = gauges_;
  }
  const engine::Gauges g = gsrc ? gsrc() : engine::Gauges{};
  std::lock_guard l(mu_);
  // vLLM counts its prefix cache queries and hits in tokens (prompt tokens
  // looked up, and those found cached), which are kvlab's prompt and cached
  // prompt tokens; kvlab's own prefix_cache counters count requests.
  const std::vector<Quantity> table = {
      {"counter", "kvlab_prompt_tokens_total", {"vllm:prompt_tokens_total", "vllm:prefix_cache_queries_total"},
       "Prompt tokens of admitted requests (for vLLM's prefix cache queries: the prompt tokens looked up).",
       prompt_tokens_},
      {"counter", "kvlab_generation_tokens_total", {"vllm:generation_tokens_total"}, "Tokens generated.",
       generation_tokens_},
      {"counter", "kvlab_cached_prompt_tokens_total", {"vllm:prefix_cache_hits_total"},
       "Prompt tokens served from the KV cache (prefix reuse).", cached_tokens_},
      {"counter", "kvlab_spec_draft_tokens_total", {}, "Draft tokens verified by speculative decoding (--draft).",
       drafted_tokens_},
      {"counter", "kvlab_spec_accepted_tokens_total", {},
       "Draft tokens kept: tokens gained without a decode pass of their own.", accepted_tokens_},
      {"counter", "kvlab_requests_total", {"vllm:request_success_total"}, "Finished requests by outcome.",
       &outcomes_},
      {"counter", "kvlab_requests_rejected_total", {}, "Requests refused with 503 because the queue was full.",
       rejected_},
      {"gauge", "kvlab_requests_running", {"vllm:num_requests_running"}, "Requests holding a sequence slot.",
       int64_t(g.running)},
      {"gauge", "kvlab_requests_waiting", {"vllm:num_requests_waiting"}, "Requests queued for a sequence slot.",
       int64_t(g.waiting)},
      {"gauge", "kvlab_slots", {}, "Sequence slots (--parallel).", int64_t(g.slots)},
      {"gauge", "kvlab_kv_cache_usage_ratio", {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
       "Fraction of KV cache blocks referenced by running requests (1 means all).",
       g.kv_blocks > 0 ? double(g.kv_blocks_used) / g.kv_blocks : 0.0},
      {"gauge", "kvlab_kv_cache_blocks", {}, "KV cache blocks (16 positions each).", int64_t(g.kv_blocks)},
      {"gauge", "kvlab_kv_cache_blocks_used", {}, "KV cache blocks referenced by running requests.",
       int64_t(g.kv_blocks_used)},
      {"gauge", "kvlab_kv_cache_blocks_cached", {}, "Unreferenced KV cache blocks kept for prefix reuse (evictable).",
       int64_t(g.kv_blocks_cached)},
      {"counter", "kvlab_prefix_cache_queries_total", {}, "Admitted requests that looked up a cached prompt prefix.",
       g.prefix_lookups},
      {"counter", "kvlab_prefix_cache_hits_total", {}, "Admitted requests that reused at least one cached KV block.",
       g.prefix_hits},
      {"histogram", "kvlab_request_queue_time_seconds", {"vllm:request_queue_time_seconds"},
       "Time a request waited for a sequence slot.", &queue_},
      {"histogram", "kvlab_time_to_first_token_seconds", {"vllm:time_to_first_token_seconds"},
       "Time from request arrival to its first generated token.", &ttft_},
      {"histogram", "kvlab_inter_token_latency_seconds",
       {"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
       "Time between consecutive generated tokens of a request.", &itl_},
      {"histogram", "kvlab_e2e_request_latency_seconds", {"vllm:e2e_request_latency_seconds"},
       "Time from request arrival to its last token.", &e2e_},
  };
  std::string out;
  for (const Quantity& q : table) family(out, q, q.name, "", false);
  const std::string labels = "model_name=\"" + label_value(model_name_) + "\",engine=\"0\"";
  for (const Quantity& q : table)
    for (const char* name : q.vllm) family(out, q, name, labels, true);
  return out;
}

}  // namespace kvlab::server
