// kvlab serve's scheduler and OpenAI request parsing on the default model.
// Continuous batching must not change results: each sequence's logits depend
// only on its own tokens (every matmul row and attention read is per token,
// see kv_cache_equivalence_test.cpp), so greedy streams decoded together, with
// chunked prefill and a queued request, equal single-sequence sessions exactly.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/arch_graft.h"
#include "common/log_softmax.h"
#include "common/scratch_dir.h"
#include "common/models.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/serving_engine.h"
#include "engine/session.h"
#include "grammar/json_grammar.h"
#include "grammar/matcher.h"
#include "kv/cache.h"
#include "sample/grammar_vocab.h"
#include "sample/sampler.h"
#include "server/choices.h"
#include "server/openai_api.h"
#include "server/metrics.h"
#include "server/tokenize_api.h"

namespace kvlab {
namespace {

using namespace std::chrono_literals;

std::string session_greedy(const model::Model& m, const tokenizer::Tokenizer& tok, const std::vector<int32_t>& prompt,
                           int n) {
  engine::SessionOptions o;
  o.n_ctx = 256;
  o.n_threads = 2;
  engine::Session s(m, o);
  std::span<const float> logits = s.prefill(prompt);
  tokenizer::StreamDecoder dec(tok);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const int32_t id = sample::argmax(logits);
    out += dec.push(id);
    if (i + 1 < n) logits = s.decode(id);
  }
  return out + dec.flush();
}

// A scheduler of n_seq sequences of n_ctx positions on 2 threads.
engine::SchedulerOptions pool_of(int n_seq, int n_ctx) {
  engine::SchedulerOptions so;
  so.n_seq = n_seq;
  so.n_ctx = n_ctx;
  so.n_threads = 2;
  return so;
}

// A greedy request for `prompt`, tokenized as the server does.
engine::GenRequest greedy(const test::LoadedModel& lm, const std::string& prompt) {
  engine::GenRequest r;
  r.prompt = lm.tok->encode(prompt, true, true);
  r.sampling.temperature = 0;
  return r;
}

// Four greedy requests on three slots (one waits) equal single-sequence
// sessions, whatever chunks `so` cuts their prompts into.
void expect_batched_greedy_equals_single(const engine::SchedulerOptions& so,
                                         const test::LoadedModel& lm = test::load_model(test::kDefaultModel)) {
  server::Metrics metrics;
  engine::ServingEngine sched(*lm.model, *lm.tok, so, metrics);

  const std::vector<std::string> prompts = {"The capital of France is", "Once upon a time, in a land far away,",
                                            "def fibonacci(n):", "1, 2, 3, 4,"};
  const int n_gen = 12;
  std::vector<std::shared_ptr<engine::Handle>> handles;
  std::vector<std::vector<int32_t>> ids;
  for (const auto& p : prompts) {
    engine::GenRequest r = greedy(lm, p);
    r.max_tokens = n_gen;
    r.ignore_eos = true;
    ids.push_back(r.prompt);
    handles.push_back(sched.submit(r));
    ASSERT_TRUE(handles.back());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const engine::Handle::Update u = handles[i]->wait_all();
    EXPECT_EQ(u.finish_reason, "length");
    EXPECT_EQ(u.text, session_greedy(*lm.model, *lm.tok, ids[i], n_gen)) << prompts[i];
    const engine::Timings t = handles[i]->timings();
    EXPECT_EQ(t.completion_tokens, n_gen);
    EXPECT_EQ(t.prompt_tokens, int(ids[i].size()));
  }
  const engine::Gauges g = sched.gauges();
  EXPECT_EQ(g.running, 0);
  EXPECT_EQ(g.waiting, 0);
  EXPECT_EQ(g.kv_blocks_used, 0);
}

TEST(ServerScheduler, BatchedGreedyEqualsSingleSequence) {
  engine::SchedulerOptions so = pool_of(3, 256);  // four requests: one waits for a slot
  so.prefill_chunk = 7;  // prompts are prefilled in several chunks, next to running decodes
  expect_batched_greedy_equals_single(so);
}

// A mixture of experts runs each expert once over the pass's tokens that
// picked it: a token's output must not depend on which others share the pass.
TEST(ServerScheduler, MixtureOfExpertsBatchedGreedyEqualsSingleSequence) {
  const test::ScratchDir dir;
  const std::string path = dir.file("stories260K-qwen3moe.gguf");
  test::qwen3moe_graft(gguf::File::open(test::kStories)).write(path);
  engine::SchedulerOptions so = pool_of(3, 256);
  so.prefill_chunk = 7;
  expect_batched_greedy_equals_single(so, test::load_model(path));
}

TEST(ServerScheduler, PassTargetChunksKeepGreedyOutput) {
  // A target no pass meets: chunks of kMinPrefillChunk next to decode rows,
  // of prefill_chunk without, as the measured times fall.
  engine::SchedulerOptions so = pool_of(3, 256);
  so.prefill_chunk = 24;
  so.pass_target_ms = 1e-3;
  expect_batched_greedy_equals_single(so);
}

// The Scheduler alone, its pass costs fed by hand: the requests' sequences
// are made, planned and advanced as ServingEngine does, with no model run.
struct PlannedPasses {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  sample::GrammarVocab vocab{*lm.tok};
  engine::SchedulerOptions so;
  kv::Cache cache;
  engine::Scheduler sched;
  explicit PlannedPasses(const engine::SchedulerOptions& o)
      : so(engine::checked(o)),
        cache(model::kv_shape(lm.model->config()), so.n_ctx, so.n_seq, so.kv_type, so.kv_blocks),
        sched(so, cache) {}
  void submit(int prompt_tokens, int max_tokens) {
    std::vector<engine::WaitingRequest> w(1);
    w[0].req.prompt.assign(size_t(prompt_tokens), 1000);
    w[0].req.max_tokens = max_tokens;
    w[0].handle = std::make_shared<engine::Handle>();
    ASSERT_TRUE(sched.enqueue(w));
    sched.admit([&](engine::WaitingRequest&& r, int slot, int reused) {
      return std::make_unique<engine::Sequence>(slot, std::move(r.req), r.handle, r.arrival, reused, *lm.tok, vocab);
    });
  }
  // Plans a pass, checks that every decoding sequence has its row, and
  // advances it as if each sampled row gave a token.
  engine::StepPlan pass() {
    engine::StepPlan plan = sched.schedule();
    int decoding = 0;
    for (const auto& s : sched.slots()) decoding += s && !s->prefilling;
    EXPECT_EQ(plan.decode_rows, decoding);
    sched.advance(plan);
    for (const engine::StepPlan::Rows& r : plan.rows) {
      if (!r.sample) continue;
      r.seq->prefilling = false;
      r.seq->tokens.push_back(1000);
    }
    return plan;
  }
};

TEST(ServerScheduler, PrefillChunkShrinksToTheMeasuredPassTarget) {
  engine::SchedulerOptions o = pool_of(9, 2304);
  o.prefill_chunk = 128;
  o.pass_target_ms = 40;
  PlannedPasses p(o);
  for (int i = 0; i < 8; ++i) p.submit(16, 1000);
  // No stream decodes yet: the eight prompts go at the full chunk.
  EXPECT_EQ(p.pass().prefill_tokens, 128);
  // Decode-only passes of 8 rows take 20 ms.
  for (int i = 0; i < 4; ++i) {
    const engine::StepPlan plan = p.pass();
    ASSERT_EQ(plan.decode_rows, 8);
    ASSERT_EQ(plan.prefill_tokens, 0);
    p.sched.observe(plan, 20);
  }
  // A 2000-token prompt arrives. Its first chunk is the smallest, which
  // measures a prompt token (1 ms); then 20 tokens fill the 40 ms.
  p.submit(2000, 10);
  engine::StepPlan plan = p.pass();
  EXPECT_EQ(plan.decode_rows, 8);
  EXPECT_EQ(plan.prefill_tokens, engine::kMinPrefillChunk);
  p.sched.observe(plan, 20 + plan.prefill_tokens * 1.0);
  for (int i = 0; i < 5; ++i) {
    plan = p.pass();
    EXPECT_EQ(plan.decode_rows, 8);
    EXPECT_EQ(plan.prefill_tokens, 20);
    p.sched.observe(plan, 20 + plan.prefill_tokens * 1.0);
  }
  // With the target off, the same state takes the fixed chunk.
  o.pass_target_ms = 0;
  EXPECT_EQ(engine::prefill_budget(engine::checked(o), p.sched.costs(), 8), 128);
}

TEST(ServerScheduler, StopStringsCancelAndQueueLimit) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  server::Metrics metrics;
  engine::SchedulerOptions so = pool_of(1, 128);
  so.max_queue = 1;
  engine::ServingEngine sched(*lm.model, *lm.tok, so, metrics);

