#include "server/lab.h"

#include <charconv>
#include <numeric>

#include "engine/generate.h"
#include "lab/bench/attribution.h"
#include "lab/hardware/roofline.h"
#include "sample/sampler.h"
#include "server/openai_api.h"
#include "server/sse.h"

namespace kvlab::server {

using nlohmann::json;

namespace {

// The checks both endpoints share. The message goes through the chat template,
// as in `kvlab demo`, because the default model is an instruct model.
LabRequest make_request(const std::string& message, int64_t n, const tokenizer::Tokenizer& tok,
                        const LabLimits& limits) {
  if (message.empty()) fail("'prompt' must not be empty", "prompt", "invalid_value");
  if (n < 1 || n > kLabMaxTokens)
    fail("'n' must be between 1 and " + std::to_string(kLabMaxTokens) + ", got " + std::to_string(n), "n",
         "invalid_value");
  LabRequest r;
  r.prompt = tok.encode(tok.apply_chat({{"user", message}}), true, true);
  r.n = int(n);
  if (int64_t(r.prompt.size()) + n > limits.n_ctx)
    fail("the prompt (" + std::to_string(r.prompt.size()) + " tokens in the chat template) plus n (" +
             std::to_string(n) + ") exceeds the context size " + std::to_string(limits.n_ctx),
         "prompt", "context_length_exceeded");
  return r;
}

engine::SessionOptions session_options(const LabRequest& r, const LabLimits& limits, bool kv_cache) {
  engine::SessionOptions o;
  o.n_ctx = int(r.prompt.size()) + r.n;  // just what this run needs, not the server's context
  o.n_threads = limits.n_threads;
  o.kv_cache = kv_cache;
  o.kv_type = limits.kv_type;
  return o;
}

json mode_summary(const std::vector<double>& latency_s) {
  const double total = std::accumulate(latency_s.begin(), latency_s.end(), 0.0);
  const double decode = total - latency_s.front();  // the first token's time is the prefill (TTFT)
  const size_t n = latency_s.size();
  return {{"ttft_ms", latency_s.front() * 1e3},
          {"decode_tok_s", n > 1 && decode > 0 ? json(double(n - 1) / decode) : json(nullptr)},
          {"tok_s", total > 0 ? json(double(n) / total) : json(nullptr)},
          {"total_ms", total * 1e3}};
}

json phase_json(const char* name, const engine::PhaseWork& w, const std::optional<perf::Verdict>& v) {
  json j = {{"phase", name},
            {"passes", w.passes},
            {"tokens", w.tokens},
            {"ms", w.seconds * 1e3},
            {"flops", w.flops},
            {"bytes", w.bytes()},
            {"achieved_flops", w.seconds > 0 ? w.flops / w.seconds : 0.0},
            {"achieved_bytes_per_s", w.seconds > 0 ? w.bytes() / w.seconds : 0.0},
            {"intensity", w.bytes() > 0 ? w.flops / w.bytes() : 0.0},
            {"verdict", nullptr}};
  if (v)
    j["verdict"] = {{"bound", perf::bound_name(v->bound)},
                    {"ridge", v->ridge},
                    {"flops_utilization", v->flops_utilization},
                    {"bw_utilization", v->bw_utilization},
                    {"roof_fraction", v->roof_fraction}};
  return j;
}

json phases_json(const engine::Attribution& a) {
  json phases = json::array();
  if (a.prefill.passes) phases.push_back(phase_json("prefill", a.prefill, a.prefill_verdict));
  if (a.decode.passes) phases.push_back(phase_json("decode", a.decode, a.decode_verdict));
  return phases;
}

json peaks_json(const engine::Attribution& a) {
  if (!a.peaks) return nullptr;
  return {{"flops", a.peaks->flops},
          {"flops_kind", a.peaks->flops_kind},
          {"bytes_per_s", a.peaks->bytes_per_s},
          {"ridge", a.peaks->bytes_per_s > 0 ? a.peaks->flops / a.peaks->bytes_per_s : 0.0},
          {"source", a.peaks->source}};
}

// A missing or unreadable profile leaves the verdicts out and says why in
// `message`; the timeline is still worth showing.
std::optional<perf::HwProfile> load_profile(std::string& message) {
  try {
    std::optional<perf::HwProfile> profile = engine::try_load_profile();
    if (!profile)
      message = "No hardware profile on the server yet: run `kvlab probe` (about 10 s) there to put this "
                "run against the machine's measured peaks.";
    return profile;
  } catch (const std::exception& e) {
    message = std::string("The hardware profile could not be read (") + e.what() + "): run `kvlab probe` again.";
    return std::nullopt;
  }
}

}  // namespace

LabRequest parse_race(const std::optional<std::string>& prompt, const std::optional<std::string>& n,
                      const tokenizer::Tokenizer& tok, const LabLimits& limits) {
  if (!prompt) fail("'prompt' is required", "prompt", "missing_required_parameter");
  int64_t count = LabRequest{}.n;
  if (n) {
    const char* end = n->data() + n->size();
    const auto [p, ec] = std::from_chars(n->data(), end, count);
    if (n->empty() || ec != std::errc() || p != end) fail("'n' must be an integer, got '" + *n + "'", "n", "invalid_type");
  }
  return make_request(*prompt, count, tok, limits);
}

LabRequest parse_phases(const std::string& body, const tokenizer::Tokenizer& tok, const LabLimits& limits) {
  const json j = parse_body(body);
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) fail("'prompt' is required", "prompt", "missing_required_parameter");
  if (!it->is_string()) fail("'prompt' must be a string", "prompt", "invalid_type");
  const std::string message = it->get<std::string>();
  int64_t n = LabRequest{}.n;
  if (auto f = j.find("n"); f != j.end() && !f->is_null()) {
    if (!f->is_number_integer()) fail("'n' must be an integer", "n", "invalid_type");
    n = f->get<int64_t>();
  }
  LabRequest r = make_request(message, n, tok, limits);
  r.kv_cache = !boolean(j, "no_kv_cache").value_or(false);
  return r;
}

