#include "server/http/reply.h"

namespace kvlab::server::http {

using Then = Outbox::Then;

Reply::Reply(std::shared_ptr<Outbox> out, HeadFormat format, bool head_only)
    : out_(std::move(out)), format_(format), head_only_(head_only) {}

Then Reply::after_last() const { return format_.keep_alive ? Then::NextRequest : Then::Close; }

void Reply::start_stream() {
  streaming_ = true;
  if (format_.http10) {
    format_.framing = Framing::UntilClose;
    format_.keep_alive = false;
  } else {
    format_.framing = Framing::Chunked;
  }
  out_->push(format_head(res, format_), head_only_ ? after_last() : Then::More, false);
}

bool Reply::write(std::string_view data) {
  if (data.empty() || head_only_) return !client_gone();
  std::string piece = format_.framing == Framing::Chunked ? format_chunk(data) : std::string(data);
  return out_->push(std::move(piece), Then::More, true);
}

void Reply::finish() {
  if (head_only_ && streaming_) return;  // start_stream() sent all there is
  if (streaming_) {
    out_->push(format_.framing == Framing::Chunked ? std::string(kLastChunk) : std::string(), after_last(), false);
    return;
  }
  format_.framing = Framing::Length;
  std::string bytes = format_head(res, format_);
  if (!head_only_) bytes += res.body;
  out_->push(std::move(bytes), after_last(), false);
}

}  // namespace kvlab::server::http
