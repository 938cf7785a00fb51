#include "server/http/message.h"

#include <algorithm>
#include <cctype>

namespace kvlab::server::http {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::optional<std::string> Request::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return std::nullopt;
}

std::optional<std::string> Request::param(std::string_view name) const {
  for (const auto& [n, v] : query)
    if (n == name) return v;
  return std::nullopt;
}

void Response::set_header(std::string_view name, std::string value) {
  std::erase_if(headers, [name](const auto& h) { return iequals(h.first, name); });
  headers.emplace_back(std::string(name), std::move(value));
}

void Response::set_content(std::string content, std::string content_type) {
  body = std::move(content);
  set_header("Content-Type", std::move(content_type));
}

}  // namespace kvlab::server::http