  engine::GenRequest r = greedy(lm, "The capital of France is");
  r.max_tokens = 16;
  const std::string full = session_greedy(*lm.model, *lm.tok, r.prompt, 16);
  const size_t dot = full.find('.');
  ASSERT_NE(dot, std::string::npos) << full;
  r.stop = {"."};
  engine::Handle::Update u = sched.submit(r)->wait_all();
  EXPECT_EQ(u.finish_reason, "stop");
  EXPECT_EQ(u.text, full.substr(0, dot));

  // One running + one queued fill the server; a third is refused.
  r.stop.clear();
  r.ignore_eos = true;
  r.max_tokens = 100;
  auto a = sched.submit(r);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->next(10s));  // running
  EXPECT_FALSE(a->wait_all_for(1ms));  // 100 tokens are not done yet; the text stays pending
  auto b = sched.submit(r);
  ASSERT_TRUE(b);
  EXPECT_FALSE(sched.submit(r));
  a->cancel();
  b->cancel();
  const std::optional<engine::Handle::Update> ua = a->wait_all_for(10s);
  ASSERT_TRUE(ua);
  EXPECT_EQ(ua->finish_reason, "cancelled");
  EXPECT_EQ(b->wait_all().finish_reason, "cancelled");
  EXPECT_EQ(sched.gauges().running, 0);
  EXPECT_NE(metrics.render().find("kvlab_requests_total{finish_reason=\"cancelled\"} 2"), std::string::npos);
}

