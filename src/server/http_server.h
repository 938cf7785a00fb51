// The HTTP front end (cpp-httplib): OpenAI-compatible routes, /health,
// /metrics, /api/simulate, /api/diagnose and /api/catalog, the live
// measurements /api/race and /api/phases (server/lab.h), and the web page at /
// (server/web_assets.h). It listens before the model is loaded (/health
// answers 503 until set_model is called).
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "server/metrics.h"
#include "engine/serving_engine.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace kvlab::server {

enum class Endpoint;  // server/openai_api.h

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;             // empty: no authentication
  size_t payload_max = 1 << 20;    // bytes of request body; larger: 413
  int http_threads = 0;            // 0: slots + queue + 4
  std::string model_id;            // echoed in responses
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
  // Blocks until listen() (on another thread) is accepting connections. A
  // stop() issued before that moment would be lost and listen() would never
  // return, so whoever may stop early waits for this first.
  void wait_until_listening() const;
  void stop();
  // Takes the loaded model (kept alive by the caller) and starts the serving engine
  // with `n_ctx` positions per slot.
  void set_model(const model::Model& model, const tokenizer::Tokenizer& tok, int n_ctx);

 private:
  // The routes, registered by group (the order matters where patterns
  // overlap: httplib takes the first that matches).
  void routes();
  void status_routes();
  void openai_routes();
  void perf_routes();
  void tokenize_routes();
  void lab_routes();
  void web_routes();

  // The checks before a handler's work; each answers the request itself
  // (401, 503) and returns false when it fails.
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  bool model_ready(httplib::Response& res) const;

  void health(httplib::Response& res) const;
  void list_models(const httplib::Request& req, httplib::Response& res) const;
  void describe_model(const httplib::Request& req, httplib::Response& res) const;
  void complete(Endpoint ep, const httplib::Request& req, httplib::Response& res);
  void race(const httplib::Request& req, httplib::Response& res);
  void phases(const httplib::Request& req, httplib::Response& res);

  ServerOptions opt_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> svr_;
  std::atomic<bool> ready_{false};
  const tokenizer::Tokenizer* tok_ = nullptr;
  const model::Model* model_ = nullptr;
  std::unique_ptr<engine::ServingEngine> sched_;
  // Set while a race or a phases run measures: one at a time, since two would
  // share the cores and time each other rather than the engine.
  std::atomic<bool> lab_busy_{false};
};

}  // namespace kvlab::server
