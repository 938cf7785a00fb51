// Answers a parsed request: finds its route and runs the handler on the
// I/O thread or on the bounded worker pool (server/http/router.h), turning a
// missing route into 404 or 405 and an exception into 500.
#pragma once
#include <boost/asio/thread_pool.hpp>
#include <memory>

#include "server/http/message.h"
#include "server/http/reply.h"
#include "server/http/router.h"

namespace kvlab::server::http {

class Dispatcher {
 public:
  Dispatcher(const Router& router, ErrorPage error_page, int workers);
  // Answers `req` through `reply` (now, or from a worker).
  void handle(Request req, std::shared_ptr<Reply> reply);
  // Waits for the handlers running or queued on the workers.
  void join();
  const ErrorPage& error_page() const { return error_page_; }

 private:
  void call(const Handler& handler, const Request& req, Reply& reply) const;
  // A handler's error status without a body gets the error page's body.
  void fill_error(Response& res) const;

  const Router& router_;
  ErrorPage error_page_;
  boost::asio::thread_pool workers_;
};

}  // namespace kvlab::server::http
