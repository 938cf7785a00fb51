#include "server/sse.h"

#include <chrono>

#include "server/tool_calls.h"

namespace kvlab::server {

void sse::open(http::Reply& reply) {
  reply.res.set_header("Content-Type", "text/event-stream");
  reply.res.set_header("Cache-Control", "no-cache");
  reply.res.set_header("X-Accel-Buffering", "no");
  reply.start_stream();
}

SseStream::SseStream(ParsedRequest request, Choices choices, std::string id, int64_t created)
    : request_(std::move(request)),
      choices_(std::move(choices)),
      id_(std::move(id)),
      created_(created),
      calls_(size_t(choices_.size())),
      text_sent_(size_t(choices_.size()), false) {}

void SseStream::run(http::Reply& reply) {
  sse::open(reply);
  bool live = request_.endpoint != Endpoint::Chat || send_roles(reply);
  while (live && !finished_) live = pump(reply);
  if (!live) choices_.cancel();
}

bool SseStream::pump(http::Reply& reply) {
  const auto news = choices_.next(std::chrono::milliseconds(100));
  if (!news) return !reply.client_gone();
  const auto& [index, u] = *news;
  return send_update(reply, index, u);
}

bool SseStream::send_roles(http::Reply& reply) {
  for (int i = 0; i < choices_.size(); ++i)
    if (!send(reply, stream_chunk(request_, id_, created_, i, "", "", true))) return false;
  return true;
}

bool SseStream::is_tool_call(int index, const Handle::Update& u) {
  if (!request_.tool_format || text_sent_[size_t(index)]) return false;
  std::optional<ToolCallStream>& call = calls_[size_t(index)];
  if (!call && !u.text.empty()) {
    // Text may not start as a call does (server/tool_calls.h).
    if (u.text[0] == request_.tool_format->opening()[0]) call.emplace(*request_.tool_format);
    else text_sent_[size_t(index)] = true;
  }
  return call.has_value();
}

bool SseStream::send_tool_call(http::Reply& reply, int index, const Handle::Update& u) {
  ToolCallStream& call = *calls_[size_t(index)];
  for (const nlohmann::json& entry : call.feed(u.text))
    if (!send(reply, tool_call_chunk(request_, id_, created_, index, entry))) return false;
  if (!u.done) return true;
  if (u.finish_reason == "error") return send_failure(reply, u.error);
  return send_finish(reply, index, u.finish_reason == "stop" && call.done() ? "tool_calls" : u.finish_reason);
}

bool SseStream::send_update(http::Reply& reply, int index, const Handle::Update& u) {
  if (is_tool_call(index, u)) return send_tool_call(reply, index, u);
  if ((!u.text.empty() || !u.logprobs.empty()) &&
      !send(reply, stream_chunk(request_, id_, created_, index, u.text, "", false, u.logprobs)))
    return false;
  if (!u.done) return true;
  if (u.finish_reason == "error") return send_failure(reply, u.error);
  return send_finish(reply, index, u.finish_reason);
}

// One failed choice ends the stream: the error, then [DONE].
bool SseStream::send_failure(http::Reply& reply, const std::string& error) {
  choices_.cancel();
  return send(reply, ApiError{500, error, "server_error", "", "generation_failed"}.body()) && send_done(reply);
}

bool SseStream::send_finish(http::Reply& reply, int index, const std::string& finish_reason) {
  if (!send(reply, stream_chunk(request_, id_, created_, index, "", finish_reason, false))) return false;
  if (!choices_.all_done()) return true;
  if (request_.include_usage && !send(reply, usage_chunk(request_, id_, created_, choices_.timings()))) return false;
  return send_done(reply);
}

bool SseStream::send_done(http::Reply& reply) {
  finished_ = true;
  return reply.write(sse::done());
}

bool SseStream::send(http::Reply& reply, const nlohmann::json& data) { return reply.write(sse::event(dump(data))); }

}  // namespace kvlab::server
