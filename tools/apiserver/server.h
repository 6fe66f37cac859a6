// The stand-in's HTTP front: kube-apiserver's REST paths, discovery, watch streams, the
// subresources kgpu uses, authentication, and the fault-injection endpoints tests drive.
//
// Routes (group "" is /api/v1, any other /apis/<group>/<version>):
//   GET    <gv>/[namespaces/<ns>/]<plural>[?watch=1]     list or watch
//   POST   <gv>/[namespaces/<ns>/]<plural>               create
//   GET|PUT|PATCH|DELETE <gv>/[namespaces/<ns>/]<plural>/<name>[/status]
//   POST   /api/v1/namespaces/<ns>/pods/<name>/binding
//   GET    /api/v1/namespaces/<ns>/pods/<name>/log
//   GET    /api/v1/namespaces/<ns>/pods/<[scheme:]name[:port]>/proxy[/<path>]   forwarded to status.podIP
//   /version /api /apis /apis/<group> <gv> /openapi/v3[/...] /healthz /livez /readyz
//   /standin/v1/faults (POST), /standin/v1/logs/<ns>/<pod>/<container> (PUT),
//   /standin/v1/requests (GET: the last requests served, for tests to assert on)
//
// Thread safety: the server runs its handlers on a fixed pool of threads; a watch holds one
// thread for its lifetime (the pool size bounds concurrent watches).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "resources.h"
#include "store.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace kgpu::apiserver {

// Answers res with a Kubernetes Status object (code, reason, message).
void send_status(httplib::Response& res, int code, std::string_view reason, std::string message);

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (see Server::port())
  bool tls = false;
  std::string cert_file, key_file;  // server certificate and key (PEM), when tls
  std::string client_ca_file;       // verifies client certificates, when tls
  std::vector<std::string> tokens;  // accepted bearer tokens; none and no TLS: anonymous access
  size_t threads = 256;
  size_t history = 10'000;
  int bookmark_interval_ms = 60'000;
  size_t max_body_bytes = 3 << 20;  // kube-apiserver's request limit
  int proxy_timeout_ms = 30'000;    // pods/proxy: connecting to and reading from the pod
  size_t proxy_max_body_bytes = 64 << 20;
};

struct Fault {
  std::string method;  // empty: any
  std::string path;    // substring of the path; empty: any (never the /standin/ endpoints)
  int status = 0;      // 0: no error answer (delay only)
  int retry_after_s = -1;
  int delay_ms = 0;
  int times = 1;  // how many requests it applies to; -1: until cleared
};

class Server {
 public:
  Server(Registry registry, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Store& store() { return store_; }
  const Registry& registry() const { return registry_; }

  // Binds the listening socket; returns an error message, empty on success.
  std::string bind();
  int port() const { return port_; }
  std::string url() const;
  // Serves until stop(); blocks.
  void run();
  void stop();

  // Fault injection (also reachable over HTTP).
  void add_fault(Fault f);
  void drop_watches();

 private:
  struct Request;
  void handle(const httplib::Request& req, httplib::Response& res, const std::string& method);
  bool authenticate(const httplib::Request& req, httplib::Response& res, std::string& user);
  bool apply_faults(const httplib::Request& req, httplib::Response& res, const std::string& method);
  void handle_standin(const httplib::Request& req, httplib::Response& res, const std::string& method);
  void serve_watch(const Request& r, const httplib::Request& req, httplib::Response& res);
  void serve_log(const Request& r, const httplib::Request& req, httplib::Response& res);
  // pods/proxy: `id` is "[scheme:]name[:port]", `rest` the path after /proxy ("" or "/...").
  void serve_proxy(const std::string& ns, const std::string& id, const std::string& rest,
                   const httplib::Request& req, httplib::Response& res, const std::string& method);
  void note_request(const std::string& method, const httplib::Request& req, int code);

  Registry registry_;
  ServerOptions options_;
  Store store_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> watch_generation_{0};

  std::mutex mu_;  // guards faults_, logs_, requests_
  std::vector<Fault> faults_;
  std::map<std::string, std::string> logs_;  // "ns/pod/container" -> text
  std::deque<nlohmann::json> requests_;
};

}  // namespace kgpu::apiserver
