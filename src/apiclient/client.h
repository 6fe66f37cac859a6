// A Kubernetes API client over libcurl: the REST verbs kgpu needs, watches, typed errors from the
// API's Status, client-side rate limiting, retries and timeouts.
//
// Retries: a 429 or 5xx answer that carries Retry-After is retried after that delay for every verb
// (the server did not act on it), up to `max_retries`; 5xx without Retry-After and lost connections
// are retried with exponential back-off and jitter for idempotent verbs only (GET, PUT, DELETE).
// Every request has a timeout (RestConfig::timeout; watches: their timeoutSeconds plus a margin)
// and waits for a token of the QPS/burst limiter first.
//
// Credentials: a static token, a token file re-read when it changes, a client certificate, or an
// exec plugin (client.authentication.k8s.io/v1 ExecCredential) whose answer is kept until its
// expirationTimestamp and re-run on a 401.
//
// Thread safety: every method may be called from any thread; requests run concurrently (one curl
// handle each, handles and their connections are pooled).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "apiclient/config.h"

namespace kgpu::kube {

class Credentials;

// A failed call: the HTTP status and the API's Status (reason, message), or code 0 for no answer.
struct ApiError {
  int code = 0;
  std::string reason;   // NotFound, AlreadyExists, Conflict, Expired, Gone, TooManyRequests, Forbidden, ...
  std::string message;  // Status.message as the server wrote it (RBAC's wording for Forbidden)
  int retry_after_s = -1;

  bool not_found() const { return code == 404; }
  bool already_exists() const { return code == 409 && reason == "AlreadyExists"; }
  bool conflict() const { return code == 409 && reason != "AlreadyExists"; }
  bool gone() const { return code == 410; }  // Expired / Gone: relist
  bool too_many_requests() const { return code == 429; }
  bool forbidden() const { return code == 403; }
  bool unauthorized() const { return code == 401; }
  bool invalid() const { return code == 422; }
  bool server_error() const { return code >= 500; }
  bool no_answer() const { return code == 0; }
  // "<verb> <path>: <code> <reason>: <message>"-style text for users, and the kgpu::Error for it.
  std::string text() const;
  Error to_error() const;
};

template <typename T>
using ApiResult = std::expected<T, ApiError>;

// A REST resource, as discovery names it.
struct Resource {
  std::string group;  // "" for core
  std::string version;
  std::string plural;
  bool namespaced = true;
  std::string kind;  // for objects written without apiVersion/kind

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
};

namespace resources {
extern const Resource kPods, kNodes, kNamespaces, kEvents, kConfigMaps, kSecrets, kDeployments, kReplicaSets,
    kDaemonSets, kStatefulSets, kJobs, kEventsV1, kLeases, kDeviceClasses, kResourceClaims, kResourceClaimTemplates,
    kResourceSlices;
}

struct ListOptions {
  std::string label_selector, field_selector;
  int64_t limit = 0;  // page size; list_all pages through all
  std::string continue_token;
  std::string resource_version;  // "" most recent, "0" any cached
};

struct WatchOptions {
  std::string label_selector, field_selector;
  std::string resource_version;  // start after this version; "" or "0": current objects as ADDED first
  bool allow_bookmarks = true;
  bool send_initial_events = false;
  int timeout_seconds = 300;
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  nlohmann::json object;
};

enum class PatchType { kMerge, kStrategic, kJson };

struct DeleteOptions {
  std::string uid;               // precondition
  std::string resource_version;  // precondition
  std::optional<int64_t> grace_period_seconds;
  std::string propagation_policy;  // Foreground, Background, Orphan
};

struct ClientOptions {
  const Clock* clock = nullptr;  // credential expiry; null: the real clock
  int max_retries = 5;
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10'000};
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> create(RestConfig config, ClientOptions options = {});
  // load_config(options) with `user_agent`, then create(): how a command reaches the API. Errors
  // say which step failed.
  static Result<std::unique_ptr<Client>> connect(const LoadOptions& options, std::string user_agent);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const RestConfig& config() const { return config_; }

