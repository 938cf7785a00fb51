// The routing table: which handler answers a method and path, and where it
// runs. A path that some route knows under other methods is a 405 with the
// methods it allows, not a 404.
#pragma once
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "server/http/message.h"
#include "server/http/reply.h"

namespace kvlab::server::http {

// Handlers that answer at once run on the I/O thread; those that may block
// (waiting on the engine, a measurement, a tokenization of a big body) on a
// worker, so that they never hold up other connections.
enum class Runs { OnIoThread, OnWorker };

using Handler = std::function<void(const Request&, Reply&)>;

struct Route {
  std::string method;
  std::string path;                  // exact, unless `pattern` is set
  std::optional<std::regex> pattern;  // matched against the whole path; its groups are the captures
  Runs runs;
  Handler handler;
};

class Router {
 public:
  void add(std::string method, std::string path, Runs runs, Handler handler);
  void add_pattern(std::string method, const std::string& pattern, Runs runs, Handler handler);

  struct Match {
    const Route* route = nullptr;  // null: no route for this method
    std::string allow;             // then the methods the path has ("GET, HEAD"); empty: 404
  };
  // The first route in the order added that matches; fills req.captures.
  // HEAD is answered by the GET route.
  Match find(Request& req) const;

 private:
  static bool matches(const Route& r, const std::string& path, std::vector<std::string>* captures);

  std::vector<Route> routes_;
};

}  // namespace kvlab::server::http