// Prefix caching: a request whose prompt starts with an earlier one's tokens
// maps that request's KV blocks, and still produces exactly the text of a cold
// single-sequence run (reused KV is bit-identical to recomputed KV).
TEST(ServerScheduler, PrefixCacheReusesBlocksWithIdenticalOutput) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  server::Metrics metrics;
  engine::SchedulerOptions so = pool_of(2, 256);
  so.prefill_chunk = 32;
  engine::ServingEngine sched(*lm.model, *lm.tok, so, metrics);

  const std::string system = "You are a careful assistant. Answer briefly, in plain words, and cite no sources. ";
  auto request = [&](const std::string& question) {
    engine::GenRequest r = greedy(lm, system + system + question);
    r.max_tokens = 8;
    r.ignore_eos = true;
    return r;
  };
  const engine::GenRequest first = request("What is the capital of France?");
  const engine::GenRequest second = request("Name a large animal.");
  ASSERT_GT(first.prompt.size(), 40u);
  size_t common = 0;
  while (first.prompt[common] == second.prompt[common]) ++common;

  const engine::Handle::Update cold = sched.submit(first)->wait_all();
  auto again = sched.submit(first);
  EXPECT_EQ(again->wait_all().text, cold.text);
  EXPECT_EQ(again->timings().cached_tokens, int((first.prompt.size() - 1) / 16 * 16));
  EXPECT_EQ(cold.text, session_greedy(*lm.model, *lm.tok, first.prompt, 8));

  auto other = sched.submit(second);
  EXPECT_EQ(other->wait_all().text, session_greedy(*lm.model, *lm.tok, second.prompt, 8));
  EXPECT_EQ(other->timings().cached_tokens, int(common / 16 * 16));
  EXPECT_GT(common / 16, 0u);

  const engine::Gauges g = sched.gauges();
  EXPECT_EQ(g.kv_blocks_used, 0);
  EXPECT_GT(g.kv_blocks_cached, 0);
  EXPECT_EQ(g.prefix_lookups, 3);
  EXPECT_EQ(g.prefix_hits, 2);
}

// A pool smaller than the slots' contexts: requests wait for blocks instead of
// failing, and every one completes with the single-sequence text.
TEST(ServerScheduler, BoundedKvPoolQueuesRequests) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  server::Metrics metrics;
  engine::SchedulerOptions so = pool_of(4, 64);
  so.kv_blocks = 6;  // room for two budgets of 3 blocks (about 45 tokens) at a time
  engine::ServingEngine sched(*lm.model, *lm.tok, so, metrics);
  engine::GenRequest r = greedy(lm, "Once upon a time");
  r.max_tokens = 40;
  r.ignore_eos = true;
  std::vector<std::shared_ptr<engine::Handle>> hs;
  for (int i = 0; i < 3; ++i) hs.push_back(sched.submit(r));
  const std::string want = session_greedy(*lm.model, *lm.tok, r.prompt, 40);
  for (auto& h : hs) EXPECT_EQ(h->wait_all().text, want);
  EXPECT_EQ(sched.gauges().kv_blocks_used, 0);
}

server::ApiError parse_error(server::Endpoint ep, const std::string& body) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  try {
    server::parse_request(ep, body, *lm.tok, {"m", 64});
  } catch (const server::ApiException& e) {
    return e.err;
  }
  server::ApiError none;
  none.status = 0;
  return none;
}

// A conversation the chat template refuses (its raise_exception) is the
// client's error: a 400 with the template's message.
TEST(ServerOpenAiApi, ChatTemplateRefusalIsA400) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  tokenizer::Vocab v = lm.tok->vocab();
  v.chat_template = "{% if messages | length > 1 %}{{ raise_exception('One message only') }}{% endif %}x";
  const auto tok = tokenizer::Tokenizer::create(v);
  const std::string body = R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]})";
  try {
    server::parse_request(server::Endpoint::Chat, body, *tok, {"m", 64});
    FAIL() << "the template's refusal was not an error";
  } catch (const server::ApiException& e) {
    EXPECT_EQ(e.err.status, 400);
    EXPECT_EQ(e.err.param, "messages");
    EXPECT_EQ(e.err.message, "chat template line 1: One message only");
  }
}

// logprobs: each generated token's log-probability is the log-softmax of the
// logits a single-sequence session gives at that step (the same logits,
// see above), its alternatives the most likely tokens in order, and the
// tokens' bytes put together are the text, each at its text_offset.
TEST(ServerScheduler, LogprobsAreTheModelsDistribution) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  server::Metrics metrics;
  engine::ServingEngine sched(*lm.model, *lm.tok, pool_of(2, 128), metrics);
  engine::GenRequest r = greedy(lm, "The capital of France is");
  r.max_tokens = 10;
  r.ignore_eos = true;
  r.logprobs = 3;
  const engine::Handle::Update u = sched.submit(r)->wait_all();
  ASSERT_EQ(u.logprobs.size(), 10u);

  engine::SessionOptions o;
  o.n_ctx = 128;
  o.n_threads = 2;
  engine::Session s(*lm.model, o);
  std::span<const float> logits = s.prefill(r.prompt);
  std::string joined;
  for (const server::TokenLogprobs& e : u.logprobs) {
    const int32_t id = sample::argmax(logits);
    EXPECT_EQ(e.id, id);
    EXPECT_NEAR(e.logprob, test::log_softmax_at(logits, id), 1e-9);
    ASSERT_EQ(e.top.size(), 3u);
    EXPECT_EQ(e.top[0].id, id);  // greedy: the pick is the most likely
    EXPECT_GE(e.top[0].logprob, e.top[1].logprob);
    EXPECT_GE(e.top[1].logprob, e.top[2].logprob);
    for (const auto& alt : e.top) EXPECT_NEAR(alt.logprob, test::log_softmax_at(logits, alt.id), 1e-9);
    EXPECT_EQ(e.bytes, lm.tok->piece(id));
    EXPECT_EQ(e.text_offset, joined.size());  // ASCII text here: characters are bytes
    joined += e.bytes;
    logits = s.decode(id);
  }
  EXPECT_EQ(joined, u.text);
}

