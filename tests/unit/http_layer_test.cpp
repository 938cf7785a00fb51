// The HTTP layer's pieces that need no socket: request-target decoding,
// routing (404, 405 with Allow, HEAD, captures), response bytes, and the
// Outbox's bound on unwritten output.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "server/http/outbox.h"
#include "server/http/router.h"
#include "server/http/target.h"
#include "server/http/wire.h"

namespace kvlab::server::http {
namespace {

TEST(HttpTarget, DecodesPathAndQuery) {
  Request req;
  parse_target("/api/race%2F?prompt=Once+upon%20a%2Btime&n=4&&flag", req);
  EXPECT_EQ(req.path, "/api/race/");
  ASSERT_EQ(req.query.size(), 3u);
  EXPECT_EQ(req.param("prompt"), "Once upon a+time");
  EXPECT_EQ(req.param("n"), "4");
  EXPECT_EQ(req.param("flag"), "");
  EXPECT_FALSE(req.param("missing"));
  EXPECT_EQ(percent_decode("100%", false), "100%");  // a lone % stays
  EXPECT_EQ(percent_decode("%zz+", false), "%zz+");
}

Request request(std::string method, std::string path) {
  Request req;
  req.method = std::move(method);
  req.path = std::move(path);
  return req;
}

Router test_router() {
  Router r;
  r.add("GET", "/health", Runs::OnIoThread, [](const Request&, Reply&) {});
  r.add("POST", "/v1/completions", Runs::OnWorker, [](const Request&, Reply&) {});
  r.add_pattern("GET", "/v1/models/(.+)", Runs::OnIoThread, [](const Request&, Reply&) {});
  return r;
}

TEST(HttpRouter, FindsRoutesAndSaysWhichMethodsAPathAllows) {
  const Router router = test_router();
  Request get = request("GET", "/v1/models/llama");
  EXPECT_TRUE(router.find(get).route);
  EXPECT_EQ(get.captures, std::vector<std::string>{"llama"});
  Request head = request("HEAD", "/health");
  EXPECT_TRUE(router.find(head).route);
  Request post = request("POST", "/health");
  const Router::Match wrong = router.find(post);
  EXPECT_FALSE(wrong.route);
  EXPECT_EQ(wrong.allow, "GET, HEAD");
  Request get_post_only = request("GET", "/v1/completions");
  EXPECT_EQ(router.find(get_post_only).allow, "POST");
  Request unknown = request("GET", "/nope");
  EXPECT_EQ(router.find(unknown).allow, "");
}

TEST(HttpWire, FramesHeadsAndChunks) {
  Response res;
  res.set_content("{}", "application/json");
  EXPECT_EQ(format_head(res, {}), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n");
  res.status = 413;
  EXPECT_EQ(format_head(res, HeadFormat{.http10 = true, .keep_alive = false, .framing = Framing::UntilClose}),
            "HTTP/1.0 413 Payload Too Large\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n");
  res.status = 200;
  EXPECT_EQ(format_head(res, HeadFormat{.framing = Framing::Chunked}),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(format_chunk(std::string(26, 'x')), "1a\r\n" + std::string(26, 'x') + "\r\n");
}

TEST(HttpOutbox, AWriterWaitsWhileTooMuchIsUnwrittenAndStopsWhenTheClientGoes) {
  std::atomic<bool> stopping{false};
  std::atomic<size_t> delivered{0};
  Outbox out([&](std::string bytes, Outbox::Then) { delivered += bytes.size(); }, 10, stopping);
  EXPECT_TRUE(out.push(std::string(12, 'a'), Outbox::Then::More, true));  // under the bound before it
  std::atomic<bool> second{false};
  std::thread writer([&] { second = out.push("b", Outbox::Then::More, true); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(delivered.load(), 12u);  // the second waits for room
  out.written(12);
  writer.join();
  EXPECT_TRUE(second);
  EXPECT_TRUE(out.push(std::string(20, 'c'), Outbox::Then::More, true));
  std::thread stuck([&] { second = out.push("d", Outbox::Then::More, true); });
  out.close();
  stuck.join();
  EXPECT_FALSE(second);
  EXPECT_FALSE(out.push("e", Outbox::Then::NextRequest, false));
}

}  // namespace
}  // namespace kvlab::server::http
