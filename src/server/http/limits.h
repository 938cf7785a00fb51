// What one client may cost the server: the timeouts and sizes that keep an
// idle, slow or hostile client from holding memory, threads or slots.
#pragma once
#include <chrono>
#include <cstddef>

namespace kvlab::server::http {

struct Limits {
  // From a connection's first byte (or the end of its last response) to the
  // end of its request's header; a slower client is closed.
  std::chrono::milliseconds header_timeout{10'000};
  // For the whole request body, once the header is in.
  std::chrono::milliseconds body_timeout{30'000};
  // For each write; a client that stops reading for this long is dropped
  // (and its generation cancelled).
  std::chrono::milliseconds write_timeout{30'000};
  // Open connections at most; the next one gets 503 and is closed.
  int max_connections = 512;
  // Request body bytes at most (Content-Length or chunked); more: 413.
  size_t body_limit = 1 << 20;
  // Request line and header bytes at most; more: 431.
  size_t header_limit = 8 << 10;
  // Bytes of a streamed response queued above the socket at most: the
  // stream's writer waits while this much is unwritten.
  size_t unsent_limit = 64 << 10;
  // The socket's own send buffer (SO_SNDBUF; the kernel doubles it), so that
  // a client that stops reading is noticed after this much, not megabytes.
  int socket_send_buffer = 64 << 10;
  // Threads that run the handlers that may block (those waiting on the
  // engine); 0: HttpServer sizes it to the engine (slots + queue + 4).
  int workers = 0;
};

}  // namespace kvlab::server::http
