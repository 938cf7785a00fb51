// kvlab serve: an OpenAI-compatible HTTP server over one loaded model, with
// continuous batching across --parallel sequence slots (engine/serving_engine.h),
// Prometheus /metrics and the perf lab's /api/simulate and /api/diagnose.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "server/http_server.h"

namespace kvlab::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;
  int max_queue = 32;
  int prefill_chunk = 128;
  double pass_target_ms = -1;  // auto
  int kv_blocks = 0;
  engine::DraftOptions draft;
  std::string api_key;
  std::string api_key_file;
  double header_timeout_s = 10;
  double body_timeout_s = 30;
  double write_timeout_s = 30;
  int max_connections = 512;
  int max_unsent = 64 << 10;
};

// The key in `path`: its first line, without trailing white space.
std::string read_api_key(const std::string& path) {
  std::ifstream in(path);
  std::string key;
  if (!in || !std::getline(in, key)) throw Error("cannot read an API key from " + path);
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  if (key.empty()) throw Error("the API key file " + path + " is empty");
  return key;
}

// --api-key, else --api-key-file, else $KVLAB_API_KEY: the file and the
// environment keep the key out of what `ps` shows.
std::string api_key(const ServeOptions& o) {
  if (!o.api_key.empty()) return o.api_key;
  if (!o.api_key_file.empty()) return read_api_key(o.api_key_file);
  const char* env = std::getenv("KVLAB_API_KEY");
  return env ? env : "";
}

std::chrono::milliseconds millis(double seconds) { return std::chrono::milliseconds(int64_t(seconds * 1000)); }

server::http::Limits http_limits(const ServeOptions& o) {
  server::http::Limits l;
  l.header_timeout = millis(o.header_timeout_s);
  l.body_timeout = millis(o.body_timeout_s);
  l.write_timeout = millis(o.write_timeout_s);
  l.max_connections = o.max_connections;
  l.unsent_limit = size_t(o.max_unsent);
  l.socket_send_buffer = o.max_unsent;
  return l;
}

// The thread that turns SIGINT or SIGTERM (blocked in every other thread)
// into a stop of the server. It is joined before the server is destroyed:
// a signal's stop() may still be running when listen() returns, and
// ThreadSanitizer caught a detached one reading the server as serve()
// destroyed it. At the end serve() wakes it with a SIGTERM of its own.
class SignalStopper {
 public:
  SignalStopper(sigset_t set, server::HttpServer& http)
      : thread_([this, set, &http] {
          int signo = 0;
          sigwait(&set, &signo);
          if (finishing_.load()) return;
          std::fprintf(stderr, "kvlab serve: signal %d, shutting down\n", signo);
          http.stop();
        }) {}
  ~SignalStopper() { finish(); }
  SignalStopper(const SignalStopper&) = delete;
  SignalStopper& operator=(const SignalStopper&) = delete;

  void finish() {
    if (!thread_.joinable()) return;
    finishing_.store(true);
    pthread_kill(thread_.native_handle(), SIGTERM);  // pending for it if it is stopping already
    thread_.join();
  }

 private:
  std::atomic<bool> finishing_{false};
  std::thread thread_;
};

