#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "server/choices.h"
#include "server/lab.h"
#include "server/openai_api.h"
#include "server/perf_api.h"
#include "server/peer_watch.h"
#include "server/sse.h"
#include "server/tokenize_api.h"
#include "server/web_assets.h"

namespace kvlab::server {

using nlohmann::json;

namespace {

using Req = httplib::Request;
using Res = httplib::Response;

void send_error(Res& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.body()), "application/json");
}

void send_error(Res& res, int status, std::string message, std::string type, std::string code,
                std::string param = {}) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  e.param = std::move(param);
  send_error(res, e);
}

std::string status_message(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "request body too large";
    case 414: return "request URI too long";
    default: return "HTTP error " + std::to_string(status);
  }
}

// httplib's own errors (no route, body too large, ...) in the API's error shape.
httplib::Server::HandlerResponse error_page(const Req&, Res& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  const std::string type = res.status >= 500 ? "server_error" : "invalid_request_error";
  const std::string code = res.status == 413 ? "payload_too_large" : res.status == 404 ? "not_found" : "";
  send_error(res, res.status, status_message(res.status), type, code);
  return httplib::Server::HandlerResponse::Handled;
}

void exception_page(const Req&, Res& res, std::exception_ptr ep) {
  std::string what = "internal error";
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  send_error(res, 500, what, "server_error", "internal_error");
}

// What `parse` returns, or nullopt once the ApiException it threw is answered.
template <class Parse>
auto parsed(Res& res, Parse&& parse) -> std::optional<decltype(parse())> {
  try {
    return parse();
  } catch (const ApiException& e) {
    send_error(res, e.err);
    return std::nullopt;
  }
}

// Answers with the JSON text `body` returns, or with the ApiException it threw.
template <class Body>
void json_reply(Res& res, Body&& body) {
  try {
    res.set_content(body(), "application/json");
  } catch (const ApiException& e) {
    send_error(res, e.err);
  }
}

// The perf endpoints also throw kvlab::Error for a value out of range.
void perf_reply(std::string (*fn)(const std::string&), const Req& req, Res& res) {
  try {
    json_reply(res, [&] { return fn(req.body); });
  } catch (const Error& e) {
    send_error(res, 400, e.what(), "invalid_request_error", "invalid_value");
  }
}

json model_object(const std::string& model_id) {
  return {{"id", model_id}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "kvlab"}};
}

// Choice i's whole answer; nullopt (and the choices cancelled) when the client
// goes first: the scheduler then frees the slots and KV blocks at its next step.
std::optional<Handle::Update> await_choice(Choices& cs, int i, PeerWatch& peer) {
  std::optional<Handle::Update> u;
  while (!(u = cs.wait_for(i, std::chrono::milliseconds(100)))) {
    if (peer.gone()) {
      cs.cancel();
      return std::nullopt;
    }
  }
  return u;
}

// A non-streaming completion. Nothing is written until it is done, so the
// client's disconnect is looked for here (server/peer_watch.h), every 100 ms.
void reply_when_done(const Req& req, Res& res, const ParsedRequest& pr, Choices& cs, const std::string& id,
                     int64_t created) {
  PeerWatch peer(req.remote_addr, req.remote_port);
  std::vector<Choice> done;
  for (int i = 0; i < cs.size(); ++i) {
    std::optional<Handle::Update> u = await_choice(cs, i, peer);
    if (!u) return;
    if (u->finish_reason == "error") {
      cs.cancel();
      send_error(res, 500, u->error, "server_error", "generation_failed");
      return;
    }
    done.push_back({std::move(u->text), u->finish_reason, std::move(u->logprobs)});
  }
  res.set_content(dump(completion_response(pr, id, created, done, cs.timings())), "application/json");
}

// The right to run a live measurement: one at a time, since two would share
// the cores and time each other rather than the engine. The lease clears the
// busy flag when released or when its last copy goes (a race whose client
// left). A race releases it before its stream's last chunk: httplib drops the
// stream's provider only after that chunk is out, by when the client may have
// asked again. Released once: a later measurement's lease must not be cleared
// by this one's last copy going.
class LabLease {
 public:
  // nullptr while another measurement holds the lease.
  static std::shared_ptr<LabLease> acquire(std::atomic<bool>& busy) {
    if (busy.exchange(true)) return nullptr;
    return std::make_shared<LabLease>(busy);
  }
  explicit LabLease(std::atomic<bool>& busy) : busy_(busy) {}
  ~LabLease() { release(); }
  void release() {
    if (held_.exchange(false)) busy_.store(false);
  }

 private:
  std::atomic<bool>& busy_;
  std::atomic<bool> held_{true};
};

void refuse_lab_busy(Res& res) {
  res.set_header("Retry-After", "5");
  send_error(res, 503, "another race or phases run is measuring; retry when it ends", "server_error", "server_busy");
}