// echo: the prompt's text comes first; with logprobs every prompt token has
// its log-probability given the ones before it (the first: none), equal to
// Session::score's, whether or not the prompt's blocks are in the prefix
// cache; max_tokens 0 scores the prompt and generates nothing.
TEST(ServerScheduler, EchoScoresThePrompt) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  server::Metrics metrics;
  engine::SchedulerOptions so = pool_of(2, 256);
  so.prefill_chunk = 16;  // the prompt's rows come from several chunks
  engine::ServingEngine sched(*lm.model, *lm.tok, so, metrics);
  const std::string text =
      "The quick brown fox jumps over the lazy dog. Then the dog, not at all lazy, chased the fox back into the "
      "woods, where the two of them sat down by the river and watched the sun go down behind the hills.";
  engine::GenRequest r = greedy(lm, text);
  ASSERT_GT(r.prompt.size(), 32u);  // two full blocks the prefix cache can hold
  r.max_tokens = 4;
  r.ignore_eos = true;
  const engine::Handle::Update plain = sched.submit(r)->wait_all();  // leaves the prompt's blocks cached

  engine::SessionOptions o;
  o.n_ctx = 256;
  o.n_threads = 2;
  engine::Session ref(*lm.model, o);
  const std::vector<double> scored = ref.score(r.prompt);  // log p(prompt[i + 1] | prompt[..i])

  r.echo = true;
  r.logprobs = 2;
  for (int max_tokens : {0, 4}) {
    r.max_tokens = max_tokens;
    auto h = sched.submit(r);
    const engine::Handle::Update u = h->wait_all();
    EXPECT_EQ(u.finish_reason, "length");
    EXPECT_EQ(h->timings().cached_tokens, 0);
    EXPECT_EQ(h->timings().completion_tokens, max_tokens);
    EXPECT_EQ(u.text, max_tokens == 0 ? text : text + plain.text);
    ASSERT_EQ(u.logprobs.size(), r.prompt.size() + size_t(max_tokens));
    EXPECT_TRUE(std::isnan(u.logprobs[0].logprob));
    EXPECT_TRUE(u.logprobs[0].top.empty());
    std::string joined;
    for (size_t i = 0; i < u.logprobs.size(); ++i) {
      const server::TokenLogprobs& e = u.logprobs[i];
      EXPECT_EQ(e.text_offset, joined.size()) << i;  // ASCII text: characters are bytes
      joined += e.bytes;
      if (i == 0 || i >= r.prompt.size()) continue;
      EXPECT_EQ(e.id, r.prompt[i]);
      EXPECT_NEAR(e.logprob, scored[i - 1], 1e-9) << i;
      ASSERT_EQ(e.top.size(), 2u);
      EXPECT_GE(e.top[0].logprob, e.logprob);
    }
    EXPECT_EQ(joined, u.text);
  }
  // Echo without logprobs may take the cached prefix.
  r.logprobs = -1;
  auto h = sched.submit(r);
  EXPECT_EQ(h->wait_all().text, text + plain.text);
  EXPECT_EQ(h->timings().cached_tokens, int(r.prompt.size() - 1) / 16 * 16);  // whole blocks before the last token
}

