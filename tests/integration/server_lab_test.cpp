// The web page's live measurements (server/lab.h) on the tiny shared model:
// the race's event order and identical tokens, the work it counts, its
// argument checks, and the phases timeline.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/models.h"
#include "server/lab.h"
#include "server/openai_api.h"

namespace kvlab {
namespace {

using nlohmann::json;

const server::LabLimits kLimits{512, 2, tensor::DType::F16};

// The JSON payloads of an SSE text ("data: ...\n\n" events), [DONE] as a string.
std::vector<json> payloads(const std::string& sse) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = sse.find("data: ", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    const std::string data = sse.substr(at + 6, end - at - 6);
    out.push_back(data == "[DONE]" ? json(data) : json::parse(data));
    at = end;
  }
  return out;
}

TEST(ServerLab, RaceAlternatesModesWithIdenticalTokens) {
  const test::LoadedModel& lm = test::load_model(test::kStories);
  const int n = 5;
  server::Race race(*lm.model, *lm.tok, server::parse_race("Once upon a time", std::to_string(n), *lm.tok, kLimits),
                    kLimits);
  std::vector<json> events;
  while (!race.done()) {
    const std::vector<json> got = payloads(race.next());
    ASSERT_FALSE(got.empty());
    events.insert(events.end(), got.begin(), got.end());
  }
  ASSERT_EQ(events.size(), size_t(2 * n + 3));  // the prompt, tokens, summary, [DONE]
  EXPECT_EQ(events.back(), "[DONE]");
  const json& summary = events[2 * n + 1];
  EXPECT_EQ(summary["type"], "summary");
  EXPECT_TRUE(summary["identical"].get<bool>());
  const int prompt = summary["prompt_tokens"].get<int>();
  EXPECT_EQ(events[0]["type"], "prompt");
  EXPECT_EQ(events[0]["tokens"].size(), size_t(prompt));
  std::string text;
  for (int i = 0; i < 2 * n; ++i) {
    const json& e = events[size_t(i + 1)];
    EXPECT_EQ(e["mode"], i % 2 ? "no_cache" : "cached");
    EXPECT_EQ(e["index"], i / 2);
    EXPECT_EQ(e["position"], prompt + i / 2);
    EXPECT_GT(e["latency_ms"].get<double>(), 0);
    if (i % 2) EXPECT_EQ(e["token"], events[size_t(i)]["token"]);
    else text += e["token_text"].get<std::string>();
  }
  EXPECT_EQ(summary["text"], text);
  EXPECT_EQ(race.next(), "");  // finished: nothing more to send
}

// What the engine ran for each token, as the race reports it: with the cache
// the prefill's triangle and then one row per step, each row attending to
// every position up to its own (the tiny model has no sliding window);
// without it, every step reruns all rows.
TEST(ServerLab, RaceCountsTheWorkTheEngineRan) {
  const test::LoadedModel& lm = test::load_model(test::kStories);
  const model::Config& c = lm.model->config();
  server::Race race(*lm.model, *lm.tok, server::parse_race("Once upon a time", "4", *lm.tok, kLimits), kLimits);
  auto triangle = [](double rows_from, double rows_to) {  // sum of r + 1 over rows [from, to)
    return (rows_to * (rows_to + 1) - rows_from * (rows_from + 1)) / 2;
  };
  while (!race.done())
    for (const json& e : payloads(race.next())) {
      if (!e.is_object() || e["type"] != "token") continue;
      const json& w = e["work"];
      const int end = e["position"].get<int>(), first = w["first_row"].get<int>();
      const bool one_row = e["mode"] == "cached" && e["index"].get<int>() > 0;
      EXPECT_EQ(first, one_row ? end - 1 : 0) << e.dump();
      EXPECT_EQ(w["rows"].get<int>(), end - first) << e.dump();
      EXPECT_DOUBLE_EQ(w["attended"].get<double>(), triangle(first, end)) << e.dump();
      const double counted = triangle(first, end) * c.n_layer * c.n_head_kv;
      EXPECT_DOUBLE_EQ(w["attention_flops"].get<double>(), counted * c.gqa_group() * 4.0 * c.head_dim);
      EXPECT_GT(w["kv_bytes"].get<double>(), 0);
      EXPECT_GT(w["weight_bytes"].get<double>(), 0);
    }
}

server::ApiError race_error(const std::optional<std::string>& prompt, const std::optional<std::string>& n) {
  const test::LoadedModel& lm = test::load_model(test::kStories);
  try {
    server::parse_race(prompt, n, *lm.tok, kLimits);
  } catch (const server::ApiException& e) {
    return e.err;
  }
  return server::ApiError{0, "", "", "", ""};
}

TEST(ServerLab, RaceArgumentErrors) {
  EXPECT_EQ(race_error(std::nullopt, "4").code, "missing_required_parameter");
  EXPECT_EQ(race_error("", "4").param, "prompt");
  for (const char* n : {"", "x", "2.5", "3 ", "0x10"}) {
    const server::ApiError e = race_error("hi", n);
    EXPECT_EQ(e.status, 400) << n;
    EXPECT_EQ(e.code, "invalid_type") << n;
  }
  for (const char* n : {"0", "-1", "257"}) EXPECT_EQ(race_error("hi", n).code, "invalid_value") << n;
  EXPECT_EQ(race_error(std::string(3000, 'a') + " b c d e f g h i j k", "256").code, "context_length_exceeded");
  EXPECT_EQ(race_error("hi", std::nullopt).status, 0);  // n defaults
  EXPECT_EQ(race_error("hi", "256").status, 0);
}

TEST(ServerLab, PhasesTimeline) {
  const test::LoadedModel& lm = test::load_model(test::kStories);
  const server::LabRequest req = server::parse_phases(R"({"prompt": "Once upon a time", "n": 6})", *lm.tok, kLimits);
  const json p = server::run_phases(*lm.model, *lm.tok, req, kLimits);
  const json& toks = p["tokens"];
  ASSERT_GE(toks.size(), 1u);
  ASSERT_LE(toks.size(), 6u);
  EXPECT_EQ(toks[0]["phase"], "prefill");
  EXPECT_EQ(toks[0]["start_ms"], 0.0);
  for (size_t i = 1; i < toks.size(); ++i) {
    EXPECT_EQ(toks[i]["phase"], "decode");
    EXPECT_EQ(toks[i]["start_ms"], toks[i - 1]["end_ms"]);
  }
  EXPECT_EQ(p["phases"][0]["phase"], "prefill");
  EXPECT_EQ(p["phases"][0]["tokens"].get<double>(), double(req.prompt.size()));
  EXPECT_EQ(p["phases"].size(), toks.size() > 1 ? 2u : 1u);
  EXPECT_TRUE(p["peaks"].is_object() || p["profile_message"].get<std::string>().find("kvlab probe") != std::string::npos);

  for (const char* body : {"[]", R"({"n": 3})", R"({"prompt": "x", "n": true})", R"({"prompt": "x", "no_kv_cache": 1})"}) {
    try {
      server::parse_phases(body, *lm.tok, kLimits);
      ADD_FAILURE() << body;
    } catch (const server::ApiException& e) {
      EXPECT_EQ(e.err.status, 400) << body;
    }
  }
}

}  // namespace
}  // namespace kvlab