LabLimits lab_limits(const engine::SchedulerOptions& s) { return LabLimits{s.n_ctx, s.n_threads, s.kv_type}; }

void serve_asset(const std::string& name, Res& res) {
  for (const WebAsset& a : web_assets())
    if (a.name == name) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_content(std::string(a.body), std::string(a.content_type));
      return;
    }
  res.status = 404;
}

// Chart.js from Debian's libjs-chart.js (3.9, whose UMD build defines
// window.Chart), read at each request rather than embedded: the package owns
// and updates it, and the page says so when it is not installed.
constexpr const char* kChartJs = "/usr/share/javascript/chart.js/chart.min.js";

void serve_chart_js(Res& res) {
  res.set_header("X-Content-Type-Options", "nosniff");
  std::ifstream in(kChartJs, std::ios::binary);
  if (!in) {
    res.status = 404;
    res.set_content(std::string("/* Chart.js is not installed on the server (") + kChartJs +
                        "): install Debian's libjs-chart.js */\n",
                    "text/javascript; charset=utf-8");
    return;
  }
  std::ostringstream body;
  body << in.rdbuf();
  res.set_header("Cache-Control", "max-age=3600");
  res.set_content(body.str(), "text/javascript; charset=utf-8");
}

}  // namespace

HttpServer::HttpServer(ServerOptions opt) : opt_(std::move(opt)), svr_(std::make_unique<httplib::Server>()) {
  metrics_.set_model_name(opt_.model_id);
  metrics_.set_gauge_source([this] {
    if (!ready_) return engine::Gauges{};
    return sched_->gauges();
  });
  const size_t threads = opt_.http_threads > 0 ? size_t(opt_.http_threads)
                                               : size_t(opt_.sched.n_seq + opt_.sched.max_queue + 4);
  svr_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr_->set_payload_max_length(opt_.payload_max);
  svr_->set_read_timeout(30);
  svr_->set_write_timeout(30);
  svr_->set_tcp_nodelay(true);
  svr_->set_keep_alive_timeout(2);  // idle keep-alive connections hold a worker thread
  routes();
}

HttpServer::~HttpServer() {
  svr_->stop();
  sched_.reset();
}

int HttpServer::bind() {
  if (!svr_->bind_to_port(opt_.host, opt_.port))
    throw Error("cannot listen on " + opt_.host + ":" + std::to_string(opt_.port));
  return opt_.port;
}