// Speculative decoding (--draft) keeps every token a sequence would sample
// without it: drafts are fed with the sampled token and kept only while each
// row samples the draft, from logits that are the same bits as a plain decode
// pass's, with one sampler call per token. So greedy and seeded sampled
// requests, logprobs, stop strings and max_tokens ending inside a draft all
// come out identical, batched with each other and with prompts still
// prefilling, and the prefix cache, keyed as kept drafts fill blocks, serves
// a second round of the same prompts with the same result.
TEST(ServerScheduler, SpeculativeDecodingKeepsEveryToken) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  // No newline at the end: the model then continues the code itself.
  const std::string code = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):";
  std::vector<engine::GenRequest> reqs;
  auto add = [&](const std::string& prompt, int max_tokens) -> engine::GenRequest& {
    reqs.push_back(greedy(lm, prompt));
    reqs.back().max_tokens = max_tokens;
    reqs.back().ignore_eos = true;
    return reqs.back();
  };
  add(code, 40).logprobs = 2;
  add("<li>apple</li>\n<li>banana</li>\n<li>cherry</li>\n<li>", 30);
  engine::GenRequest& sampled = add(code, 40);
  // Sampled from the whole distribution (no top-p or min-p cut, which leave
  // this model's confident code one candidate), with a frequency penalty,
  // whose count of each token sees the kept drafts.
  sampled.sampling.temperature = 0.7f;
  sampled.sampling.top_p = 1.0f;
  sampled.sampling.min_p = 0.0f;
  sampled.sampling.frequency_penalty = 0.1f;
  sampled.sampling.seed = 2;
  sampled.logprobs = 1;
  add("The cat sat on the mat. The cat sat on the mat. The cat", 7);  // drafts cut to the tokens still wanted
  add(code, 60).stop = {"/ b"};

  struct Out {
    engine::Handle::Update u;
    engine::Timings t;
  };
  auto run_all = [&](engine::ServingEngine& sched) {
    std::vector<std::shared_ptr<engine::Handle>> hs;
    for (const engine::GenRequest& r : reqs) {
      hs.push_back(sched.submit(r));
      EXPECT_TRUE(hs.back());
    }
    std::vector<Out> outs;
    for (auto& h : hs) {
      engine::Handle::Update u = h->wait_all();
      outs.push_back({std::move(u), h->timings()});
    }
    return outs;
  };
  engine::SchedulerOptions so = pool_of(3, 256);  // five requests: two wait for a slot
  so.prefill_chunk = 9;                            // prompts prefill next to running drafts
  server::Metrics plain_metrics;
  engine::ServingEngine plain(*lm.model, *lm.tok, so, plain_metrics);
  const std::vector<Out> want = run_all(plain);

  so.draft.max_tokens = 4;
  server::Metrics metrics;
  engine::ServingEngine spec(*lm.model, *lm.tok, so, metrics);
  int drafted = 0, kept = 0;
  for (int round = 0; round < 2; ++round) {
    const std::vector<Out> got = run_all(spec);
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i) + ", round " + std::to_string(round));
      EXPECT_EQ(got[i].u.finish_reason, want[i].u.finish_reason);
      EXPECT_EQ(got[i].u.text, want[i].u.text);
      EXPECT_EQ(got[i].t.completion_tokens, want[i].t.completion_tokens);
      ASSERT_EQ(got[i].u.logprobs.size(), want[i].u.logprobs.size());
      for (size_t j = 0; j < got[i].u.logprobs.size(); ++j) {
        const server::TokenLogprobs &a = got[i].u.logprobs[j], &b = want[i].u.logprobs[j];
        EXPECT_EQ(a.id, b.id);
        EXPECT_EQ(a.logprob, b.logprob);  // the same bits
        EXPECT_EQ(a.text_offset, b.text_offset);
        ASSERT_EQ(a.top.size(), b.top.size());
        for (size_t k = 0; k < a.top.size(); ++k) EXPECT_EQ(a.top[k].id, b.top[k].id);
      }
      EXPECT_LE(got[i].t.draft_accepted, got[i].t.drafted);
      drafted += got[i].t.drafted;
      kept += got[i].t.draft_accepted;
      EXPECT_EQ(want[i].t.drafted, 0);
    }
  }
  EXPECT_EQ(want[4].u.finish_reason, "stop") << want[4].u.text;  // the stop string cuts it
  // The repeating prompts were drafted for, and many drafts were kept.
  EXPECT_GT(kept, 40);
  EXPECT_GT(drafted, kept);
  const std::string m = metrics.render();
  EXPECT_NE(m.find("kvlab_spec_draft_tokens_total " + std::to_string(drafted)), std::string::npos);
  EXPECT_NE(m.find("kvlab_spec_accepted_tokens_total " + std::to_string(kept)), std::string::npos);
  EXPECT_GT(spec.gauges().prefix_hits, 0);
  EXPECT_EQ(spec.gauges().kv_blocks_used, 0);
}

// JSON mode's mask on the default model's vocabulary: at the start only
// tokens of whitespace and a '{' (and what may follow it) remain; inside a
// string nearly all do; no token without bytes (end of generation, control
// tokens) does until the object is whole.
TEST(JsonMode, MasksTheVocabularyToTheGrammar) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  const sample::GrammarVocab vocab(*lm.tok);
  const size_t V = size_t(lm.tok->n_vocab());
  std::vector<uint8_t> scratch;
  auto allowed_after = [&](const std::string& text) {
    grammar::Matcher p(grammar::json_object_grammar());
    EXPECT_TRUE(p.accept(text)) << text;
    std::vector<float> logits(V, 0.f);
    const int n = vocab.mask(p, logits, scratch);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < V; ++i)
      if (logits[i] == 0.f) ids.push_back(int32_t(i));
    EXPECT_EQ(int(ids.size()), n);
    for (int32_t id : ids) {  // each one really continues the text
      grammar::Matcher q = p;
      EXPECT_TRUE(q.accept(vocab.bytes(id))) << text << " + token " << id;
    }
    return ids;
  };
  const auto start = allowed_after("");
  EXPECT_GT(start.size(), 5u);
  EXPECT_LT(start.size(), V / 100);
  for (int32_t id : start) {  // whitespace, then nothing or the object's '{'
    const std::string_view b = vocab.bytes(id);
    const size_t first = b.find_first_not_of(" \t\n\r");
    EXPECT_TRUE(first == std::string_view::npos || b[first] == '{') << b;
  }
  const auto in_string = allowed_after("{\"na");
  EXPECT_GT(in_string.size(), V / 2);
  for (const auto* ids : {&start, &in_string})
    for (int32_t id : *ids) EXPECT_FALSE(lm.tok->is_end_of_generation(id));
  const auto after_key = allowed_after("{\"name\"");
  for (int32_t id : after_key) EXPECT_EQ(vocab.bytes(id).find_first_not_of(" \t\n\r"), vocab.bytes(id).find(':'));
  // Once the object is whole only the end of generation may follow (the
  // engine ends the reply there without drawing it).
  const auto whole = allowed_after("{}");
  EXPECT_FALSE(whole.empty());
  for (int32_t id : whole) EXPECT_TRUE(lm.tok->is_end_of_generation(id));
}

