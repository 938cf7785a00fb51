// The bytes of an HTTP/1.x response: its head (status line, fields and the
// framing fields) and the pieces of a chunked body.
#pragma once
#include <string>
#include <string_view>

#include "server/http/message.h"

namespace kvlab::server::http {

// How the body's end is known: its length, the last chunk (HTTP/1.1
// streams), or the connection's close (HTTP/1.0 streams: an HTTP/1.0
// client cannot read chunks).
enum class Framing { Length, Chunked, UntilClose };

struct HeadFormat {
  bool http10 = false;
  bool keep_alive = true;
  Framing framing = Framing::Length;
};

// Status line, res.headers, then Content-Length (Framing::Length: of
// res.body) or Transfer-Encoding, and Connection; ends with the blank line.
std::string format_head(const Response& res, const HeadFormat& format);

// One chunk of a chunked body (non-empty data: an empty chunk ends the body).
std::string format_chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// An interim answer that any HTTP/1.1 client skips (RFC 9110, 15.2).
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace kvlab::server::http
