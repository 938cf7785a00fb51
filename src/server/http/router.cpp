#include "server/http/router.h"

#include <algorithm>

namespace kvlab::server::http {

void Router::add(std::string method, std::string path, Runs runs, Handler handler) {
  routes_.push_back(Route{std::move(method), std::move(path), std::nullopt, runs, std::move(handler)});
}

void Router::add_pattern(std::string method, const std::string& pattern, Runs runs, Handler handler) {
  routes_.push_back(Route{std::move(method), pattern, std::regex(pattern), runs, std::move(handler)});
}

bool Router::matches(const Route& r, const std::string& path, std::vector<std::string>* captures) {
  if (!r.pattern) return r.path == path;
  std::smatch m;
  if (!std::regex_match(path, m, *r.pattern)) return false;
  if (captures) captures->assign(m.begin() + 1, m.end());
  return true;
}

Router::Match Router::find(Request& req) const {
  const std::string& method = req.method == "HEAD" ? std::string("GET") : req.method;
  std::vector<std::string> allowed;
  for (const Route& r : routes_) {
    if (r.method == method && matches(r, req.path, &req.captures)) return Match{&r, {}};
    if (matches(r, req.path, nullptr)) allowed.push_back(r.method);
  }
  if (std::find(allowed.begin(), allowed.end(), "GET") != allowed.end()) allowed.push_back("HEAD");
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
  Match m;
  for (const std::string& a : allowed) m.allow += (m.allow.empty() ? "" : ", ") + a;
  return m;
}

}  // namespace kvlab::server::http
