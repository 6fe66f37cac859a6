// kgpu::HttpServer (libmicrohttpd) on its own: routing, methods, bodies, workers and the
// connection and header limits, spoken to over raw sockets.
#include "common/http_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>
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

std::string post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: a\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// A handler that holds its worker until release() (at most 10 s, so a failing test ends).
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; });
  }
  void until_waiting(int n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ >= n; });
  }
  void release() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

TEST(HttpServer, BodyRoutesPrefixesAndTheirLimits) {
  HttpServerOptions o;
  o.max_body_bytes = 1000;
  o.workers = 2;
  HttpServer server(o);
  server.handle("POST", "/echo", [](const HttpRequest& r) { return text("got " + std::to_string(r.body.size()) + ":" + std::string(r.body.substr(0, 5))); });
  server.handle("GET", "/items/", [](const HttpRequest& r) { return text("item " + std::string(r.tail)); }, true);
  server.handle("POST", "/boom", [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("the bug"); });
  const int port = serve_hello(server);
  ASSERT_NE(port, 0);
  EXPECT_THAT(ask(port, post("/echo", "hello world")).value_or(""), HasSubstr("got 11:hello"));
  EXPECT_THAT(ask(port, post("/echo", std::string(1000, 'x'))).value_or(""), HasSubstr("got 1000:xxxxx"));
  const auto chunked = ask(port, "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                 "5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n");
  EXPECT_THAT(chunked.value_or(""), HasSubstr("got 8:hello"));
  // Beyond the limit: refused from Content-Length before the body, or while a chunked body arrives.
  EXPECT_EQ(status_of(ask(port, post("/echo", std::string(1001, 'x')))), 413);
  EXPECT_EQ(status_of(ask(port, "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n")), 413);
  std::string big = "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) big += "1f4\r\n" + std::string(500, 'y') + "\r\n";
  EXPECT_EQ(status_of(ask(port, big + "0\r\n\r\n")), 413);
  EXPECT_THAT(ask(port, "GET /items/gpu-7 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").value_or(""), HasSubstr("item gpu-7"));
  EXPECT_EQ(status_of(get(port, "/hello")), 200) << "route() pages stay as they were";
  EXPECT_EQ(status_of(ask(port, post("/hello", "x"))), 405);
  const auto put = ask(port, "PUT /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(status_of(put), 405);
  EXPECT_THAT(put.value_or(""), HasSubstr("Allow: GET, HEAD, POST"));
  const auto boom = ask(port, post("/boom", "{}"));
  EXPECT_EQ(status_of(boom), 500);
  EXPECT_THAT(boom.value_or(""), HasSubstr("the bug"));
  // A GET page takes no body, also where body routes exist.
  EXPECT_EQ(status_of(ask(port, "GET /hello HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")), 413);
}

// Address space of this process, KiB (untouched reservations count here, not in RSS).
long self_vm_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.starts_with("VmSize:")) return std::stol(line.substr(7));
  return 0;
}

