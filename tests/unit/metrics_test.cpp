// The server's Prometheus metrics: one table of quantities rendered under
// kvlab's names and vLLM's, with the same values.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "server/metrics.h"

namespace kvlab::server {
namespace {

// sample (name and labels) -> value
std::map<std::string, std::string> samples(const std::string& text) {
  std::map<std::string, std::string> m;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    m[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return m;
}

TEST(Metrics, VllmNamesCarryTheSameValues) {
  Metrics metrics;
  metrics.set_model_name("tiny\"model");
  metrics.set_gauge_source([] {
    engine::Gauges g;
    g.running = 3;
    g.waiting = 2;
    g.kv_blocks = 8;
    g.kv_blocks_used = 2;
    return g;
  });
  metrics.add_tokens(100, 0, 64);
  metrics.add_tokens(0, 7);
  metrics.observe_ttft(0.2);
  metrics.observe_itl(0.03);
  metrics.request_finished("length");
  metrics.request_finished("cancelled");
  const auto m = samples(metrics.render());
  const std::string l = R"(model_name="tiny\"model",engine="0")";
  EXPECT_EQ(m.at("kvlab_prompt_tokens_total"), "100");
  EXPECT_EQ(m.at("vllm:prompt_tokens_total{" + l + "}"), "100");
  // vLLM counts prefix cache queries and hits in tokens.
  EXPECT_EQ(m.at("vllm:prefix_cache_queries_total{" + l + "}"), "100");
  EXPECT_EQ(m.at("vllm:prefix_cache_hits_total{" + l + "}"), "64");
  EXPECT_EQ(m.at("vllm:generation_tokens_total{" + l + "}"), "7");
  EXPECT_EQ(m.at("vllm:num_requests_running{" + l + "}"), "3");
  EXPECT_EQ(m.at("vllm:num_requests_waiting{" + l + "}"), "2");
  EXPECT_EQ(m.at("vllm:kv_cache_usage_perc{" + l + "}"), "0.25");
  EXPECT_EQ(m.at("vllm:gpu_cache_usage_perc{" + l + "}"), "0.25");
  EXPECT_EQ(m.at(R"(kvlab_requests_total{finish_reason="cancelled"})"), "1");
  EXPECT_EQ(m.at("vllm:request_success_total{" + l + R"(,finished_reason="abort"})"), "1");
  EXPECT_EQ(m.at("vllm:request_success_total{" + l + R"(,finished_reason="length"})"), "1");
  EXPECT_EQ(m.at("vllm:time_to_first_token_seconds_count{" + l + "}"), "1");
  EXPECT_EQ(m.at("vllm:time_to_first_token_seconds_bucket{" + l + R"(,le="0.25"})"), "1");
  EXPECT_EQ(m.at("vllm:time_to_first_token_seconds_bucket{" + l + R"(,le="0.1"})"), "0");
  EXPECT_EQ(m.at("kvlab_inter_token_latency_seconds_sum"), "0.03");
  EXPECT_EQ(m.at("vllm:inter_token_latency_seconds_sum{" + l + "}"), "0.03");
  EXPECT_EQ(m.at("vllm:time_per_output_token_seconds_sum{" + l + "}"), "0.03");
  EXPECT_EQ(m.at("vllm:e2e_request_latency_seconds_count{" + l + "}"), "0");
  EXPECT_EQ(m.at("vllm:request_queue_time_seconds_count{" + l + "}"), "0");
}

TEST(Metrics, EachFamilyOnce) {
  const std::string text = Metrics().render();
  std::istringstream in(text);
  std::map<std::string, int> types;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("# TYPE ", 0) == 0) ++types[line.substr(7, line.find(' ', 7) - 7)];
  for (const auto& [name, n] : types) EXPECT_EQ(n, 1) << name;
  EXPECT_EQ(types.count("vllm:inter_token_latency_seconds"), 1u);
}

}  // namespace
}  // namespace kvlab::server
