#include "server/http/listener.h"

#include <boost/asio/strand.hpp>

#include "common/error.h"

namespace kvlab::server::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Listener::Listener(asio::io_context& io, ConnectionContext& ctx) : io_(io), acceptor_(io), retry_(io), ctx_(ctx) {}

void Listener::bind(const std::string& host, int port) {
  try {
    tcp::resolver resolver(io_);
    const tcp::endpoint endpoint = *resolver.resolve(host, std::to_string(port)).begin();
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + e.code().message());
  }
}

void Listener::start() { accept(); }

void Listener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  retry_.cancel();
}

void Listener::accept() {
  acceptor_.async_accept(asio::make_strand(io_), [self = shared_from_this()](boost::beast::error_code ec,
                                                                             tcp::socket socket) {
    self->on_accept(ec, std::move(socket));
  });
}

void Listener::on_accept(boost::beast::error_code ec, tcp::socket socket) {
  if (!acceptor_.is_open()) return;
  if (ec) {
    retry_.expires_after(std::chrono::milliseconds(100));
    retry_.async_wait([self = shared_from_this()](boost::beast::error_code e) {
      if (!e) self->accept();
    });
    return;
  }
  const bool over_cap = ctx_.open.load() >= ctx_.limits.max_connections;
  auto connection = std::make_shared<Connection>(std::move(socket), ctx_);
  if (over_cap)
    connection->refuse();
  else
    connection->start();
  accept();
}

}  // namespace kvlab::server::http
