// kgpu::HttpServer (libmicrohttpd) on its own: routing, methods, bodies and the connection and
// header limits, spoken to over raw sockets.
#include "common/http_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "raw_http.h"

namespace kgpu::testing {
namespace {

using ::testing::HasSubstr;

HttpResponse text(std::string body) {
  return {200, "text/plain", std::make_shared<const std::string>(std::move(body))};
}

// Serves "hi\n" on /hello on a port the system chooses; 0 (and a test failure) if it cannot start.
int serve_hello(HttpServer& server) {
  server.route("/hello", [] { return text("hi\n"); });
  auto port = server.start("127.0.0.1", 0);
  EXPECT_TRUE(port) << (port ? "" : port.error().message);
  return port.value_or(0);
}

TEST(HttpServer, RoutesMethodsAndBodies) {
  HttpServer server;
  server.route("/hello", [] { return text("hi\n"); });
  server.route("/boom", []() -> HttpResponse { throw std::runtime_error("bug"); });
  auto port = server.start("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error().message;
  ASSERT_GT(*port, 0);
  const auto hello = get(*port, "/hello");
  EXPECT_EQ(status_of(hello), 200);
  EXPECT_THAT(hello.value_or(""), HasSubstr("\r\n\r\nhi\n"));
  EXPECT_EQ(status_of(get(*port, "/hello?x=1")), 200) << "the query is not part of the path";
  EXPECT_EQ(status_of(get(*port, "/other")), 404);
  EXPECT_EQ(status_of(get(*port, "/boom")), 500);
  EXPECT_EQ(status_of(ask(*port, "DELETE /hello HTTP/1.1\r\nHost: a\r\n\r\n")), 405);
  EXPECT_EQ(status_of(ask(*port, "GET /hello HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")),
            413);
  server.stop();
  EXPECT_EQ(status_of(get(*port, "/hello")), -1) << "stopped: nothing answers";
}

TEST(HttpServer, ConnectionsBeyondTheLimitAre503) {
  HttpServerOptions o;
  o.max_connections = 8;
  HttpServer server(o);
  const int port = serve_hello(server);
  ASSERT_NE(port, 0);
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(connect_to(port));
  for (int i = 0; i < 100 && server.connections() < 8; ++i) usleep(10'000);
  ASSERT_EQ(server.connections(), 8u);
  const auto busy = get(port, "/hello");
  EXPECT_EQ(status_of(busy), 503);
  EXPECT_THAT(busy.value_or(""), HasSubstr("Retry-After: 1"));
  close(idle.back());
  idle.pop_back();
  for (int i = 0; i < 100 && server.connections() > 7; ++i) usleep(10'000);
  EXPECT_EQ(status_of(get(port, "/hello")), 200) << "a slot freed is served again";
  for (int fd : idle) close(fd);
}

TEST(HttpServer, HeadersBeyondTheLimitAre431) {
  HttpServerOptions o;
  o.max_header_bytes = 4096;
  HttpServer server(o);
  const int port = serve_hello(server);
  ASSERT_NE(port, 0);
  EXPECT_EQ(status_of(ask(port, "GET /hello HTTP/1.1\r\nHost: a\r\nX-a: " + std::string(1000, 'b') + "\r\n\r\n")), 200);
  EXPECT_EQ(status_of(ask(port, "GET /hello HTTP/1.1\r\nHost: a\r\nX-a: " + std::string(8000, 'b') + "\r\n\r\n")), 431);
}

TEST(HttpServer, BindErrorsNameTheAddress) {
  HttpServer first;
  auto port = first.start("127.0.0.1", 0);
  ASSERT_TRUE(port);
  HttpServer second;
  auto again = second.start("127.0.0.1", *port);
  ASSERT_FALSE(again);
  EXPECT_THAT(again.error().message, HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(*port)));
  EXPECT_THAT(again.error().message, HasSubstr("in use"));
  auto bad = second.start("no-such-host.invalid", 0);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("no-such-host.invalid"));
}

}  // namespace
}  // namespace kgpu::testing
