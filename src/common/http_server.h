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
// With a web config file (common/web_config.h, the Prometheus exporter-toolkit format) the server
// also speaks TLS (GnuTLS through libmicrohttpd), asks for and verifies client certificates, checks
// basic-auth users (401 with `WWW-Authenticate: Basic` otherwise), adds the configured headers and
// answers 429 beyond the rate limit. The file and the files it names are checked for changes at
// most every `web_config_check` (on a new connection or request): a changed file is loaded and
// applies to the next handshake and request; a bad one is logged once (naming file, line and field)
// and the last good config keeps serving. TLS itself cannot be switched on or off while serving.
// A bcrypt check runs on the server's thread; answers are cached per user, hash and password, and
// at most `password_checks_per_second` uncached checks run a second (beyond: 429 with
// Retry-After: 1, no check), so a flood of made-up passwords cannot hold the thread.
//
// Threads: handlers run on the server's thread, one at a time; they must be quick (copy a
// prepared page, never call NVML or the kubelet). start()/stop() from one thread;
// web_config_status() and connections() from any.
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
  std::string web_config_file;                       // "" = plain HTTP without authentication
  std::chrono::milliseconds web_config_check{1000};  // how often, at most, its files are looked at
  double password_checks_per_second = 4;             // uncached bcrypt checks (also the burst)
};

struct WebConfigStatus {
  bool tls = false;
  unsigned long loads = 0;     // configs taken into service (the first included)
  unsigned long failures = 0;  // changed configs refused (the last good one kept serving)
  std::string last_error;      // "" once a good config is in service again
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
  // Errors name the address and the system's reason, or the web config's file, line and field.
  Result<int> start(const std::string& host, int port);
  // Stops accepting, closes every connection and joins the thread. Idempotent.
  void stop();

  // Connections open now (for the agent's own metrics and tests).
  unsigned connections() const;
  WebConfigStatus web_config_status() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kgpu
