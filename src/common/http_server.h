// A small HTTP/1.1 server on libmicrohttpd: the agent's endpoints (/metrics, /health, /ready) and
// the scheduler extender's verbs (/filter, /bind, ...).
//
// One event-driven thread (epoll) serves every connection, so idle or slow clients cost a file
// descriptor and a bounded buffer, never a worker: a request is answered while any number of
// connections up to `max_connections` sit idle or trickle bytes. Every request is bounded before a
// handler sees it:
//   - request line and headers together fit in `max_header_bytes`, else 431 and the connection
//     is closed (the buffer is per connection and released with it);
//   - a request body is accepted only by a route registered with handle() and only up to
//     `max_body_bytes` (413 and close beyond, from Content-Length before any byte is read, or while
//     a chunked body arrives); GET and HEAD routes take no body (413); an unregistered method is 405;
//   - a connection idle for `idle_timeout` (no byte in either direction, also within a request's
//     headers or body) is closed; a request on a connection beyond `max_connections` is answered
//     503 (Retry-After: 1) and closed; beyond 64 more, connections are closed at accept.
// A request body is released when its response has been sent; after one larger than 1 MiB the
// heap's free memory goes back to the system (malloc_trim), so a large request leaves no RSS behind.
// Responses go out in one write where the socket allows it, with TCP_NODELAY set, so a kept-alive
// client never waits on its delayed ACK.
//
// With `workers` = 0, handlers run on the server's thread one at a time and must be quick (copy a
// prepared page, never call NVML or the kubelet). With `workers` > 0, handle() routes run on that
// many threads of their own while the server's thread goes on serving; at most `max_queued`
// requests wait for a worker, and a request beyond that is answered 503 (Retry-After: 1) at once
// instead of waiting. route() pages always run on the server's thread (probes stay answered while
// every worker is busy).
//
// With a web config file (common/web_config.h, the Prometheus exporter-toolkit format) the server
// also speaks TLS (GnuTLS through libmicrohttpd), asks for and verifies client certificates, checks
// basic-auth users (401 with `WWW-Authenticate: Basic` otherwise), adds the configured headers and
// answers 429 beyond the rate limit. `tls_cert_file`/`tls_key_file` without a web config serve TLS
// with that pair alone. The file and the files it names are checked for changes at most every
// `web_config_check` (on a new connection or request): a changed file is loaded and applies to the
// next handshake and request; a bad one is logged once (naming file, line and field) and the last
// good config keeps serving. TLS itself cannot be switched on or off while serving.
// A bcrypt check runs on the server's thread; answers are cached per user, hash and password, and
// at most `password_checks_per_second` uncached checks run a second (beyond: 429 with
// Retry-After: 1, no check), so a flood of made-up passwords cannot hold the thread.
//
// Threads: route() handlers on the server's thread; handle() handlers on the server's thread
// (workers = 0) or on any worker, concurrently. start()/stop() from one thread; stop() waits for
// running handlers. web_config_status(), connections() and queued() from any.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"

namespace kgpu {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  // Shared so a prepared page is sent without a copy.
  std::shared_ptr<const std::string> body;
};

// A request as a handle() route sees it. Views into the server's buffers: valid during the call.
struct HttpRequest {
  std::string_view method;
  std::string_view path;  // without the query
  std::string_view tail;  // for a prefix route: the path after the prefix; else ""
  std::string_view body;
};

struct HttpServerOptions {
  unsigned max_connections = 2048;
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 0;  // 0: no request bodies (the agent's pages)
  std::chrono::seconds idle_timeout{120};
  unsigned workers = 0;     // 0: handle() routes on the server's thread
  unsigned max_queued = 0;  // requests waiting for a busy worker; 0: 4 per worker
  std::string web_config_file;                       // "" = plain HTTP without authentication
  std::string tls_cert_file, tls_key_file;           // TLS without a web config (both, or neither)
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
  using RequestHandler = std::function<HttpResponse(const HttpRequest&)>;

  explicit HttpServer(HttpServerOptions options = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers `handler` for GET and HEAD of exactly `path` (no query matching). Before start().
  void route(std::string path, Handler handler);
  // Registers `handler` for `method` ("POST", "GET", ...) of exactly `path`, or of every path that
  // starts with it when `prefix` (the rest in HttpRequest::tail). Runs on a worker when there are
  // workers. An exception thrown by it is answered 500 with its text. Before start().
  void handle(std::string method, std::string path, RequestHandler handler, bool prefix = false);

  // Binds host:port (port 0: one the system chooses) and starts serving. Returns the bound port.
  // Errors name the address and the system's reason, or the web config's file, line and field.
  Result<int> start(const std::string& host, int port);
  // Stops accepting, closes every connection and joins the thread. Idempotent.
  void stop();

  // Connections open now (for the agent's own metrics and tests).
  unsigned connections() const;
  // Requests waiting for a worker now.
  unsigned queued() const;
  WebConfigStatus web_config_status() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kgpu