// JSON mode in the scheduler: greedy and sampled replies are each one JSON
// object that a strict parser reads, ending "stop" as the object closes;
// with speculative decoding the replies are the same.
TEST(ServerScheduler, JsonModeRepliesAreJsonObjects) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  const std::string capital =
      lm.tok->apply_chat({{"user", "What is the capital of France? Answer in JSON with the key \"answer\"."}});
  const std::string cat =
      lm.tok->apply_chat({{"user", "Describe a cat as JSON with the keys name, age and colors (a list)."}});
  std::vector<engine::GenRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    engine::GenRequest r;
    r.prompt = lm.tok->encode(i == 0 ? capital : cat, true, true);
    r.max_tokens = 160;
    r.grammar = grammar::json_object_grammar();
    r.sampling.temperature = i < 2 ? 0.f : 1.0f;  // greedy, then sampled with seeds 2 and 3
    r.sampling.frequency_penalty = i == 1 ? 1.0f : 0.f;  // greedy alone repeats a list item to the end
    r.sampling.seed = uint64_t(i);
    reqs.push_back(r);
  }
  auto run_all = [&](int draft) {
    server::Metrics metrics;
    engine::SchedulerOptions so = pool_of(4, 512);
    so.draft.max_tokens = draft;
    engine::ServingEngine sched(*lm.model, *lm.tok, so, metrics);
    std::vector<std::shared_ptr<engine::Handle>> hs;
    for (const auto& r : reqs) hs.push_back(sched.submit(r));
    std::vector<engine::Handle::Update> out;
    for (auto& h : hs) out.push_back(h->wait_all());
    return out;
  };
  const auto plain = run_all(0);
  int closed = 0;
  for (const auto& u : plain) {
    SCOPED_TRACE(u.text);
    ASSERT_TRUE(u.finish_reason == "stop" || u.finish_reason == "length");
    grammar::Matcher p(grammar::json_object_grammar());
    EXPECT_TRUE(p.accept(u.text));  // always the start of an object
    if (u.finish_reason != "stop") continue;
    ++closed;
    EXPECT_TRUE(p.complete());
    const nlohmann::json j = nlohmann::json::parse(u.text, nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_TRUE(j.is_object());
  }
  EXPECT_GE(closed, 3);
  EXPECT_EQ(plain[0].finish_reason, "stop");  // greedy closes its object
  const auto spec = run_all(4);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(spec[i].text, plain[i].text);
    EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason);
  }
}

TEST(ServerOpenAiApi, Errors) {
  using server::Endpoint;
  EXPECT_EQ(parse_error(Endpoint::Completions, "{oops").status, 400);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","model":"other"})").code, "model_not_found");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","model":"other"})").status, 404);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","max_tokens":65})").param, "max_tokens");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","max_tokens":"3"})").status, 400);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","top_p":0})").param, "top_p");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":["a","b"]})").param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","logprobs":21})").param, "logprobs");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","logprobs":"2"})").param, "logprobs");
  EXPECT_EQ(parse_error(Endpoint::Chat, R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})").param,
            "top_logprobs");
  const char* negative_top = R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":-1})";
  EXPECT_EQ(parse_error(Endpoint::Chat, negative_top).param, "top_logprobs");
  EXPECT_EQ(parse_error(Endpoint::Chat, R"({"messages":[{"role":"tool","content":"x"}]})").status, 400);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","n":0})").param, "n");
  EXPECT_EQ(parse_error(Endpoint::Chat, R"({"messages":[{"role":"user","content":"x"}],"echo":true})").param, "echo");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","max_tokens":0})").param, "max_tokens");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","max_tokens":0,"echo":true})").status, 0);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","echo":1})").param, "echo");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","n":17})").param, "n");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","n":"2"})").param, "n");
  std::string long_prompt = R"({"prompt":")";
  for (int i = 0; i < 100; ++i) long_prompt += "hello ";
  EXPECT_EQ(parse_error(Endpoint::Completions, long_prompt + "\"}").code, "context_length_exceeded");
  EXPECT_EQ(parse_error(Endpoint::Chat, R"({"model":"m","messages":[{"role":"user","content":"hi"}]})").status, 0);

  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  const server::ParsedRequest r = server::parse_request(
      Endpoint::Completions, R"({"prompt":"hi","max_tokens":5,"stop":"\n","seed":3,"temperature":0})", *lm.tok,
      {"m", 64});
  EXPECT_EQ(r.gen.max_tokens, 5);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.gen.sampling.seed, 3u);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(server::parse_request(Endpoint::Completions, R"({"prompt":"hi","n":16})", *lm.tok, {"m", 64}).n, 16);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.gen.logprobs, -1);
  auto logprobs_of = [&](Endpoint ep, const char* body) {
    return server::parse_request(ep, body, *lm.tok, {"m", 64}).gen.logprobs;
  };
  EXPECT_EQ(logprobs_of(Endpoint::Completions, R"({"prompt":"hi","logprobs":4})"), 4);
  EXPECT_EQ(logprobs_of(Endpoint::Completions, R"({"prompt":"hi","logprobs":false})"), -1);
  EXPECT_EQ(logprobs_of(Endpoint::Chat, R"({"messages":[{"role":"user","content":"hi"}],"logprobs":true})"), 0);
  const char* top5 = R"({"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":5})";
  EXPECT_EQ(logprobs_of(Endpoint::Chat, top5), 5);

  auto json_mode = [&](const char* format) {
    const std::string body = std::string(R"({"prompt":"hi","response_format":)") + format + "}";
    return server::parse_request(Endpoint::Completions, body, *lm.tok, {"m", 64}).gen.grammar != nullptr;
  };
  EXPECT_TRUE(json_mode(R"({"type":"json_object"})"));
  EXPECT_FALSE(json_mode(R"({"type":"text"})"));
  EXPECT_FALSE(json_mode("null"));
  EXPECT_TRUE(json_mode(R"({"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}})"));
  EXPECT_TRUE(server::parse_request(Endpoint::Completions, R"({"prompt":"hi","grammar":"root ::= \"a\""})", *lm.tok,
                                    {"m", 64}).gen.grammar);
  const char* unsatisfiable = R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"enum":[]}}}})";
  EXPECT_EQ(parse_error(Endpoint::Completions, unsatisfiable).param, "response_format.json_schema.schema");
  const char* strict = R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"a","strict":true,"schema":{"type":"integer","minimum":1}}}})";
  EXPECT_NE(parse_error(Endpoint::Completions, strict).message.find("'minimum'"), std::string::npos);
  const server::ApiError bad_grammar = parse_error(Endpoint::Completions, R"({"prompt":"x","grammar":"root ::= [a-"})");
  EXPECT_EQ(bad_grammar.param, "grammar");
  EXPECT_NE(bad_grammar.message.find("line 1, column 13"), std::string::npos);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","grammar":"root ::= \"a\"","response_format":{"type":"json_object"}})").param,
            "grammar");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","response_format":{"type":"xml"}})").code,
            "invalid_value");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","response_format":"json"})").param, "response_format");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","response_format":{}})").param, "response_format");
}

