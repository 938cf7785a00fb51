#include "server/web_files.h"

#include <fstream>
#include <sstream>

#include "server/web_assets.h"

namespace kvlab::server {

void serve_asset(const std::string& name, http::Response& res) {
  for (const WebAsset& a : web_assets())
    if (a.name == name) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_content(std::string(a.body), std::string(a.content_type));
      return;
    }
  res.status = 404;
}

// Chart.js from Debian's libjs-chart.js (3.9, whose UMD build defines
// window.Chart), read at each request rather than embedded: the package owns
// and updates it, and the page says so when it is not installed.
constexpr const char* kChartJs = "/usr/share/javascript/chart.js/chart.min.js";

void serve_chart_js(http::Response& res) {
  res.set_header("X-Content-Type-Options", "nosniff");
  std::ifstream in(kChartJs, std::ios::binary);
  if (!in) {
    res.status = 404;
    res.set_content(std::string("/* Chart.js is not installed on the server (") + kChartJs +
                        "): install Debian's libjs-chart.js */\n",
                    "text/javascript; charset=utf-8");
    return;
  }
  std::ostringstream body;
  body << in.rdbuf();
  res.set_header("Cache-Control", "max-age=3600");
  res.set_content(body.str(), "text/javascript; charset=utf-8");
}

}  // namespace kvlab::server
