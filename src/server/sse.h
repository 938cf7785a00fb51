// Server-sent events as OpenAI streams use them: the framing of one event,
// opening an event stream on an HTTP response, and SseStream, the event stream
// of one streaming completion.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "server/choices.h"
#include "server/openai_api.h"

namespace httplib {
class DataSink;
struct Response;
}  // namespace httplib

namespace kvlab::server {

namespace sse {

inline std::string event(const std::string& data) { return "data: " + data + "\n\n"; }
inline std::string done() { return "data: [DONE]\n\n"; }

// httplib calls `provider` until it returns false (the client has gone) or
// calls sink.done(); then `released` with whether the stream ended cleanly.
using Provider = std::function<bool(size_t offset, httplib::DataSink& sink)>;
using Released = std::function<void(bool success)>;
// Answers `res` with an event stream that no proxy buffers or caches.
void open(httplib::Response& res, Provider provider, Released released = nullptr);

}  // namespace sse

// One streaming completion's events, sent as they come: for chat, first each
// choice's role delta; then each choice's text (with its logprobs) as the
// scheduler produces it, each choice's finish chunk, the usage chunk when
// asked for, and [DONE]. A failed choice ends the stream with an error event
// and [DONE]. A client that goes (a failed write, or a stream httplib drops)
// cancels the choices, which frees their slots at the scheduler's next step.
class SseStream {
 public:
  // Streams `choices` as the answer to `res`; the stream lives as long as
  // httplib keeps its provider.
  static void start(httplib::Response& res, ParsedRequest request, Choices choices, std::string id, int64_t created);

  SseStream(ParsedRequest request, Choices choices, std::string id, int64_t created);
  // One call of httplib's content provider: sends what is new, waiting up to
  // 100 ms for it. False when the client has gone.
  bool pump(httplib::DataSink& sink);
  // httplib's release of the provider; an unclean end cancels the choices.
  void release(bool success);

 private:
  bool send_roles(httplib::DataSink& sink);
  bool send_update(httplib::DataSink& sink, int index, const Handle::Update& u);
  bool send_failure(httplib::DataSink& sink, const std::string& error);
  bool send_finish(httplib::DataSink& sink, int index, const std::string& finish_reason);
  bool send_done(httplib::DataSink& sink);
  bool send(httplib::DataSink& sink, const nlohmann::json& data);
  bool write(httplib::DataSink& sink, const std::string& text);

  ParsedRequest request_;
  Choices choices_;
  std::string id_;
  int64_t created_;
  bool sent_roles_ = false;
};

}  // namespace kvlab::server
