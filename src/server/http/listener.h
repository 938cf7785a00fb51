// The listening socket: accepts connections and starts each, or past the
// connection cap answers it 503 and closes it.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>

#include "server/http/connection.h"

namespace kvlab::server::http {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(boost::asio::io_context& io, ConnectionContext& ctx);
  // Binds and listens; throws kvlab::Error when that fails.
  void bind(const std::string& host, int port);
  // Accepts until close().
  void start();
  void close();

 private:
  void accept();
  void on_accept(boost::beast::error_code ec, boost::asio::ip::tcp::socket socket);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  // Out of descriptors (EMFILE): accepting again at once would spin.
  boost::asio::steady_timer retry_;
  ConnectionContext& ctx_;
};

}  // namespace kvlab::server::http
