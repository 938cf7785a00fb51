#include "server/sse.h"

#include <httplib.h>

#include <chrono>
#include <memory>

namespace kvlab::server {

void sse::open(httplib::Response& res, Provider provider, Released released) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", std::move(provider), std::move(released));
}

void SseStream::start(httplib::Response& res, ParsedRequest request, Choices choices, std::string id,
                      int64_t created) {
  auto stream = std::make_shared<SseStream>(std::move(request), std::move(choices), std::move(id), created);
  sse::open(
      res, [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
      [stream](bool success) { stream->release(success); });
}

SseStream::SseStream(ParsedRequest request, Choices choices, std::string id, int64_t created)
    : request_(std::move(request)), choices_(std::move(choices)), id_(std::move(id)), created_(created) {}

bool SseStream::pump(httplib::DataSink& sink) {
  if (request_.endpoint == Endpoint::Chat && !sent_roles_) {
    sent_roles_ = true;
    return send_roles(sink);
  }
  const auto news = choices_.next(std::chrono::milliseconds(100));
  if (!news) return true;  // nothing yet; httplib calls again
  const auto& [index, u] = *news;
  return send_update(sink, index, u);
}

void SseStream::release(bool success) {
  if (!success) choices_.cancel();
}

bool SseStream::send_roles(httplib::DataSink& sink) {
  for (int i = 0; i < choices_.size(); ++i)
    if (!send(sink, stream_chunk(request_, id_, created_, i, "", "", true))) return false;
  return true;
}

bool SseStream::send_update(httplib::DataSink& sink, int index, const Handle::Update& u) {
  if ((!u.text.empty() || !u.logprobs.empty()) &&
      !send(sink, stream_chunk(request_, id_, created_, index, u.text, "", false, u.logprobs)))
    return false;
  if (!u.done) return true;
  if (u.finish_reason == "error") return send_failure(sink, u.error);
  return send_finish(sink, index, u.finish_reason);
}

// One failed choice ends the stream: the error, then [DONE].
bool SseStream::send_failure(httplib::DataSink& sink, const std::string& error) {
  choices_.cancel();
  return send(sink, ApiError{500, error, "server_error", "", "generation_failed"}.body()) && send_done(sink);
}

bool SseStream::send_finish(httplib::DataSink& sink, int index, const std::string& finish_reason) {
  if (!send(sink, stream_chunk(request_, id_, created_, index, "", finish_reason, false))) return false;
  if (!choices_.all_done()) return true;
  if (request_.include_usage && !send(sink, usage_chunk(request_, id_, created_, choices_.timings()))) return false;
  return send_done(sink);
}

bool SseStream::send_done(httplib::DataSink& sink) {
  if (!write(sink, sse::done())) return false;
  sink.done();
  return true;
}

bool SseStream::send(httplib::DataSink& sink, const nlohmann::json& data) { return write(sink, sse::event(dump(data))); }

bool SseStream::write(httplib::DataSink& sink, const std::string& text) {
  if (sink.write(text.data(), text.size())) return true;
  choices_.cancel();
  return false;
}

}  // namespace kvlab::server