// OpenAI's n: choice i is the request sampled with seed + i, the same text
// as that request on its own; usage counts the prompt once. A request whose
// n choices do not all fit the queue takes none of it.
TEST(ServerChoices, EachChoiceIsTheRequestWithItsOwnSeed) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  server::Metrics metrics;
  engine::SchedulerOptions so = pool_of(2, 128);  // three choices: one waits for a slot
  so.max_queue = 1;
  engine::ServingEngine sched(*lm.model, *lm.tok, so, metrics);
  engine::GenRequest r = greedy(lm, "Once upon a time");
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 41;
  r.max_tokens = 12;
  r.ignore_eos = true;

  std::optional<server::Choices> cs = server::Choices::submit(sched, r, 3);
  ASSERT_TRUE(cs);
  ASSERT_EQ(cs->size(), 3);
  std::vector<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    const std::optional<engine::Handle::Update> u = cs->wait_for(i, 60s);
    ASSERT_TRUE(u);
    EXPECT_EQ(u->finish_reason, "length");
    texts.push_back(u->text);
  }
  EXPECT_TRUE(cs->all_done());
  EXPECT_TRUE(texts[0] != texts[1] || texts[1] != texts[2]) << texts[0];
  const engine::Timings t = cs->timings();
  EXPECT_EQ(t.prompt_tokens, int(r.prompt.size()));
  EXPECT_EQ(t.completion_tokens, 36);
  EXPECT_EQ(t.sequences, 3);
  for (int i = 0; i < 3; ++i) {
    engine::GenRequest one = r;
    one.sampling.seed = 41 + uint64_t(i);
    EXPECT_EQ(sched.submit(one)->wait_all().text, texts[size_t(i)]) << "choice " << i;
  }

  // Two slots and one queue place hold three choices, not four; the three
  // admitted for the attempt are withdrawn.
  EXPECT_FALSE(server::Choices::submit(sched, r, 4));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((sched.gauges().running > 0 || sched.gauges().waiting > 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(sched.gauges().running, 0);
  EXPECT_EQ(sched.gauges().waiting, 0);
  EXPECT_EQ(sched.gauges().kv_blocks_used, 0);

  // Streaming: every piece of news names its choice, and the pieces of
  // each choice join to its text.
  cs = server::Choices::submit(sched, r, 3);
  ASSERT_TRUE(cs);
  std::vector<std::string> streamed(3);
  while (!cs->all_done()) {
    auto news = cs->next(100ms);
    if (news) streamed[size_t(news->first)] += news->second.text;
  }
  EXPECT_EQ(streamed, texts);
}

// /tokenize and /detokenize (llama.cpp server's): the tokenizer's own ids,
// pieces as text or, where a piece is part of a character, as bytes, and
// back to the text; bad bodies are 400s naming the field.
TEST(ServerTokenizeApi, RoundTripsAndRejectsBadBodies) {
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  const std::string text = "Hello world, café 🙂🦩 <|im_start|>";
  const nlohmann::json ids = nlohmann::json::parse(server::tokenize_request(
      nlohmann::json{{"content", text}}.dump(), *lm.tok))["tokens"];
  EXPECT_EQ(ids.get<std::vector<int32_t>>(), lm.tok->encode(text, false, true));
  // The ChatML marker is one special token; without parse_special it is text.
  const auto im_start = lm.tok->encode("<|im_start|>", false, true);
  ASSERT_EQ(im_start.size(), 1u);
  EXPECT_EQ(ids.back(), im_start[0]);
  const auto plain = nlohmann::json::parse(server::tokenize_request(
      R"({"content": "<|im_start|>", "parse_special": false})", *lm.tok))["tokens"];
  EXPECT_GT(plain.size(), 1u);
  const nlohmann::json back = nlohmann::json::parse(
      server::detokenize_request(nlohmann::json{{"tokens", ids}}.dump(), *lm.tok));
  EXPECT_EQ(back["content"], text);
  // Pieces: strings that join to the text, or bytes (the flamingo's 4 bytes
  // are split over 3 tokens in this vocabulary; " 🙂" is one token).
  const nlohmann::json pieces = nlohmann::json::parse(server::tokenize_request(
      nlohmann::json{{"content", text}, {"with_pieces", true}}.dump(), *lm.tok))["tokens"];
  ASSERT_EQ(pieces.size(), ids.size());
  std::string joined;
  bool some_bytes = false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i]["id"], ids[i]);
    const nlohmann::json& p = pieces[i]["piece"];
    if (p.is_string()) {
      joined += p.get<std::string>();
    } else {
      some_bytes = true;
      for (int b : p.get<std::vector<int>>()) joined += char(b);
    }
  }
  EXPECT_EQ(joined, text);
  EXPECT_TRUE(some_bytes);
  auto error_of = [&](auto fn, const char* body) {
    try {
      fn(body, *lm.tok);
    } catch (const server::ApiException& e) {
      return e.err.param + ": " + e.err.message;
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(server::tokenize_request, R"({"text": "x"})"), "content: 'content' must be a string");
  EXPECT_EQ(error_of(server::tokenize_request, R"({"content": "x", "add_special": 1})"),
            "add_special: 'add_special' must be a boolean");
  EXPECT_EQ(error_of(server::detokenize_request, R"({"tokens": [1, "a"]})"), "tokens: 'tokens' must be an array of token ids");
  EXPECT_EQ(error_of(server::detokenize_request, R"({"tokens": [49152]})"),
            "tokens: token id 49152 is out of range (0..49151)");
  EXPECT_EQ(error_of(server::detokenize_request, "[1]"), ": the request body must be a JSON object");
}

