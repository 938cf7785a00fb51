#include "server/http/connection.h"

#include <poll.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "server/http/target.h"
#include "server/http/wire.h"

namespace kvlab::server::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// How often a connection whose request is being answered looks at its
// client, and how long (and how many bytes) a closing connection reads
// what the client still sends, so that its close does not reset the
// connection before the client has read the answer.
constexpr std::chrono::milliseconds kWatchPeriod{100};
constexpr std::chrono::seconds kLingerTime{1};
constexpr size_t kLingerBytes = 16 << 20;

Request to_request(bhttp::request<bhttp::string_body>&& msg) {
  Request req;
  req.method = std::string(msg.method_string());
  parse_target(std::string_view(msg.target().data(), msg.target().size()), req);
  for (const auto& field : msg) req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  req.body = std::move(msg.body());
  req.http10 = msg.version() == 10;
  return req;
}

}  // namespace

Connection::Connection(tcp::socket socket, ConnectionContext& ctx)
    : stream_(std::move(socket)), buffer_(ctx.limits.header_limit + (64 << 10)),
      watch_(stream_.get_executor()), ctx_(ctx) {
  ++ctx_.open;
  beast::error_code ignored;
  stream_.socket().set_option(tcp::no_delay(true), ignored);
  stream_.socket().set_option(asio::socket_base::send_buffer_size(ctx_.limits.socket_send_buffer), ignored);
}

Connection::~Connection() {
  end_answer();
  --ctx_.open;
}

void Connection::start() { read_header(); }

void Connection::refuse() { answer_error(503, "too many connections; retry later"); }

// --- reading a request ---

void Connection::read_header() {
  parser_.emplace();
  parser_->header_limit(uint32_t(ctx_.limits.header_limit));
  parser_->body_limit(ctx_.limits.body_limit);
  stream_.expires_after(ctx_.limits.header_timeout);
  bhttp::async_read_header(stream_, buffer_, *parser_,
                           [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  const auto expect = parser_->get()[bhttp::field::expect];
  if (!parser_->is_done() && beast::iequals(expect, "100-continue") && parser_->get().version() == 11)
    enqueue(std::string(kContinue), Then::More, false);
  stream_.expires_after(ctx_.limits.body_timeout);
  bhttp::async_read(stream_, buffer_, *parser_,
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void Connection::on_body(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  stream_.expires_never();
  answer();
}

void Connection::on_read_error(beast::error_code ec) {
  // A timed-out stream is closed already; a client that went has nobody to
  // read an answer.
  if (ec == bhttp::error::header_limit) return answer_error(431);
  if (ec == bhttp::error::body_limit) return answer_error(413);
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message)
    return answer_error(400);
  drop();
}

void Connection::answer() {
  const bool keep_alive = parser_->keep_alive() && !ctx_.stopping;
  Request req = to_request(parser_->release());
  answering_ = true;
  ++ctx_.answering;
  http10_ = req.http10;
  response_started_ = probed_ = false;
  auto deliver = [weak = weak_from_this(), executor = stream_.get_executor()](std::string bytes, Then then) {
    asio::post(executor, [weak, bytes = std::move(bytes), then]() mutable {
      if (auto self = weak.lock()) self->enqueue(std::move(bytes), then, true);
    });
  };
  outbox_ = std::make_shared<Outbox>(std::move(deliver), ctx_.limits.unsent_limit, ctx_.stopping);
  const bool head_only = req.method == "HEAD";
  auto reply = std::make_shared<Reply>(outbox_, HeadFormat{req.http10, keep_alive, Framing::Length}, head_only);
  watch_client();
  ctx_.dispatcher.handle(std::move(req), std::move(reply));
}

void Connection::answer_error(int status, const std::string& message) {
  const Response res = ctx_.dispatcher.error_page()(status, message);
  enqueue(format_head(res, HeadFormat{false, false, Framing::Length}) + res.body, Then::Close, false);
}

// --- writing the answer ---

void Connection::enqueue(std::string bytes, Then then, bool from_outbox) {
  if (closed_) return;
  if (from_outbox) response_started_ = true;
  queue_.push_back(Pending{std::move(bytes), then, from_outbox});
  if (!writing_) write_next();
}

void Connection::write_next() {
  if (queue_.empty()) return;
  writing_ = true;
  stream_.expires_after(ctx_.limits.write_timeout);
  asio::async_write(stream_, asio::buffer(queue_.front().bytes),
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void Connection::on_write(beast::error_code ec) {
  writing_ = false;
  if (ec || closed_) return drop();
  const Pending done = std::move(queue_.front());
  queue_.pop_front();
  if (done.from_outbox && outbox_) outbox_->written(done.bytes.size());
  if (done.then != Then::More) return response_done(done.then);
  write_next();
}

void Connection::response_done(Then then) {
  stream_.expires_never();
  end_answer();
  watch_.cancel();
  if (then == Then::Close || half_closed_ || ctx_.stopping) return linger_close();
  read_header();
}

// --- the client while its request is answered ---

void Connection::watch_client() {
  watch_.expires_after(kWatchPeriod);
  watch_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->on_watch_tick();
  });
}

// A client that closed its sending side may still read the answer (a
// half-close), or may have closed the connection: the two look the same
// until something is written, which a closed one answers with a reset. So
// an HTTP/1.1 client whose answer has not started gets an interim
// "100 Continue", which HTTP/1.1 clients skip, and its reset (POLLHUP,
// POLLERR) tells that it has gone. Nothing is read here: data the client
// sends waits in the socket for the next request.
void Connection::on_watch_tick() {
  if (!answering_ || closed_) return;
  pollfd p{stream_.socket().native_handle(), POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0) {
    if (p.revents & (POLLERR | POLLHUP)) return drop();
    if (p.revents & POLLRDHUP) half_closed_ = true;
  }
  if (half_closed_ && !probed_ && !response_started_ && !http10_) {
    probed_ = true;
    enqueue(std::string(kContinue), Then::More, false);
  }
  watch_client();
}

// --- ending the connection ---

void Connection::linger_close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  linger_until_ = std::chrono::steady_clock::now() + kLingerTime;
  drain();
}

void Connection::drain() {
  buffer_.clear();
  stream_.expires_at(linger_until_);
  stream_.async_read_some(buffer_.prepare(16 << 10), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->drained_ += n;
    if (ec || self->drained_ > kLingerBytes) return self->drop();
    self->drain();
  });
}

void Connection::drop() {
  if (closed_) return;
  closed_ = true;
  if (outbox_) outbox_->close();
  end_answer();
  watch_.cancel();
  beast::error_code ignored;
  stream_.socket().close(ignored);
}

void Connection::end_answer() {
  if (!answering_) return;
  answering_ = false;
  --ctx_.answering;
}

}  // namespace kvlab::server::http
