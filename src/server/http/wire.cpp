#include "server/http/wire.h"

// Boost 1.74's status.hpp uses std::ostream without including it.
#include <ostream>

#include <boost/beast/http/status.hpp>
#include <cstdio>

namespace kvlab::server::http {

namespace {

std::string status_line(int status, bool http10) {
  const auto reason = boost::beast::http::obsolete_reason(boost::beast::http::int_to_status(unsigned(status)));
  return std::string(http10 ? "HTTP/1.0 " : "HTTP/1.1 ") + std::to_string(status) + " " +
         std::string(reason.data(), reason.size()) + "\r\n";
}

const char* connection_field(const HeadFormat& f) {
  if (!f.keep_alive) return "Connection: close\r\n";
  // HTTP/1.1 keeps the connection by default; HTTP/1.0 only when told.
  return f.http10 ? "Connection: keep-alive\r\n" : "";
}

}  // namespace

std::string format_head(const Response& res, const HeadFormat& format) {
  std::string head = status_line(res.status, format.http10);
  for (const auto& [name, value] : res.headers) head += name + ": " + value + "\r\n";
  if (format.framing == Framing::Length) head += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  if (format.framing == Framing::Chunked) head += "Transfer-Encoding: chunked\r\n";
  head += connection_field(format);
  head += "\r\n";
  return head;
}

std::string format_chunk(std::string_view data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string chunk(size);
  chunk.append(data);
  chunk += "\r\n";
  return chunk;
}

}  // namespace kvlab::server::http
