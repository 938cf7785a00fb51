#include "server/http_server.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "server/api_errors.h"
#include "server/choices.h"
#include "server/http/service.h"
#include "server/lab.h"
#include "server/openai_api.h"
#include "server/perf_api.h"
#include "server/sse.h"
#include "server/tokenize_api.h"
#include "server/web_files.h"

namespace kvlab::server {

using nlohmann::json;
using http::Reply;
using http::Request;
using http::Response;
using http::Runs;

namespace {

// The perf endpoints also throw kvlab::Error for a value out of range.
void perf_reply(std::string (*fn)(const std::string&), const Request& req, Response& res) {
  try {
    json_reply(res, [&] { return fn(req.body); });
  } catch (const Error& e) {
    send_error(res, 400, e.what(), "invalid_request_error", "invalid_value");
  }
}

json model_object(const std::string& model_id) {
  return {{"id", model_id}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "kvlab"}};
}

// Whether `given` is `key`, in a time that does not tell how much of a guess
// was right.
bool same_secret(std::string_view given, std::string_view key) {
  unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

// "Authorization: Bearer KEY", the scheme in any case (RFC 9110, 11.1).
bool bearer_matches(const std::optional<std::string>& header, const std::string& key) {
  constexpr std::string_view kScheme = "bearer ";
  if (!header || header->size() < kScheme.size() || !http::iequals(header->substr(0, kScheme.size()), kScheme))
    return false;
  std::string_view token(*header);
  token.remove_prefix(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  return same_secret(token, key);
}

// Choice i's whole answer; nullopt (and the choices cancelled) when the client
// goes first: the scheduler then frees the slots and KV blocks at its next step.
std::optional<Handle::Update> await_choice(Choices& cs, int i, const Reply& reply) {
  std::optional<Handle::Update> u;
  while (!(u = cs.wait_for(i, std::chrono::milliseconds(100)))) {
    if (reply.client_gone()) {
      cs.cancel();
      return std::nullopt;
    }
  }
  return u;
}

// A non-streaming completion. Nothing is written until it is done; the HTTP
// layer tells meanwhile whether the client has gone (Reply::client_gone).
void reply_when_done(Reply& reply, const ParsedRequest& pr, Choices& cs, const std::string& id, int64_t created) {
  std::vector<Choice> done;
  for (int i = 0; i < cs.size(); ++i) {
    std::optional<Handle::Update> u = await_choice(cs, i, reply);
    if (!u) return;
    if (u->finish_reason == "error") {
      cs.cancel();
      send_error(reply.res, 500, u->error, "server_error", "generation_failed");
      return;
    }
    done.push_back({std::move(u->text), u->finish_reason, std::move(u->logprobs)});
  }
  reply.res.set_content(dump(completion_response(pr, id, created, done, cs.timings())), "application/json");
}

// The right to run a live measurement, held from construction (when free)
// to release() or destruction. A race releases it before its last event:
// its client may ask again as soon as it has read it.
class LabLease {
 public:
  explicit LabLease(std::atomic<bool>& busy) : busy_(busy), held_(!busy.exchange(true)) {}
  ~LabLease() { release(); }
  LabLease(const LabLease&) = delete;
  LabLease& operator=(const LabLease&) = delete;
  bool held() const { return held_; }
  void release() {
    if (held_) busy_.store(false);
    held_ = false;
  }

 private:
  std::atomic<bool>& busy_;
  bool held_;
};

void refuse_lab_busy(Response& res) {
  res.set_header("Retry-After", "5");
  send_error(res, 503, "another race or phases run is measuring; retry when it ends", "server_error", "server_busy");
}

LabLimits lab_limits(const engine::SchedulerOptions& s) { return LabLimits{s.n_ctx, s.n_threads, s.kv_type}; }

http::Limits with_workers(http::Limits l, const engine::SchedulerOptions& s) {
  if (l.workers <= 0) l.workers = s.n_seq + s.max_queue + 4;
  return l;
}

}  // namespace

HttpServer::HttpServer(ServerOptions opt) : opt_(std::move(opt)) {
  metrics_.set_model_name(opt_.model_id);
  metrics_.set_gauge_source([this] {
    if (!ready_) return engine::Gauges{};
    return sched_->gauges();
  });
  routes();
  service_ = std::make_unique<http::Service>(with_workers(opt_.http, opt_.sched), router_, &error_page);
}

HttpServer::~HttpServer() {
  stop();
  service_.reset();
  sched_.reset();
}

int HttpServer::bind() {
  service_->bind(opt_.host, opt_.port);
  return opt_.port;
}

void HttpServer::listen() { service_->run(); }
void HttpServer::wait_until_listening() const {
  while (!service_->running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
void HttpServer::stop() {
  // Ends running streams first, so that the handlers can finish.
  if (ready_) sched_->shutdown();
  service_->stop();
}

void HttpServer::set_model(const model::Model& model, const tokenizer::Tokenizer& tok, int n_ctx) {
  opt_.sched.n_ctx = n_ctx;
  model_ = &model;
  tok_ = &tok;
  sched_ = std::make_unique<engine::ServingEngine>(model, tok, opt_.sched, metrics_);
  ready_ = true;
}

void HttpServer::routes() {
  status_routes();
  openai_routes();
  perf_routes();
  tokenize_routes();
  lab_routes();
  web_routes();
}

bool HttpServer::authorized(const Request& req, Response& res) const {
  if (opt_.api_key.empty()) return true;
  const std::optional<std::string> header = req.header("Authorization");
  if (bearer_matches(header, opt_.api_key)) return true;
  send_error(res, 401, header ? "Incorrect API key provided" : "Missing API key", "invalid_request_error",
             "invalid_api_key");
  return false;
}

bool HttpServer::model_ready(Response& res) const {
  if (ready_) return true;
  res.set_header("Retry-After", "1");
  send_error(res, 503, "the model is still loading", "server_error", "model_loading");
  return false;
}

// --- /health, /metrics, /v1/models ---

void HttpServer::status_routes() {
  router_.add("GET", "/health", Runs::OnIoThread, [this](const Request&, Reply& r) { health(r.res); });
  router_.add("GET", "/metrics", Runs::OnIoThread, [this](const Request&, Reply& r) {
    r.res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  router_.add("GET", "/v1/models", Runs::OnIoThread,
              [this](const Request& req, Reply& r) { list_models(req, r.res); });
  router_.add_pattern("GET", "/v1/models/(.+)", Runs::OnIoThread,
                      [this](const Request& req, Reply& r) { describe_model(req, r.res); });
}

void HttpServer::health(Response& res) const {
  if (!ready_) {
    res.status = 503;
    res.set_content(R"({"status":"loading model"})", "application/json");
    return;
  }
  res.set_content(R"({"status":"ok"})", "application/json");
}

void HttpServer::list_models(const Request& req, Response& res) const {
  if (!authorized(req, res)) return;
  json m = model_object(opt_.model_id);
  if (ready_) m["meta"] = {{"n_ctx", opt_.sched.n_ctx}, {"n_params", model_->n_params()}, {"slots", opt_.sched.n_seq}};
  res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
}

void HttpServer::describe_model(const Request& req, Response& res) const {
  if (!authorized(req, res)) return;
  const std::string& name = req.captures[0];
  if (!model_matches(name, opt_.model_id)) {
    send_error(res, 404, "The model '" + name + "' does not exist", "invalid_request_error", "model_not_found", "model");
    return;
  }
  res.set_content(dump(model_object(opt_.model_id)), "application/json");
}

// --- the OpenAI completions ---

void HttpServer::openai_routes() {
  for (auto [path, ep] : {std::pair{"/v1/completions", Endpoint::Completions},
                          std::pair{"/v1/chat/completions", Endpoint::Chat},
                          std::pair{"/completions", Endpoint::Completions},
                          std::pair{"/chat/completions", Endpoint::Chat}})
    router_.add("POST", path, Runs::OnWorker, [this, ep = ep](const Request& req, Reply& r) { complete(ep, req, r); });
}

void HttpServer::complete(Endpoint ep, const Request& req, Reply& reply) {
  Response& res = reply.res;
  if (!authorized(req, res) || !model_ready(res)) return;
  std::optional<ParsedRequest> pr =
      parsed(res, [&] { return parse_request(ep, req.body, *tok_, ApiLimits{opt_.model_id, opt_.sched.n_ctx}); });
  if (!pr) return;
  const int admissible = opt_.sched.n_seq + opt_.sched.max_queue;
  if (pr->n > admissible)
    return send_error(res, 400,
                      "n is " + std::to_string(pr->n) + " but this server admits at most " +
                          std::to_string(admissible) + " sequences at once (" + std::to_string(opt_.sched.n_seq) +
                          " slots + a queue of " + std::to_string(opt_.sched.max_queue) + ")",
                      "invalid_request_error", "invalid_value", "n");
  std::optional<Choices> choices = Choices::submit(*sched_, pr->gen, pr->n);
  if (!choices) {
    metrics_.request_rejected();
    res.set_header("Retry-After", "1");
    send_error(res, 503, "all slots are busy and the queue is full; retry later", "server_error", "server_busy");
    return;
  }
  const std::string id = new_id(ep);
  const int64_t created = unix_now();
  if (pr->stream)
    SseStream(std::move(*pr), std::move(*choices), id, created).run(reply);
  else
    reply_when_done(reply, *pr, *choices, id, created);
}

// --- /api/simulate, /api/diagnose, /api/catalog (server/perf_api.h) ---

void HttpServer::perf_routes() {
  for (auto [path, fn] : {std::pair{"/api/simulate", &simulate_request}, std::pair{"/api/diagnose", &diagnose_request}})
    router_.add("POST", path, Runs::OnWorker, [this, fn = fn](const Request& req, Reply& r) {
      if (authorized(req, r.res)) perf_reply(fn, req, r.res);
    });
  router_.add("GET", "/api/catalog", Runs::OnWorker, [this](const Request& req, Reply& r) {
    if (authorized(req, r.res)) r.res.set_content(catalog_response(), "application/json");
  });
}

// --- llama.cpp server's /tokenize and /detokenize (server/tokenize_api.h) ---

void HttpServer::tokenize_routes() {
  using TokenizerFn = std::string (*)(const std::string&, const tokenizer::Tokenizer&);
  for (auto [path, fn] : {std::pair<const char*, TokenizerFn>{"/tokenize", &tokenize_request},
                          std::pair<const char*, TokenizerFn>{"/detokenize", &detokenize_request}})
    router_.add("POST", path, Runs::OnWorker, [this, fn = fn](const Request& req, Reply& r) {
      if (authorized(req, r.res) && model_ready(r.res)) json_reply(r.res, [&] { return fn(req.body, *tok_); });
    });
}

// --- the live measurements /api/race and /api/phases (server/lab.h) ---

void HttpServer::lab_routes() {
  router_.add("GET", "/api/race", Runs::OnWorker, [this](const Request& req, Reply& r) { race(req, r); });
  router_.add("POST", "/api/phases", Runs::OnWorker, [this](const Request& req, Reply& r) { phases(req, r.res); });
}

void HttpServer::race(const Request& req, Reply& reply) {
  Response& res = reply.res;
  if (!authorized(req, res) || !model_ready(res)) return;
  std::optional<LabRequest> lr =
      parsed(res, [&] { return parse_race(req.param("prompt"), req.param("n"), *tok_, lab_limits(opt_.sched)); });
  if (!lr) return;
  LabLease lease(lab_busy_);
  if (!lease.held()) return refuse_lab_busy(res);
  Race race(*model_, *tok_, std::move(*lr), lab_limits(opt_.sched));
  sse::open(reply);
  // One token per event, so a client that has gone (a failed write) stops
  // the race after at most the step in progress.
  while (!race.done()) {
    const std::string event = race.next();
    if (race.done()) lease.release();  // the measurement is over; only the write is left
    if (!reply.write(event)) return;
  }
}

void HttpServer::phases(const Request& req, Response& res) {
  if (!authorized(req, res) || !model_ready(res)) return;
  std::optional<LabRequest> lr = parsed(res, [&] { return parse_phases(req.body, *tok_, lab_limits(opt_.sched)); });
  if (!lr) return;
  const LabLease lease(lab_busy_);
  if (!lease.held()) return refuse_lab_busy(res);
  res.set_content(dump(run_phases(*model_, *tok_, *lr, lab_limits(opt_.sched))), "application/json");
}

// --- the web page ---

// The page itself needs no API key (a browser cannot send one when it
// navigates); it asks for the key and sends it with its API calls.
void HttpServer::web_routes() {
  router_.add("GET", "/", Runs::OnIoThread, [](const Request&, Reply& r) { serve_asset("index.html", r.res); });
  // Before the pattern below, which matches this path too.
  router_.add("GET", "/static/chart.js", Runs::OnIoThread, [](const Request&, Reply& r) { serve_chart_js(r.res); });
  // Names only: the pattern admits no '/', and only embedded files are served.
  router_.add_pattern("GET", R"(/static/([A-Za-z0-9_-]+\.[a-z]+))", Runs::OnIoThread,
                      [](const Request& req, Reply& r) { serve_asset(req.captures[0], r.res); });
}

}  // namespace kvlab::server
