// One client connection, driven by the I/O thread: it reads each request
// under the header and body timeouts and size limits, hands it to the
// dispatcher, writes the answer as it comes (from a worker thread, through
// an Outbox) and then reads the next request or closes. A slow or idle
// client costs a socket and a few buffers, never a thread.
#pragma once
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "server/http/dispatcher.h"
#include "server/http/limits.h"
#include "server/http/outbox.h"

namespace kvlab::server::http {

// What the connections of one server share.
struct ConnectionContext {
  const Limits& limits;
  Dispatcher& dispatcher;
  const std::atomic<bool>& stopping;
  std::atomic<int> open{0};       // connections open
  std::atomic<int> answering{0};  // requests whose answer is not yet written
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::ip::tcp::socket socket, ConnectionContext& ctx);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Serves requests until the client leaves, a timeout or an error.
  void start();
  // Past the connection cap: a 503, then the close.
  void refuse();

 private:
  using Then = Outbox::Then;
  struct Pending {
    std::string bytes;
    Then then;
    bool from_outbox;  // counted against the response's unsent bound
  };

  void read_header();
  void on_header(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);
  void on_read_error(boost::beast::error_code ec);
  void answer();
  // A request that cannot be read (too big, malformed): the error, then close.
  void answer_error(int status, const std::string& message = {});

  void enqueue(std::string bytes, Then then, bool from_outbox);
  void write_next();
  void on_write(boost::beast::error_code ec);
  void response_done(Then then);

  void watch_client();
  void on_watch_tick();

  void linger_close();
  void drain();
  void drop();
  void end_answer();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  boost::asio::steady_timer watch_;
  ConnectionContext& ctx_;
  std::shared_ptr<Outbox> outbox_;  // the answer in progress
  std::deque<Pending> queue_;
  bool writing_ = false;
  bool answering_ = false;         // a request is being answered
  bool http10_ = false;            // the request being answered is HTTP/1.0
  bool response_started_ = false;  // some of its answer is queued
  bool half_closed_ = false;       // the client closed its sending side
  bool probed_ = false;
  bool closed_ = false;
  size_t drained_ = 0;
  std::chrono::steady_clock::time_point linger_until_;
};

}  // namespace kvlab::server::http