// Announcing a large body reserves nothing until it arrives: 50 connections each declaring 60 MiB
// (3 GiB if reserved) and sending 3 bytes leave the process's address space nearly where it was.
TEST(HttpServer, ADeclaredLengthCostsNothingUntilItArrives) {
  HttpServerOptions o;
  o.max_body_bytes = 64u << 20;
  o.workers = 1;
  HttpServer server(o);
  server.handle("POST", "/verb", [](const HttpRequest& r) { return text(std::to_string(r.body.size())); });
  const int port = serve_hello(server);
  ASSERT_NE(port, 0);
  const long before = self_vm_kib();
  std::vector<int> held;
  for (int i = 0; i < 50; ++i) {
    const int fd = connect_to(port);
    const std::string part = "POST /verb HTTP/1.1\r\nHost: a\r\nContent-Length: 62914560\r\n\r\nabc";
    ASSERT_EQ(::write(fd, part.data(), part.size()), static_cast<ssize_t>(part.size()));
    held.push_back(fd);
  }
  for (int i = 0; i < 500 && server.connections() < 50; ++i) usleep(10'000);
  EXPECT_EQ(server.connections(), 50u);
  EXPECT_LT(self_vm_kib() - before, 1024 * 1024) << "KiB of address space for 50 announced 60 MiB bodies";
  EXPECT_THAT(ask(port, post("/verb", std::string(3u << 20, 'z'))).value_or(""), HasSubstr("\r\n\r\n3145728"))
      << "a large body that does arrive is taken whole";
  for (int fd : held) close(fd);
}

TEST(HttpServer, SaturatedWorkersAnswer503AtOnceWhileProbesStayServed) {
  HttpServerOptions o;
  o.max_body_bytes = 100;
  o.workers = 1;
  o.max_queued = 1;
  HttpServer server(o);
  Gate gate;
  std::atomic<int> ran{0};
  server.handle("POST", "/slow", [&](const HttpRequest&) {
    gate.wait();
    ++ran;
    return text("done");
  });
  const int port = serve_hello(server);
  ASSERT_NE(port, 0);
  auto first = std::async(std::launch::async, [&] { return ask(port, post("/slow", "1"), std::chrono::seconds(15)); });
  gate.until_waiting(1);  // the worker is held
  auto second = std::async(std::launch::async, [&] { return ask(port, post("/slow", "2"), std::chrono::seconds(15)); });
  for (int i = 0; i < 500 && server.queued() < 1; ++i) usleep(10'000);
  ASSERT_EQ(server.queued(), 1u) << "the second waits for the worker";
  const auto t0 = std::chrono::steady_clock::now();
  const auto third = ask(port, post("/slow", "3"));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(status_of(third), 503);
  EXPECT_THAT(third.value_or(""), HasSubstr("Retry-After: 1"));
  EXPECT_LT(waited, std::chrono::seconds(3)) << "refused at once, not after the worker";
  EXPECT_EQ(status_of(get(port, "/hello")), 200) << "a route() page is answered by the server's thread";
  gate.release();
  EXPECT_EQ(status_of(first.get()), 200);
  EXPECT_EQ(status_of(second.get()), 200);
  EXPECT_EQ(ran.load(), 2);
}

TEST(HttpServer, IdleAndSlowConnectionsHoldNoWorker) {
  HttpServerOptions o;
  o.max_body_bytes = 100;
  o.workers = 2;
  HttpServer server(o);
  server.handle("POST", "/verb", [](const HttpRequest& r) { return text(std::string(r.body)); });
  const int port = serve_hello(server);
  ASSERT_NE(port, 0);
  std::vector<int> held;
  for (int i = 0; i < 200; ++i) held.push_back(connect_to(port));  // idle
  for (int i = 0; i < 50; ++i) {  // half-sent headers, and a half-sent body
    const int fd = connect_to(port);
    const std::string part = i % 2 == 0 ? "POST /verb HTTP/1.1\r\nHost: a\r\nX-slow: "
                                        : "POST /verb HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\n\r\nabc";
    ASSERT_EQ(::write(fd, part.data(), part.size()), static_cast<ssize_t>(part.size()));
    held.push_back(fd);
  }
  for (int i = 0; i < 500 && server.connections() < 250; ++i) usleep(10'000);
  EXPECT_EQ(server.connections(), 250u);
  for (int i = 0; i < 20; ++i) {
    const auto r = ask(port, post("/verb", "ping" + std::to_string(i)), std::chrono::seconds(2));
    ASSERT_EQ(status_of(r), 200) << i;
    EXPECT_THAT(r.value_or(""), HasSubstr("ping" + std::to_string(i)));
  }
  for (int fd : held) close(fd);
}

TEST(HttpServer, SilentConnectionsAreClosedAfterTheIdleTimeout) {
  HttpServerOptions o;
  o.idle_timeout = std::chrono::seconds(1);
  HttpServer server(o);
  const int port = serve_hello(server);
  ASSERT_NE(port, 0);
  const int fd = connect_to(port);
  const std::string part = "GET /hello HTTP/1.1\r\nHost: a\r\n";  // headers never finished
  ASSERT_EQ(::write(fd, part.data(), part.size()), static_cast<ssize_t>(part.size()));
  for (int i = 0; i < 500 && server.connections() < 1; ++i) usleep(10'000);
  EXPECT_EQ(server.connections(), 1u);
  char c;
  // The server closes it: read() sees the end (bounded by the test's own 10 s).
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  EXPECT_LE(::read(fd, &c, 1), 0);
  for (int i = 0; i < 500 && server.connections() > 0; ++i) usleep(10'000);
  EXPECT_EQ(server.connections(), 0u);
  close(fd);
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
