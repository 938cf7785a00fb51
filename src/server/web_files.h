// The web page's files as responses: those compiled in (server/web_assets.h)
// and Chart.js from its Debian package.
#pragma once
#include <string>

#include "server/http/message.h"

namespace kvlab::server {

// The embedded file `name`, or a 404.
void serve_asset(const std::string& name, http::Response& res);
// Chart.js from Debian's libjs-chart.js, or a 404 that says to install it.
void serve_chart_js(http::Response& res);

}  // namespace kvlab::server
