// The API's error answers ({"error":{"message","type","param","code"}}) on
// HTTP responses: those the handlers give, and those the HTTP layer itself
// decides (http::ErrorPage).
#pragma once
#include <optional>
#include <string>

#include "server/http/message.h"
#include "server/openai_api.h"

namespace kvlab::server {

void send_error(http::Response& res, const ApiError& e);
void send_error(http::Response& res, int status, std::string message, std::string type, std::string code,
                std::string param = {});

// The HTTP layer's own errors (404, 405, 413, 431, 500, 503, ...) in the
// API's shape; a 503 says when to retry.
http::Response error_page(int status, const std::string& message);

// What `parse` returns, or nullopt once the ApiException it threw is answered.
template <class Parse>
auto parsed(http::Response& res, Parse&& parse) -> std::optional<decltype(parse())> {
  try {
    return parse();
  } catch (const ApiException& e) {
    send_error(res, e.err);
    return std::nullopt;
  }
}

// Answers with the JSON text `body` returns, or with the ApiException it threw.
template <class Body>
void json_reply(http::Response& res, Body&& body) {
  try {
    res.set_content(body(), "application/json");
  } catch (const ApiException& e) {
    send_error(res, e.err);
  }
}

}  // namespace kvlab::server