void HttpServer::listen() { svr_->listen_after_bind(); }
void HttpServer::wait_until_listening() const {
  while (!svr_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
void HttpServer::stop() {
  // Ends running streams first, so the HTTP workers can finish and join.
  if (ready_) sched_->shutdown();
  svr_->stop();
}

void HttpServer::set_model(const model::Model& model, const tokenizer::Tokenizer& tok, int n_ctx) {
  opt_.sched.n_ctx = n_ctx;
  model_ = &model;
  tok_ = &tok;
  sched_ = std::make_unique<engine::ServingEngine>(model, tok, opt_.sched, metrics_);
  ready_ = true;
}

void HttpServer::routes() {
  svr_->set_error_handler(httplib::Server::HandlerWithResponse(&error_page));
  svr_->set_exception_handler(&exception_page);
  status_routes();
  openai_routes();
  perf_routes();
  tokenize_routes();
  lab_routes();
  web_routes();
}

bool HttpServer::authorized(const Req& req, Res& res) const {
  if (opt_.api_key.empty()) return true;
  if (req.get_header_value("Authorization") == "Bearer " + opt_.api_key) return true;
  send_error(res, 401, req.has_header("Authorization") ? "Incorrect API key provided" : "Missing API key",
             "invalid_request_error", "invalid_api_key");
  return false;
}

bool HttpServer::model_ready(Res& res) const {
  if (ready_) return true;
  res.set_header("Retry-After", "1");
  send_error(res, 503, "the model is still loading", "server_error", "model_loading");
  return false;
}

// --- /health, /metrics, /v1/models ---

void HttpServer::status_routes() {
  svr_->Get("/health", [this](const Req&, Res& res) { health(res); });
  svr_->Get("/metrics", [this](const Req&, Res& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  svr_->Get("/v1/models", [this](const Req& req, Res& res) { list_models(req, res); });
  svr_->Get(R"(/v1/models/(.+))", [this](const Req& req, Res& res) { describe_model(req, res); });
}

void HttpServer::health(Res& res) const {
  if (!ready_) {
    res.status = 503;
    res.set_content(R"({"status":"loading model"})", "application/json");
    return;
  }
  res.set_content(R"({"status":"ok"})", "application/json");
}

void HttpServer::list_models(const Req& req, Res& res) const {
  if (!authorized(req, res)) return;
  json m = model_object(opt_.model_id);
  if (ready_) m["meta"] = {{"n_ctx", opt_.sched.n_ctx}, {"n_params", model_->n_params()}, {"slots", opt_.sched.n_seq}};
  res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
}

void HttpServer::describe_model(const Req& req, Res& res) const {
  if (!authorized(req, res)) return;
  const std::string name = req.matches[1];
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
    svr_->Post(path, [this, ep](const Req& req, Res& res) { complete(ep, req, res); });
}

void HttpServer::complete(Endpoint ep, const Req& req, Res& res) {
  if (!authorized(req, res) || !model_ready(res)) return;
  std::optional<ParsedRequest> pr =
      parsed(res, [&] { return parse_request(ep, req.body, *tok_, ApiLimits{opt_.model_id, opt_.sched.n_ctx}); });
  if (!pr) return;
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
    SseStream::start(res, std::move(*pr), std::move(*choices), id, created);
  else
    reply_when_done(req, res, *pr, *choices, id, created);
}

// --- /api/simulate, /api/diagnose, /api/catalog (server/perf_api.h) ---

void HttpServer::perf_routes() {
  for (auto [path, fn] : {std::pair{"/api/simulate", &simulate_request}, std::pair{"/api/diagnose", &diagnose_request}})
    svr_->Post(path, [this, fn](const Req& req, Res& res) {
      if (authorized(req, res)) perf_reply(fn, req, res);
    });
  svr_->Get("/api/catalog", [this](const Req& req, Res& res) {
    if (authorized(req, res)) res.set_content(catalog_response(), "application/json");
  });
}

// --- llama.cpp server's /tokenize and /detokenize (server/tokenize_api.h) ---

void HttpServer::tokenize_routes() {
  using TokenizerFn = std::string (*)(const std::string&, const tokenizer::Tokenizer&);
  for (auto [path, fn] : {std::pair<const char*, TokenizerFn>{"/tokenize", &tokenize_request},
                          std::pair<const char*, TokenizerFn>{"/detokenize", &detokenize_request}})
    svr_->Post(path, [this, fn](const Req& req, Res& res) {
      if (authorized(req, res) && model_ready(res)) json_reply(res, [&] { return fn(req.body, *tok_); });
    });
}

// --- the live measurements /api/race and /api/phases (server/lab.h) ---

void HttpServer::lab_routes() {
  svr_->Get("/api/race", [this](const Req& req, Res& res) { race(req, res); });
  svr_->Post("/api/phases", [this](const Req& req, Res& res) { phases(req, res); });
}

void HttpServer::race(const Req& req, Res& res) {
  if (!authorized(req, res) || !model_ready(res)) return;
  auto param = [&req](const char* name) {
    return req.has_param(name) ? std::optional<std::string>(req.get_param_value(name)) : std::nullopt;
  };
  std::optional<LabRequest> lr =
      parsed(res, [&] { return parse_race(param("prompt"), param("n"), *tok_, lab_limits(opt_.sched)); });
  if (!lr) return;
  auto lease = LabLease::acquire(lab_busy_);
  if (!lease) return refuse_lab_busy(res);
  auto race = std::make_shared<Race>(*model_, *tok_, std::move(*lr), lab_limits(opt_.sched));
  // One token per call, so a client that has gone (write fails) stops the
  // race after at most the step in progress.
  sse::open(res, [race, lease](size_t, httplib::DataSink& sink) {
    const std::string event = race->next();
    if (race->done()) lease->release();  // the measurement is over; only the write is left
    if (!sink.write(event.data(), event.size())) return false;
    if (race->done()) sink.done();
    return true;
  });
}

void HttpServer::phases(const Req& req, Res& res) {
  if (!authorized(req, res) || !model_ready(res)) return;
  std::optional<LabRequest> lr = parsed(res, [&] { return parse_phases(req.body, *tok_, lab_limits(opt_.sched)); });
  if (!lr) return;
  const auto lease = LabLease::acquire(lab_busy_);
  if (!lease) return refuse_lab_busy(res);
  res.set_content(dump(run_phases(*model_, *tok_, *lr, lab_limits(opt_.sched))), "application/json");
}

// --- the web page ---

// The page itself needs no API key (a browser cannot send one when it
// navigates); it asks for the key and sends it with its API calls.
void HttpServer::web_routes() {
  svr_->Get("/", [](const Req&, Res& res) { serve_asset("index.html", res); });
  // Before the pattern below, which matches this path too.
  svr_->Get("/static/chart.js", [](const Req&, Res& res) { serve_chart_js(res); });
  // Names only: the pattern admits no '/', and only embedded files are served.
  svr_->Get(R"(/static/([A-Za-z0-9_-]+\.[a-z]+))", [](const Req& req, Res& res) { serve_asset(req.matches[1], res); });
}

}  // namespace kvlab::server
