// An HTTP request as the routes see it and the response they fill: plain
// values, so that handlers need nothing of the HTTP library.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvlab::server::http {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;    // "GET", "POST", ...
  std::string path;      // percent-decoded, without the query
  Fields query;          // decoded name=value pairs, in order
  Fields headers;        // as received
  std::string body;
  std::vector<std::string> captures;  // the matching route's groups
  bool http10 = false;

  // The first header of this name (case-insensitive), if any.
  std::optional<std::string> header(std::string_view name) const;
  // The first query parameter of this name, if any.
  std::optional<std::string> param(std::string_view name) const;
};

struct Response {
  int status = 200;
  Fields headers;  // besides the framing ones (Content-Length, Connection, ...)
  std::string body;

  // Replaces any header of this name.
  void set_header(std::string_view name, std::string value);
  void set_content(std::string content, std::string content_type);
};

// The API's error answer for a status the HTTP layer itself decides (400,
// 404, 405, 413, 431, 500, 503); `message` empty: one that names the status.
using ErrorPage = std::function<Response(int status, const std::string& message)>;

bool iequals(std::string_view a, std::string_view b);

}  // namespace kvlab::server::http
