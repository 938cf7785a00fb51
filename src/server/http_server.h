// The HTTP front end: OpenAI-compatible routes, /health, /metrics,
// /api/simulate, /api/diagnose and /api/catalog, the live measurements
// /api/race and /api/phases (server/lab.h), and the web page at /
// (server/web_assets.h), served by the event-driven HTTP layer of
// server/http/ (docs/serving-http.md). It listens before the model is loaded
// (/health answers 503 until set_model is called).
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "engine/serving_engine.h"
#include "server/http/limits.h"
#include "server/http/message.h"
#include "server/http/reply.h"
#include "server/http/router.h"
#include "server/metrics.h"
#include "tokenizer/tokenizer.h"

namespace kvlab::server {

namespace http {
class Service;
}

enum class Endpoint;  // server/openai_api.h

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;   // empty: no authentication
  std::string model_id;  // echoed in responses
  http::Limits http;     // http.workers 0: slots + queue + 4
  engine::SchedulerOptions sched;
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions opt);
  ~HttpServer();
  // Binds the socket; throws kvlab::Error when that fails. Returns the port.
  int bind();
  // Serves until stop(); blocking.
  void listen();
  // Blocks until listen() (on another thread) is serving.
  void wait_until_listening() const;
  void stop();
  // Takes the loaded model (kept alive by the caller) and starts the serving engine
  // with `n_ctx` positions per slot.
  void set_model(const model::Model& model, const tokenizer::Tokenizer& tok, int n_ctx);

 private:
  using Request = http::Request;
  using Reply = http::Reply;
  using Response = http::Response;

  // The routes, registered by group (the order matters where patterns
  // overlap: the first that matches answers).
  void routes();
  void status_routes();
  void openai_routes();
  void perf_routes();
  void tokenize_routes();
  void lab_routes();
  void web_routes();

  // The checks before a handler's work; each answers the request itself
  // (401, 503) and returns false when it fails.
  bool authorized(const Request& req, Response& res) const;
  bool model_ready(Response& res) const;

  void health(Response& res) const;
  void list_models(const Request& req, Response& res) const;
  void describe_model(const Request& req, Response& res) const;
  void complete(Endpoint ep, const Request& req, Reply& reply);
  void race(const Request& req, Reply& reply);
  void phases(const Request& req, Response& res);

  ServerOptions opt_;
  Metrics metrics_;
  http::Router router_;
  std::unique_ptr<http::Service> service_;
  std::atomic<bool> ready_{false};
  const tokenizer::Tokenizer* tok_ = nullptr;
  const model::Model* model_ = nullptr;
  std::unique_ptr<engine::ServingEngine> sched_;
  // Set while a race or a phases run measures: one at a time, since two would
  // share the cores and time each other rather than the engine.
  std::atomic<bool> lab_busy_{false};
};

}  // namespace kvlab::server