Race::Race(const model::Model& m, const tokenizer::Tokenizer& tok, LabRequest req, const LabLimits& limits)
    : model_(m),
      tok_(tok),
      req_(std::move(req)),
      cached_{"cached", engine::Session(m, session_options(req_, limits, true)), engine::OutputProcessor(tok, {}, false), {}, {}, {}},
      naive_{"no_cache", engine::Session(m, session_options(req_, limits, false)), engine::OutputProcessor(tok, {}, false), {}, {}, {}} {
  cached_.session.count_attended(&cached_.attended);
  naive_.session.count_attended(&naive_.attended);
}

std::string Race::prompt_event() const {
  json pieces = json::array();
  for (const int32_t id : req_.prompt) pieces.push_back(tok_.piece(id, true));
  return sse::event(dump(json{{"type", "prompt"}, {"tokens", pieces}, {"n", req_.n}}));
}

// What the engine ran for one token: the passes the session traced since
// `first_pass` and the attention positions the model counted since
// `attended_before`. Per counted (token, KV head, layer, position): each of
// the G query heads of the group takes a head_dim dot product with K and
// adds head_dim products of V (2 FLOPs per multiply-add, lab/cost/cost.h),
// and the kernel reads one K and one V row of head_dim elements. The
// softmax's few FLOPs per score are left out.
json Race::work_since(const Mode& m, size_t first_pass, uint64_t attended_before) const {
  const model::Config& c = model_.config();
  const std::vector<engine::Step>& passes = m.session.trace().steps;
  const double elem_bytes = m.session.cache().elem_bytes();
  int rows = 0;
  double weight_bytes = 0;
  for (size_t p = first_pass; p < passes.size(); ++p) {
    rows += passes[p].n_tokens;
    weight_bytes += engine::pass_work(model_, passes[p].n_tokens, passes[p].n_past, elem_bytes).weight_bytes;
  }
  const double attended = double(m.attended - attended_before), hd = c.head_dim;
  return {{"rows", rows},
          {"first_row", first_pass < passes.size() ? passes[first_pass].n_past : 0},
          {"attended", attended / (double(c.n_layer) * c.n_head_kv)},
          {"attention_flops", attended * c.gqa_group() * 4.0 * hd},
          {"kv_bytes", attended * 2.0 * hd * elem_bytes},
          {"weight_bytes", weight_bytes}};
}