void serve(const ServeOptions& o) {
  // SIGINT/SIGTERM go to one thread that stops the server; no other thread
  // (scheduler, HTTP workers) sees them. Writes to a gone client fail, not kill.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::string path = resolve_model_path(o.model.model);
  server::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = api_key(o);
  so.http = http_limits(o);
  so.model_id = std::filesystem::path(path).stem().string();
  so.sched.n_seq = o.parallel;
  so.sched.max_queue = o.max_queue;
  so.sched.prefill_chunk = o.prefill_chunk;
  so.sched.pass_target_ms = o.pass_target_ms;
  so.sched.kv_blocks = o.kv_blocks;
  so.sched.draft = o.draft;
  so.sched.n_threads = o.model.threads;
  so.sched.kv_type = *tensor::parse_dtype(o.model.kv_type);
  so.sched.n_ctx = o.model.n_ctx;  // resolved after loading when 0

  if (so.api_key.empty() && o.host != "127.0.0.1" && o.host != "localhost" && o.host != "::1")
    std::fprintf(stderr, "kvlab serve: warning: listening on %s without --api-key\n", o.host.c_str());
  auto http = std::make_unique<server::HttpServer>(so);
  http->bind();
  SignalStopper on_signal(set, *http);
  std::thread listener([&http] { http->listen(); });
  http->wait_until_listening();  // so that a failed load below can stop it
  std::fprintf(stderr, "kvlab serve: listening on http://%s:%d (loading %s)\n", o.host.c_str(), o.port, path.c_str());

  Loaded l;
  try {
    ModelOptions mo = o.model;
    mo.model = path;
    l = load(mo);
    const engine::SessionOptions s = session_options(mo, l.model->config());
    http->set_model(*l.model, *l.tokenizer, s.n_ctx);
  } catch (...) {
    http->stop();
    listener.join();
    throw;
  }
  std::fprintf(stderr, "kvlab serve: ready (%d slots)\n", o.parallel);
  listener.join();
  on_signal.finish();
  http.reset();  // stops the scheduler before the model goes away
}

}  // namespace

void add_serve_command(CLI::App& root) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* app = root.add_subcommand(
      "serve", "OpenAI-compatible HTTP server with continuous batching, /metrics and the perf API");
  add_model_option(*app, o->model);
  app->add_option("--host", o->host, "address to listen on (loopback by default)")->capture_default_str();
  app->add_option("--port", o->port, "TCP port")->capture_default_str()->check(CLI::Range(1, 65535));
  app->add_option("-P,--parallel", o->parallel, "sequence slots decoded together (continuous batching)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app->add_option("-c,--ctx-size", o->model.n_ctx, "context size per slot in tokens (0: min(training context, 4096))")
      ->capture_default_str()
      ->check(non_negative_number());
  app->add_option("-t,--threads", o->model.threads, "threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app->add_option("--kv-type", o->model.kv_type, "KV cache element type")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  app->add_option("--kv-blocks", o->kv_blocks,
                  "KV cache pool in blocks of 16 positions, shared by all slots and the prefix cache "
                  "(0: parallel x ctx-size)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  auto* key = app->add_option("--api-key", o->api_key,
                              "require 'Authorization: Bearer KEY' on /v1 and /api routes (visible to ps: "
                              "prefer KVLAB_API_KEY or --api-key-file)");
  app->add_option("--api-key-file", o->api_key_file, "read the API key from the first line of this file")
      ->check(CLI::ExistingFile)
      ->excludes(key);
  app->add_option("--header-timeout", o->header_timeout_s,
                  "seconds a client has to send a request's header (and an idle connection stays open)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app->add_option("--body-timeout", o->body_timeout_s, "seconds a client has to send a request's body")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app->add_option("--write-timeout", o->write_timeout_s,
                  "seconds a client may stop reading its answer before it is dropped (and its generation cancelled)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app->add_option("--max-unsent", o->max_unsent,
                  "bytes of a streamed answer queued for a client that stops reading, in the server and again in "
                  "the socket, before the stream waits")
      ->capture_default_str()
      ->check(CLI::Range(4096, 64 << 20));
  app->add_option("--max-connections", o->max_connections, "open connections at most; more get 503 and are closed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--max-queue", o->max_queue, "requests that may wait for a slot; more get 503 + Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app->add_option("--prefill-chunk", o->prefill_chunk, "most prompt tokens per batch (chunked prefill)")
      ->capture_default_str()
      ->check(CLI::Range(1, 8192));
  add_pass_target_option(*app, o->pass_target_ms, "chunked prefill");
  add_draft_options(*app, o->draft);
  app->callback([o] { serve(*o); });
}

}  // namespace kvlab::cli