  // `sub` names a subresource ("status", "binding", "log"); `ns` is ignored for cluster kinds.
  ApiResult<nlohmann::json> get(const Resource& r, std::string_view ns, std::string_view name,
                                std::string_view sub = {});
  ApiResult<nlohmann::json> list(const Resource& r, std::string_view ns, const ListOptions& o = {});
  // Every page of a list (limit/continue); items in one array, the list's resourceVersion in `rv`.
  ApiResult<std::vector<nlohmann::json>> list_all(const Resource& r, std::string_view ns, const ListOptions& o,
                                                  std::string* rv = nullptr);
  ApiResult<nlohmann::json> create(const Resource& r, std::string_view ns, const nlohmann::json& object,
                                   std::string_view sub = {}, std::string_view name = {});
  ApiResult<nlohmann::json> update(const Resource& r, std::string_view ns, std::string_view name,
                                   const nlohmann::json& object, std::string_view sub = {});
  ApiResult<nlohmann::json> patch(const Resource& r, std::string_view ns, std::string_view name, PatchType type,
                                  const nlohmann::json& patch, std::string_view sub = {});
  ApiResult<nlohmann::json> remove(const Resource& r, std::string_view ns, std::string_view name,
                                   const DeleteOptions& o = {});
  // pods/<name>/log as text.
  ApiResult<std::string> logs(std::string_view ns, std::string_view pod, std::string_view container,
                              std::optional<int64_t> tail_lines = std::nullopt, bool previous = false);
  // POST pods/<name>/binding with the pod's uid as precondition and `annotations` copied to it.
  ApiResult<void> bind(std::string_view ns, std::string_view pod, std::string_view uid, std::string_view node,
                       const nlohmann::json& annotations = nlohmann::json::object());

  // Streams events to `on_event` until the server ends the stream (timeoutSeconds), `on_event`
  // returns false, or `stop` becomes true (checked every 50 ms). An ERROR event ends it
  // with its Status as the error (410 Expired: the caller relists).
  ApiResult<void> watch(const Resource& r, std::string_view ns, const WatchOptions& o,
                        const std::function<bool(WatchEvent&&)>& on_event, const std::atomic<bool>* stop = nullptr);

  // A GET of any path (discovery, /version, a proxy URL); the body as text. An answer longer than
  // `max_bytes` (0: the client's limit for every answer) is cut off and an error.
  ApiResult<std::string> get_raw(std::string_view path_and_query, size_t max_bytes = 0);

  // Requests sent (each try counts), for tests and metrics.
  uint64_t requests_sent() const { return requests_sent_.load(); }

 private:
  struct Handle;
  struct Reply {
    int code = 0;
    std::string body;
    std::string content_type;
    int retry_after_s = -1;
    std::string transport_error;
  };
  Client(RestConfig config, ClientOptions options);
  std::string url(const Resource& r, std::string_view ns, std::string_view name, std::string_view sub) const;
  ApiResult<std::string> call(std::string_view method, const std::string& url, std::string_view body,
                              std::string_view content_type, bool idempotent, size_t max_body = 0);
  Reply send_once(std::string_view method, const std::string& url, std::string_view body,
                  std::string_view content_type,
                  const std::function<bool(std::string_view)>* stream, const std::atomic<bool>* stop,
                  std::chrono::milliseconds timeout, size_t max_body = 0);
  void throttle();
  std::unique_ptr<Handle> acquire();
  void release(std::unique_ptr<Handle> h);

  RestConfig config_;
  ClientOptions options_;
  std::unique_ptr<Credentials> credentials_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Handle>> pool_;
  std::mutex limiter_mu_;
  double tokens_;
  std::chrono::steady_clock::time_point last_refill_;
  std::atomic<uint64_t> requests_sent_{0};
};

// The ApiError for a non-2xx reply body (a Status, or anything else).
ApiError api_error(int code, std::string_view body, int retry_after_s = -1);

}  // namespace kgpu::kube