// OpenAI's frequency_penalty, presence_penalty and logit_bias reach the
// sampler as given (-100 as a ban), and out-of-range values are 400s naming
// the parameter.
TEST(ServerOpenAiApi, PenaltiesAndLogitBias) {
  using server::Endpoint;
  const test::LoadedModel& lm = test::load_model(test::kDefaultModel);
  const server::ParsedRequest r = server::parse_request(
      Endpoint::Completions,
      R"({"prompt":"hi","frequency_penalty":0.5,"presence_penalty":-1,"repeat_last_n":16,)"
      R"("logit_bias":{"42":3.5,"7":-100}})",
      *lm.tok, {"m", 64});
  const sample::Params& sp = r.gen.sampling;
  EXPECT_EQ(sp.frequency_penalty, 0.5f);
  EXPECT_EQ(sp.presence_penalty, -1.f);
  EXPECT_EQ(sp.repeat_last_n, 16);
  ASSERT_EQ(sp.logit_bias.size(), 2u);
  std::map<int32_t, float> bias(sp.logit_bias.begin(), sp.logit_bias.end());
  EXPECT_EQ(bias[42], 3.5f);
  EXPECT_EQ(bias[7], -std::numeric_limits<float>::infinity());
  for (const char* body : {R"({"prompt":"x","frequency_penalty":2.5})", R"({"prompt":"x","frequency_penalty":"1"})"})
    EXPECT_EQ(parse_error(Endpoint::Completions, body).param, "frequency_penalty") << body;
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","presence_penalty":-3})").param, "presence_penalty");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","repeat_last_n":-1})").param, "repeat_last_n");
  for (const char* body : {R"({"prompt":"x","logit_bias":[1]})", R"({"prompt":"x","logit_bias":{"a":1}})",
                           R"({"prompt":"x","logit_bias":{"-1":1}})", R"({"prompt":"x","logit_bias":{"49152":1}})",
                           R"({"prompt":"x","logit_bias":{"5":101}})", R"({"prompt":"x","logit_bias":{"5":"1"}})"}) {
    const server::ApiError e = parse_error(Endpoint::Completions, body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "logit_bias") << body;
  }
  // A ban takes effect: the greedy pick of a prompt, banned, is not picked.
  server::Metrics metrics;
  engine::ServingEngine sched(*lm.model, *lm.tok, pool_of(1, 64), metrics);
  engine::GenRequest g = greedy(lm, "The capital of France is");
  g.max_tokens = 1;
  g.ignore_eos = true;
  g.logprobs = 0;  // for the ids
  const int32_t first = sched.submit(g)->wait_all().logprobs.at(0).id;
  g.sampling.logit_bias = {{first, -std::numeric_limits<float>::infinity()}};
  EXPECT_NE(sched.submit(g)->wait_all().logprobs.at(0).id, first);
}

}  // namespace
}  // namespace kvlab
