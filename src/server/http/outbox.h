// One response's way from the thread that makes it to the connection's I/O
// thread: bytes handed over in order, a bound on those not yet written, and
// the news that the client has gone. Shared by the two threads.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace kvlab::server::http {

class Outbox {
 public:
  // What follows a piece of the response: more of it, or (it was the last)
  // the connection's next request, or the connection's close.
  enum class Then { More, NextRequest, Close };
  // Hands bytes to the connection (posts them to its I/O thread).
  using Deliver = std::function<void(std::string bytes, Then then)>;

  // `stopping` is the server's: a stopping server wakes every waiting writer.
  Outbox(Deliver deliver, size_t unsent_limit, const std::atomic<bool>& stopping);

  // Queues `bytes`. With `wait_for_room`, first waits while unsent_limit or
  // more bytes are unwritten, so that a client that stops reading holds a
  // bounded amount. False (and nothing queued) once the client has gone.
  bool push(std::string bytes, Then then, bool wait_for_room);
  // The I/O thread's side: `n` bytes are written; the client has gone.
  void written(size_t n);
  void close();
  bool closed() const { return closed_.load(); }

 private:
  Deliver deliver_;
  const size_t unsent_limit_;
  const std::atomic<bool>& stopping_;
  std::mutex mu_;
  std::condition_variable room_;
  size_t unsent_ = 0;  // guarded by mu_
  std::atomic<bool> closed_{false};
};

}  // namespace kvlab::server::http
