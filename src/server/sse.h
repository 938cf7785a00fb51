// Server-sent events as OpenAI streams use them: the framing of one event,
// opening an event stream on a reply, and SseStream, the event stream of one
// streaming completion.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/choices.h"
#include "server/http/reply.h"
#include "server/openai_api.h"
#include "server/tool_call_stream.h"

namespace kvlab::server {

namespace sse {

inline std::string event(const std::string& data) { return "data: " + data + "\n\n"; }
inline std::string done() { return "data: [DONE]\n\n"; }

// Starts `reply` as an event stream that no proxy buffers or caches; the
// events follow as reply.write()s.
void open(http::Reply& reply);

}  // namespace sse

// One streaming completion's events, sent as they come: for chat, first each
// choice's role delta; then each choice's text (with its logprobs) as the
// scheduler produces it, each choice's finish chunk, the usage chunk when
// asked for, and [DONE]. A failed choice ends the stream with an error event
// and [DONE]. A client that goes (a failed write, or one the HTTP layer saw
// leave) cancels the choices, which frees their slots at the scheduler's next
// step.
class SseStream {
 public:
  SseStream(ParsedRequest request, Choices choices, std::string id, int64_t created);
  // Streams the choices as the answer of `reply`, until [DONE] or the
  // client's going; blocking.
  void run(http::Reply& reply);

 private:
  // Sends what is new, waiting up to 100 ms for it. False when the client has gone.
  bool pump(http::Reply& reply);
  bool send_roles(http::Reply& reply);
  bool send_update(http::Reply& reply, int index, const Handle::Update& u);
  // tools: a choice whose text starts with the tool-call marker goes out as
  // delta.tool_calls instead of content (server/tool_call_stream.h).
  bool is_tool_call(int index, const Handle::Update& u);
  bool send_tool_call(http::Reply& reply, int index, const Handle::Update& u);
  bool send_failure(http::Reply& reply, const std::string& error);
  bool send_finish(http::Reply& reply, int index, const std::string& finish_reason);
  bool send_done(http::Reply& reply);
  bool send(http::Reply& reply, const nlohmann::json& data);

  ParsedRequest request_;
  Choices choices_;
  std::string id_;
  int64_t created_;
  bool finished_ = false;  // [DONE] is sent
  std::vector<std::optional<ToolCallStream>> calls_;  // per choice, once its text starts a tool call
  std::vector<bool> text_sent_;                       // per choice: its text has started as content
};

}  // namespace kvlab::server