std::string Race::step(Mode& m) {
  const size_t i = m.tokens.size();
  const size_t first_pass = m.session.trace().steps.size();
  const uint64_t attended_before = m.attended;
  const auto t0 = engine::Clock::now();
  const std::span<const float> logits = i == 0 ? m.session.prefill(req_.prompt) : m.session.decode(m.tokens.back());
  const int32_t id = sample::argmax(logits);
  const double dt = engine::seconds_since(t0);
  m.tokens.push_back(id);
  m.latency_s.push_back(dt);
  m.output.append(id);
  const bool last = int(m.tokens.size()) == req_.n;
  if (last) m.output.flush();
  const std::string piece = m.output.release(last).text;
  m.text += piece;
  return sse::event(dump(json{{"type", "token"},
                              {"mode", m.name},
                              {"index", i},
                              {"position", req_.prompt.size() + i},
                              {"token", id},
                              {"token_text", piece},
                              {"latency_ms", dt * 1e3},
                              {"work", work_since(m, first_pass, attended_before)}}));
}

std::string Race::summary() const {
  const json c = mode_summary(cached_.latency_s), u = mode_summary(naive_.latency_s);
  const double cached_decode = c["total_ms"].get<double>() - c["ttft_ms"].get<double>();
  const double naive_decode = u["total_ms"].get<double>() - u["ttft_ms"].get<double>();
  return dump(json{{"type", "summary"},
                   {"prompt_tokens", req_.prompt.size()},
                   {"n", req_.n},
                   {"identical", cached_.tokens == naive_.tokens},
                   {"text", cached_.text},
                   {"cached", c},
                   {"no_cache", u},
                   {"decode_speedup", cached_decode > 0 ? json(naive_decode / cached_decode) : json(nullptr)}});
}

std::string Race::next() {
  if (done_) return {};
  if (!prompt_sent_) {
    prompt_sent_ = true;
    return prompt_event();
  }
  try {
    if (int(naive_.tokens.size()) < req_.n)
      return step(cached_.tokens.size() == naive_.tokens.size() ? cached_ : naive_);
    done_ = true;
    return sse::event(summary()) + sse::done();
  } catch (const std::exception& e) {
    done_ = true;
    return sse::event(dump(ApiError{500, e.what(), "server_error", "", "generation_failed"}.body())) + sse::done();
  }
}

json run_phases(const model::Model& m, const tokenizer::Tokenizer& tok, const LabRequest& req, const LabLimits& limits) {
  engine::Session session(m, session_options(req, limits, req.kv_cache));
  engine::GenerateOptions g;
  g.n_predict = req.n;
  g.sampling.temperature = 0;
  engine::OutputProcessor output(tok, {}, false);
  auto text_of = [&output](int32_t id) {
    output.append(id);
    return output.release(false).text;
  };
  json tokens = json::array();
  double prev_ms = 0;
  const auto t0 = engine::Clock::now();
  const engine::GenerateResult r = engine::generate(
      session, req.prompt, g, [&tok](int32_t id) { return tok.is_end_of_generation(id); },
      [&](int32_t id) {
        const double now_ms = engine::seconds_since(t0) * 1e3;
        const size_t i = tokens.size();
        tokens.push_back({{"index", i},
                          {"position", req.prompt.size() + i},
                          {"phase", i == 0 ? "prefill" : "decode"},
                          {"text", text_of(id)},
                          {"start_ms", prev_ms},
                          {"end_ms", now_ms}});
        prev_ms = now_ms;
      });
  output.flush();
  if (!tokens.empty()) tokens.back()["text"] = tokens.back()["text"].get<std::string>() + output.release(true).text;

  std::string profile_message;
  const std::optional<perf::HwProfile> profile = load_profile(profile_message);
  const engine::Attribution a =
      engine::attribute(session.trace(), m, session.cache().elem_bytes(), session.options().n_threads, profile);
  json out = {{"prompt_tokens", r.prompt_tokens},
              {"kv_cache", req.kv_cache},
              {"threads", session.options().n_threads},
              {"stop", engine::stop_reason_name(r.stop)},
              {"ttft_ms", r.ttft_seconds * 1e3},
              {"prefill_tok_s", r.prefill_tok_s()},
              {"decode_tok_s", r.tokens.size() > 1 ? json(r.decode_tok_s()) : json(nullptr)},
              {"total_ms", prev_ms},
              {"text", tok.decode(r.tokens)},
              {"tokens", tokens},
              {"phases", phases_json(a)},
              {"peaks", peaks_json(a)}};
  if (!profile_message.empty()) out["profile_message"] = profile_message;
  return out;
}

}  // namespace kvlab::server
