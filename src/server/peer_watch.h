// Whether the client of a request that is still being answered has gone.
//
// cpp-httplib 0.11.4 (Debian's) tells a handler nothing about its connection
// until it writes: a streaming response learns of a disconnect from a failed
// write, but a non-streaming one only writes once the whole completion is
// done, so a client that gave up kept its slot and KV blocks busy until then.
// The connection's socket is still open while its handler runs (the worker
// thread that owns it is in the handler), so it can be found among the
// process's descriptors by the peer's address and port, and polled: the peer
// has gone when it closed its side (POLLRDHUP, or a zero-byte peek) or the
// connection failed (POLLHUP, POLLERR).
#pragma once
#include <string>

namespace kvlab::server {

class PeerWatch {
 public:
  PeerWatch(std::string remote_addr, int remote_port);
  // True once the peer has closed or reset the connection. False while it is
  // there, and when the socket cannot be found (then nothing is known).
  bool gone();

 private:
  std::string addr_;
  int port_;
  int fd_ = -1;  // found on first use
};

}  // namespace kvlab::server
