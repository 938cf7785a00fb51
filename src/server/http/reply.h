// The answer to one request as its handler gives it: either a whole response
// (`res`, sent when the handler returns) or a stream whose body pieces go out
// as they come (server-sent events). A handler may run on any thread.
#pragma once
#include <memory>
#include <string_view>

#include "server/http/message.h"
#include "server/http/outbox.h"
#include "server/http/wire.h"

namespace kvlab::server::http {

class Reply {
 public:
  // `format`: the request's HTTP version and whether the connection stays
  // open; `head_only`: a HEAD request, answered without the body.
  Reply(std::shared_ptr<Outbox> out, HeadFormat format, bool head_only);

  Response res;

  // The client closed or reset its connection, or stopped reading for the
  // write timeout. A client that only closed its sending side (a half-close)
  // has not gone: it still reads the answer.
  bool client_gone() const { return out_->closed(); }
  // Sends res's status and headers now; the body follows as write()s:
  // chunked for HTTP/1.1, delimited by the connection's close for HTTP/1.0.
  void start_stream();
  // One piece of the streamed body; waits while too much is unwritten.
  // False once the client has gone.
  bool write(std::string_view data);
  bool streaming() const { return streaming_; }
  // Called once the handler has returned: sends res, or ends the stream.
  void finish();

 private:
  // What follows the response's last bytes.
  Outbox::Then after_last() const;

  std::shared_ptr<Outbox> out_;
  HeadFormat format_;
  bool head_only_;
  bool streaming_ = false;
};

}  // namespace kvlab::server::http
