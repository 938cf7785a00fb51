#include "server/http/dispatcher.h"

#include <boost/asio/post.hpp>

namespace kvlab::server::http {

Dispatcher::Dispatcher(const Router& router, ErrorPage error_page, int workers)
    : router_(router), error_page_(std::move(error_page)), workers_(size_t(std::max(1, workers))) {}

void Dispatcher::handle(Request req, std::shared_ptr<Reply> reply) {
  const Router::Match match = router_.find(req);
  if (!match.route) {
    reply->res = error_page_(match.allow.empty() ? 404 : 405, "");
    if (!match.allow.empty()) reply->res.set_header("Allow", match.allow);
    reply->finish();
    return;
  }
  const Route& route = *match.route;
  if (route.runs == Runs::OnIoThread) {
    call(route.handler, req, *reply);
    return;
  }
  boost::asio::post(workers_, [this, &route, req = std::move(req), reply = std::move(reply)] {
    call(route.handler, req, *reply);
  });
}

void Dispatcher::call(const Handler& handler, const Request& req, Reply& reply) const {
  try {
    handler(req, reply);
  } catch (const std::exception& e) {
    if (!reply.streaming()) reply.res = error_page_(500, e.what());
  } catch (...) {
    if (!reply.streaming()) reply.res = error_page_(500, "internal error");
  }
  if (!reply.streaming() && reply.res.status >= 400 && reply.res.body.empty()) fill_error(reply.res);
  reply.finish();
}

void Dispatcher::fill_error(Response& res) const {
  Response page = error_page_(res.status, "");
  for (auto& [name, value] : page.headers) res.set_header(name, std::move(value));
  res.body = std::move(page.body);
}

void Dispatcher::join() { workers_.join(); }

}  // namespace kvlab::server::http
