// A small HTTP/1.1 server for the agent's endpoints (/metrics, /health, /ready), on libmicrohttpd.
//
// One event-driven thread (epoll) serves every connection, so idle or slow clients cost a file
// descriptor and a bounded buffer, never a worker: a scrape is answered while any number of
// connections up to `max_connections` sit idle. Every request is bounded before a handler sees it:
//   - request line and headers together fit in `max_header_bytes`, else 431 and the connection
//     is closed (the buffer is per connection and released with it);
//   - request bodies are not accepted (413 for any body, 405 for methods other than GET/HEAD);
//   - a connection idle for `idle_timeout` is closed; a request on a connection beyond
//     `max_connections` is answered 503 (Retry-After: 1) and closed; beyond 64 more, connections
//     are closed at accept.
// Responses go out in one write where the socket allows it, with TCP_NODELAY set, so a kept-alive
// scrape never waits on the client's delayed ACK.
//
// Threads: handlers run on the server's thread, one at a time; they must be quick (copy a
// prepared page, never call NVML or the kubelet). start()/stop() from one thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/error.h"

namespace kgpu {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  // Shared so a prepared page is sent without a copy.
  std::shared_ptr<const std::string> body;
};

struct HttpServerOptions {
  unsigned max_connections = 2048;
  size_t max_header_bytes = 16 * 1024;
  std::chrono::seconds idle_timeout{120};
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse()>;

  explicit HttpServer(HttpServerOptions options = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers `handler` for GET and HEAD of exactly `path` (no query matching). Before start().
  void route(std::string path, Handler handler);

  // Binds host:port (port 0: one the system chooses) and starts serving. Returns the bound port.
  // Errors name the address and the system's reason.
  Result<int> start(const std::string& host, int port);
  // Stops accepting, closes every connection and joins the thread. Idempotent.
  void stop();

  // Connections open now (for the agent's own metrics and tests).
  unsigned connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kgpu
