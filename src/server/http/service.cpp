#include "server/http/service.h"

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <thread>

#include "server/http/connection.h"
#include "server/http/dispatcher.h"
#include "server/http/listener.h"

namespace kvlab::server::http {

// Destroyed in reverse: the io_context (and with it every connection) before
// the context and dispatcher the connections use.
struct Service::State {
  State(const Limits& l, const Router& router, ErrorPage error_page)
      : limits(l), dispatcher(router, std::move(error_page), l.workers), context{limits, dispatcher, stopping} {}

  const Limits limits;
  std::atomic<bool> stopping{false};
  std::atomic<bool> running{false};
  Dispatcher dispatcher;
  ConnectionContext context;
  boost::asio::io_context io{1};
  std::shared_ptr<Listener> listener = std::make_shared<Listener>(io, context);
};

Service::Service(const Limits& limits, const Router& router, ErrorPage error_page)
    : state_(std::make_unique<State>(limits, router, std::move(error_page))) {}

Service::~Service() {
  stop();
  // The workers' last answers may still be posted to the io_context.
  state_->dispatcher.join();
}

void Service::bind(const std::string& host, int port) {
  state_->listener->bind(host, port);
  state_->listener->start();
}

void Service::run() {
  state_->running = true;
  state_->io.run();
}

bool Service::running() const { return state_->running; }

void Service::stop() {
  State& s = *state_;
  if (s.stopping.exchange(true)) return;
  boost::asio::post(s.io, [listener = s.listener] { listener->close(); });
  s.dispatcher.join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (s.context.answering.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.io.stop();
}

}  // namespace kvlab::server::http
