// A request-target ("/path?name=value&...") split into its decoded path and
// query parameters.
#pragma once
#include <string>
#include <string_view>

#include "server/http/message.h"

namespace kvlab::server::http {

// Percent-decodes `text`; with `plus_is_space` (query strings, as HTML forms
// encode them) '+' becomes ' '. A '%' not followed by two hex digits stays.
std::string percent_decode(std::string_view text, bool plus_is_space);

// Fills req.path and req.query from `target`.
void parse_target(std::string_view target, Request& req);

}  // namespace kvlab::server::http
