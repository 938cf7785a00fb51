#include "server/api_errors.h"

namespace kvlab::server {

namespace {

std::string status_message(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "request body too large";
    case 414: return "request URI too long";
    case 431: return "request header fields too large";
    default: return "HTTP error " + std::to_string(status);
  }
}

std::string error_code(int status) {
  switch (status) {
    case 404: return "not_found";
    case 413: return "payload_too_large";
    case 500: return "internal_error";
    case 503: return "server_busy";
    default: return "";
  }
}

}  // namespace

void send_error(http::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.body()), "application/json");
}

void send_error(http::Response& res, int status, std::string message, std::string type, std::string code,
                std::string param) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  e.param = std::move(param);
  send_error(res, e);
}

http::Response error_page(int status, const std::string& message) {
  http::Response res;
  send_error(res, status, message.empty() ? status_message(status) : message,
             status >= 500 ? "server_error" : "invalid_request_error", error_code(status));
  if (status == 503) res.set_header("Retry-After", "1");
  return res;
}

}  // namespace kvlab::server
