#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "perf/hardware.h"
#include "perf/model_catalog.h"
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

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.body()), "application/json");
}

void send_error(httplib::Response& res, int status, std::string message, std::string type, std::string code,
                std::string param = {}) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  e.param = std::move(param);
  send_error(res, e);
}

// The names the page offers for /api/simulate and /api/diagnose.
std::string catalog() {
  json models = json::array(), hardware = json::array();
  for (const perf::ModelEntry& m : perf::model_catalog())
    models.push_back({{"id", m.id}, {"name", m.config.name}, {"layers", m.config.n_layer}});
  for (const perf::Hardware& h : perf::hardware_catalog())
    hardware.push_back({{"id", h.id}, {"name", h.name}, {"kind", perf::hw_kind_name(h.kind)}});
  return dump(json{{"models", models},
                   {"hardware", hardware},
                   {"defaults", {{"model", "llama-3.1-8b"}, {"hw", "h100"}}}});
}

// Chart.js from Debian's libjs-chart.js (3.9, whose UMD build defines
// window.Chart), read at each request rather than embedded: the package owns
// and updates it, and the page says so when it is not installed.
constexpr const char* kChartJs = "/usr/share/javascript/chart.js/chart.min.js";

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

}  // namespace

HttpServer::HttpServer(ServerOptions opt) : opt_(std::move(opt)), svr_(std::make_unique<httplib::Server>()) {
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
  httplib::Server& s = *svr_;

  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string type = res.status >= 500 ? "server_error" : "invalid_request_error";
    const std::string code = res.status == 413 ? "payload_too_large" : res.status == 404 ? "not_found" : "";
    send_error(res, res.status, status_message(res.status), type, code);
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, what, "server_error", "internal_error");
  });

  auto authorized = [this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + opt_.api_key) return true;
    send_error(res, 401, req.has_header("Authorization") ? "Incorrect API key provided" : "Missing API key",
               "invalid_request_error", "invalid_api_key");
    return false;
  };

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_) {
      res.status = 503;
      res.set_content(R"({"status":"loading model"})", "application/json");
      return;
    }
    res.set_content(R"({"status":"ok"})", "application/json");
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });

  s.Get("/v1/models", [this, authorized](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    json m = {{"id", opt_.model_id}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "kvlab"}};
    if (ready_) m["meta"] = {{"n_ctx", opt_.sched.n_ctx}, {"n_params", model_->n_params()}, {"slots", opt_.sched.n_seq}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });

  s.Get(R"(/v1/models/(.+))", [this, authorized](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    const std::string name = req.matches[1];
    if (!model_matches(name, opt_.model_id)) {
      send_error(res, 404, "The model '" + name + "' does not exist", "invalid_request_error", "model_not_found",
                 "model");
      return;
    }
    res.set_content(
        dump(json{{"id", opt_.model_id}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "kvlab"}}),
        "application/json");
  });

  auto generate = [this, authorized](Endpoint ep) {
    return [this, authorized, ep](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      if (!ready_) {
        res.set_header("Retry-After", "1");
        send_error(res, 503, "the model is still loading", "server_error", "model_loading");
        return;
      }
      auto pr = std::make_shared<ParsedRequest>();
      try {
        *pr = parse_request(ep, req.body, *tok_, ApiLimits{opt_.model_id, opt_.sched.n_ctx});
      } catch (const ApiException& e) {
        send_error(res, e.err);
        return;
      }
      auto choices = std::make_shared<std::optional<Choices>>(Choices::submit(*sched_, pr->gen, pr->n));
      if (!*choices) {
        metrics_.request_rejected();
        res.set_header("Retry-After", "1");
        send_error(res, 503, "all slots are busy and the queue is full; retry later", "server_error", "server_busy");
        return;
      }
      Choices& cs = **choices;
      const std::string id = new_id(ep);
      const int64_t created = unix_now();
      if (!pr->stream) {
        // Nothing is written until the completion is done, so the client's
        // disconnect is looked for here (server/peer_watch.h), every 100 ms.
        PeerWatch peer(req.remote_addr, req.remote_port);
        std::vector<Choice> done;
        for (int i = 0; i < cs.size(); ++i) {
          std::optional<Handle::Update> u;
          while (!(u = cs.wait_for(i, std::chrono::milliseconds(100)))) {
            if (peer.gone()) {
              cs.cancel();  // the scheduler frees the slots and KV blocks at its next step
              return;
            }
          }
          if (u->finish_reason == "error") {
            cs.cancel();
            send_error(res, 500, u->error, "server_error", "generation_failed");
            return;
          }
          done.push_back({std::move(u->text), u->finish_reason, std::move(u->logprobs)});
        }
        res.set_content(dump(completion_response(*pr, id, created, done, cs.timings())), "application/json");
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");
      auto sent_roles = std::make_shared<bool>(false);
      res.set_chunked_content_provider(
          "text/event-stream",
          [pr, choices, id, created, sent_roles](size_t, httplib::DataSink& sink) {
            Choices& cs = **choices;
            auto write = [&](const std::string& s) {
              if (sink.write(s.data(), s.size())) return true;
              cs.cancel();
              return false;
            };
            if (pr->endpoint == Endpoint::Chat && !*sent_roles) {
              *sent_roles = true;
              for (int i = 0; i < cs.size(); ++i)
                if (!write(sse::event(dump(stream_chunk(*pr, id, created, i, "", "", true))))) return false;
              return true;
            }
            const auto news = cs.next(std::chrono::milliseconds(100));
            if (!news) return true;  // nothing yet; httplib calls again
            const auto& [i, u] = *news;
            if ((!u.text.empty() || !u.logprobs.empty()) &&
                !write(sse::event(dump(stream_chunk(*pr, id, created, i, u.text, "", false, u.logprobs)))))
              return false;
            if (!u.done) return true;
            if (u.finish_reason == "error") {
              // One failed choice ends the stream: the error, then [DONE].
              cs.cancel();
              ApiError e{500, u.error, "server_error", "", "generation_failed"};
              if (!write(sse::event(dump(e.body())))) return false;
            } else {
              if (!write(sse::event(dump(stream_chunk(*pr, id, created, i, "", u.finish_reason, false))))) return false;
              if (!cs.all_done()) return true;
              if (pr->include_usage && !write(sse::event(dump(usage_chunk(*pr, id, created, cs.timings())))))
                return false;
            }
            if (!write(sse::done())) return false;
            sink.done();
            return true;
          },
          [choices](bool success) {
            if (!success) (*choices)->cancel();
          });
    };
  };

  s.Post("/v1/completions", generate(Endpoint::Completions));
  s.Post("/v1/chat/completions", generate(Endpoint::Chat));
  s.Post("/completions", generate(Endpoint::Completions));
  s.Post("/chat/completions", generate(Endpoint::Chat));

  auto perf_route = [authorized](std::string (*fn)(const std::string&)) {
    return [authorized, fn](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      try {
        res.set_content(fn(req.body), "application/json");
      } catch (const ApiException& e) {
        send_error(res, e.err);
      } catch (const Error& e) {
        send_error(res, 400, e.what(), "invalid_request_error", "invalid_value");
      }
    };
  };
  s.Post("/api/simulate", perf_route(&simulate_request));
  s.Post("/api/diagnose", perf_route(&diagnose_request));
  s.Get("/api/catalog", [authorized](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    res.set_content(catalog(), "application/json");
  });

  // The live measurements: loaded model, valid arguments, and no other
  // measurement running. The lease clears lab_busy_ when released or when
  // its last copy goes (a race whose client left). A race releases it
  // before its stream's last chunk: httplib drops the stream's provider only
  // after that chunk is out, by when the client may have asked again.
  // Released once: a later measurement's lease must not be cleared by this
  // one's last copy going.
  struct LabLease {
    explicit LabLease(std::atomic<bool>* b) : busy(b) {}
    ~LabLease() { release(); }
    void release() {
      if (held.exchange(false)) busy->store(false);
    }
    std::atomic<bool>* busy;
    std::atomic<bool> held{true};
  };
  auto lab_lease = [this]() -> std::shared_ptr<LabLease> {
    if (lab_busy_.exchange(true)) return nullptr;
    return std::make_shared<LabLease>(&lab_busy_);
  };
  auto lab_ready = [this](httplib::Response& res) {
    if (ready_) return true;
    res.set_header("Retry-After", "1");
    send_error(res, 503, "the model is still loading", "server_error", "model_loading");
    return false;
  };
  // llama.cpp server's tokenizer routes (server/tokenize_api.h).
  using TokenizerFn = std::string (*)(const std::string&, const tokenizer::Tokenizer&);
  auto tokenizer_route = [this, authorized, lab_ready](TokenizerFn fn) {
    return [this, authorized, lab_ready, fn](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res) || !lab_ready(res)) return;
      try {
        res.set_content(fn(req.body, *tok_), "application/json");
      } catch (const ApiException& e) {
        send_error(res, e.err);
      }
    };
  };
  s.Post("/tokenize", tokenizer_route(&tokenize_request));
  s.Post("/detokenize", tokenizer_route(&detokenize_request));

  auto lab_busy = [](httplib::Response& res) {
    res.set_header("Retry-After", "5");
    send_error(res, 503, "another race or phases run is measuring; retry when it ends", "server_error", "server_busy");
  };
  auto lab_limits = [this] { return LabLimits{opt_.sched.n_ctx, opt_.sched.n_threads, opt_.sched.kv_type}; };

  s.Get("/api/race", [this, authorized, lab_lease, lab_ready, lab_busy, lab_limits](const httplib::Request& req,
                                                                                     httplib::Response& res) {
    if (!authorized(req, res) || !lab_ready(res)) return;
    auto param = [&req](const char* name) {
      return req.has_param(name) ? std::optional<std::string>(req.get_param_value(name)) : std::nullopt;
    };
    LabRequest lr;
    try {
      lr = parse_race(param("prompt"), param("n"), *tok_, lab_limits());
    } catch (const ApiException& e) {
      send_error(res, e.err);
      return;
    }
    auto lease = lab_lease();
    if (!lease) return lab_busy(res);
    auto race = std::make_shared<Race>(*model_, *tok_, std::move(lr), lab_limits());
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    // One token per call, so a client that has gone (write fails) stops the
    // race after at most the step in progress.
    res.set_chunked_content_provider("text/event-stream", [race, lease](size_t, httplib::DataSink& sink) {
      const std::string event = race->next();
      if (race->done()) lease->release();  // the measurement is over; only the write is left
      if (!sink.write(event.data(), event.size())) return false;
      if (race->done()) sink.done();
      return true;
    });
  });

  s.Post("/api/phases", [this, authorized, lab_lease, lab_ready, lab_busy, lab_limits](const httplib::Request& req,
                                                                                        httplib::Response& res) {
    if (!authorized(req, res) || !lab_ready(res)) return;
    LabRequest lr;
    try {
      lr = parse_phases(req.body, *tok_, lab_limits());
    } catch (const ApiException& e) {
      send_error(res, e.err);
      return;
    }
    const auto lease = lab_lease();
    if (!lease) return lab_busy(res);
    res.set_content(dump(run_phases(*model_, *tok_, lr, lab_limits())), "application/json");
  });

  // The page itself needs no API key (a browser cannot send one when it
  // navigates); it asks for the key and sends it with its API calls.
  auto asset = [](const std::string& name, httplib::Response& res) {
    for (const WebAsset& a : web_assets())
      if (a.name == name) {
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Content-Type-Options", "nosniff");
        res.set_content(std::string(a.body), std::string(a.content_type));
        return;
      }
    res.status = 404;
  };
  s.Get("/", [asset](const httplib::Request&, httplib::Response& res) { asset("index.html", res); });
  s.Get("/static/chart.js", [](const httplib::Request&, httplib::Response& res) {
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
  });
  // Names only: the pattern admits no '/', and only embedded files are served.
  s.Get(R"(/static/([A-Za-z0-9_-]+\.[a-z]+))", [asset](const httplib::Request& req, httplib::Response& res) {
    asset(req.matches[1], res);
  });
}

}  // namespace kvlab::server
