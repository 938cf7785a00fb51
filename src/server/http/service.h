// The HTTP service's life: its one I/O thread (an io_context that runs every
// connection's reads and writes), its worker pool, binding, running and a
// graceful stop.
#pragma once
#include <memory>
#include <string>

#include "server/http/limits.h"
#include "server/http/message.h"
#include "server/http/router.h"

namespace kvlab::server::http {

class Service {
 public:
  Service(const Limits& limits, const Router& router, ErrorPage error_page);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Binds and listens; throws kvlab::Error when that fails.
  void bind(const std::string& host, int port);
  // Serves on the calling thread (the I/O thread) until stop().
  void run();
  bool running() const;
  // From any thread: stops accepting, lets the handlers finish and their
  // answers go out (for up to two seconds), then ends run(). A stop() before
  // run() makes run() return at once.
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvlab::server::http
