#include "apiclient/client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "common/json_guard.h"
#include "apiclient/credentials.h"

namespace kgpu::kube {

using nlohmann::json;

namespace resources {
const Resource kPods{"", "v1", "pods", true, "Pod"};
const Resource kNodes{"", "v1", "nodes", false, "Node"};
const Resource kNamespaces{"", "v1", "namespaces", false, "Namespace"};
const Resource kEvents{"", "v1", "events", true, "Event"};
const Resource kConfigMaps{"", "v1", "configmaps", true, "ConfigMap"};
const Resource kSecrets{"", "v1", "secrets", true, "Secret"};
const Resource kDeployments{"apps", "v1", "deployments", true, "Deployment"};
const Resource kReplicaSets{"apps", "v1", "replicasets", true, "ReplicaSet"};
const Resource kDaemonSets{"apps", "v1", "daemonsets", true, "DaemonSet"};
const Resource kStatefulSets{"apps", "v1", "statefulsets", true, "StatefulSet"};
const Resource kJobs{"batch", "v1", "jobs", true, "Job"};
const Resource kEventsV1{"events.k8s.io", "v1", "events", true, "Event"};
const Resource kLeases{"coordination.k8s.io", "v1", "leases", true, "Lease"};
const Resource kDeviceClasses{"resource.k8s.io", "v1", "deviceclasses", false, "DeviceClass"};
const Resource kResourceClaims{"resource.k8s.io", "v1", "resourceclaims", true, "ResourceClaim"};
const Resource kResourceClaimTemplates{"resource.k8s.io", "v1", "resourceclaimtemplates", true,
                                       "ResourceClaimTemplate"};
const Resource kResourceSlices{"resource.k8s.io", "v1", "resourceslices", false, "ResourceSlice"};
}  // namespace resources

namespace {

constexpr size_t kMaxBody = 256 << 20;       // a list of 100,000 pods is ~ 100-200 MB of JSON
constexpr size_t kMaxWatchLine = 16 << 20;  // one watch event
constexpr int kMaxJsonDepth = 200;

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

std::string escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

void add_param(std::string& url, std::string_view key, std::string_view value) {
  if (value.empty()) return;
  url += url.find('?') == std::string::npos ? '?' : '&';
  url += key;
  url += '=';
  url += escape(value);
}

bool json_depth_ok(std::string_view text) { return json_depth_within(text, kMaxJsonDepth); }

ApiResult<json> parse_body(const std::string& body) {
  if (!json_depth_ok(body)) return std::unexpected(ApiError{0, "BadResponse", "the server's answer is nested too deeply"});
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return std::unexpected(ApiError{0, "BadResponse", "the server's answer is not JSON"});
  return j;
}

const char* patch_content_type(PatchType t) {
  switch (t) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategic:
      return "application/strategic-merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
  }
  return "application/merge-patch+json";
}

}  // namespace

std::string ApiError::text() const {
  if (code == 0) return message.empty() ? "no answer from the API server" : message;
  if (message.empty()) return fmt::format("{} {}", code, reason);
  return fmt::format("{} ({} {})", message, code, reason);
}

Error ApiError::to_error() const {
  ErrorCode c = ErrorCode::kUnavailable;
  if (code == 404) c = ErrorCode::kNotFound;
  if (code == 401 || code == 403) c = ErrorCode::kPermissionDenied;
  if (code == 400 || code == 409 || code == 422) c = ErrorCode::kInvalidArgument;
  return Error{c, text()};
}

ApiError api_error(int code, std::string_view body, int retry_after_s) {
  ApiError e;
  e.code = code;
  e.retry_after_s = retry_after_s;
  const json j = json_depth_ok(body) ? json::parse(body, nullptr, false) : json();
  if (j.is_object() && j.value("kind", "") == "Status") {
    e.reason = j.value("reason", "");
    e.message = j.value("message", "");
    if (j.contains("code") && j["code"].is_number_integer()) e.code = j["code"].get<int>();
  } else {
    e.message = std::string(body.substr(0, 512));
  }
  if (e.reason.empty()) {
    switch (e.code) {
      case 400: e.reason = "BadRequest"; break;
      case 401: e.reason = "Unauthorized"; break;
      case 403: e.reason = "Forbidden"; break;
      case 404: e.reason = "NotFound"; break;
      case 405: e.reason = "MethodNotAllowed"; break;
      case 409: e.reason = "Conflict"; break;
      case 410: e.reason = "Gone"; break;
      case 415: e.reason = "UnsupportedMediaType"; break;
      case 422: e.reason = "Invalid"; break;
      case 429: e.reason = "TooManyRequests"; break;
      case 500: e.reason = "InternalError"; break;
      case 503: e.reason = "ServiceUnavailable"; break;
      case 504: e.reason = "Timeout"; break;
      default: break;
    }
  }
  return e;
}

// One curl easy handle (its connection cache comes with it).
struct Client::Handle {
  CURL* curl = nullptr;
  Handle() : curl(curl_easy_init()) {}
  ~Handle() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

Client::Client(RestConfig config, ClientOptions options)
    : config_(std::move(config)),
      options_(options),
      credentials_(std::make_unique<Credentials>(config_, options.clock != nullptr ? *options.clock : Clock::real())),
      tokens_(config_.burst),
      last_refill_(std::chrono::steady_clock::now()) {}

Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::connect(const LoadOptions& options, std::string user_agent) {
  auto config = load_config(options);
  if (!config) return std::unexpected(config.error());
  config->user_agent = std::move(user_agent);
  return create(std::move(*config));
}

Result<std::unique_ptr<Client>> Client::create(RestConfig config, ClientOptions options) {
  static CurlGlobal global;
  if (config.server.empty()) return fail(ErrorCode::kInvalidArgument, "no API server URL");
  if (!config.tls_server_name.empty() && !config.server.starts_with("https://")) {
    return fail(ErrorCode::kInvalidArgument, "tls-server-name {} needs an https server", config.tls_server_name);
  }
  return std::unique_ptr<Client>(new Client(std::move(config), options));
}

std::unique_ptr<Client::Handle> Client::acquire() {
  {
    std::lock_guard lock(pool_mu_);
    if (!pool_.empty()) {
      auto h = std::move(pool_.back());
      pool_.pop_back();
      return h;
    }
  }
  return std::make_unique<Handle>();
}

void Client::release(std::unique_ptr<Handle> h) {
  std::lock_guard lock(pool_mu_);
  if (pool_.size() < 16) pool_.push_back(std::move(h));
}

void Client::throttle() {
  if (config_.qps <= 0) return;
  std::unique_lock lock(limiter_mu_);
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - last_refill_).count();
    tokens_ = std::min<double>(config_.burst, tokens_ + elapsed * config_.qps);
    last_refill_ = now;
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return;
    }
    const auto wait = std::chrono::duration<double>((1 - tokens_) / config_.qps);
    lock.unlock();
    std::this_thread::sleep_for(wait);
    lock.lock();
  }
}

std::string Client::url(const Resource& r, std::string_view ns, std::string_view name, std::string_view sub) const {
  std::string u = config_.server + (r.group.empty() ? "/api/" + r.version : "/apis/" + r.group + "/" + r.version);
  if (r.namespaced && !ns.empty()) u += "/namespaces/" + escape(ns);
  u += "/" + r.plural;
  if (!name.empty()) u += "/" + escape(name);
  if (!sub.empty()) u += "/" + std::string(sub);
  return u;
}

namespace {

struct Transfer {
  CURL* curl = nullptr;
  int streaming = -1;  // -1: not decided yet; a watch streams only a 200 answer
  std::string body;
  std::string content_type;
  int retry_after_s = -1;
  const std::function<bool(std::string_view)>* stream = nullptr;
  std::string line;  // a partial watch line
  size_t max_body = kMaxBody;
  bool overflow = false;
  bool stopped_by_callback = false;
  const std::atomic<bool>* stop = nullptr;
  std::string_view request_body;
  size_t sent = 0;
};

size_t on_write(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (t->stream != nullptr && t->streaming < 0) {
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    t->streaming = code == 200 ? 1 : 0;
  }
  if (t->stream == nullptr || t->streaming == 0) {
    if (t->body.size() + len > t->max_body) {
      t->overflow = true;
      return 0;
    }
    t->body.append(data, len);
    return len;
  }
  // Watch: deliver complete lines.
  std::string_view chunk(data, len);
  while (!chunk.empty()) {
    const auto nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      if (t->line.size() + chunk.size() > kMaxWatchLine) {
        t->overflow = true;
        return 0;
      }
      t->line.append(chunk);
      break;
    }
    t->line.append(chunk.substr(0, nl));
    chunk.remove_prefix(nl + 1);
    if (!t->line.empty() && !(*t->stream)(t->line)) {
      t->stopped_by_callback = true;
      return 0;
    }
    t->line.clear();
  }
  return len;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view h(data, size * n);
  const auto colon = h.find(':');
  if (colon != std::string_view::npos) {
    std::string name(h.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string_view value = h.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
    if (name == "content-type") t->content_type = std::string(value);
    if (name == "retry-after") {
      try {
        t->retry_after_s = std::stoi(std::string(value));
      } catch (const std::exception&) {
        t->retry_after_s = 1;  // an HTTP date: retry soon
      }
    }
  }
  return size * n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* t = static_cast<Transfer*>(user);
  return t->stop != nullptr && t->stop->load() ? 1 : 0;
}

// curl_easy_perform, or, for a transfer that `stop` may end (watches), the same through a multi
// handle polled every kStopPoll, so that a stop ends it within that time rather than at curl's next
// progress callback (about once a second on an idle stream). A stopped transfer returns
// CURLE_ABORTED_BY_CALLBACK. Such a transfer's connection is not kept for reuse.
constexpr int kStopPollMs = 50;

CURLcode perform(CURL* c, const std::atomic<bool>* stop) {
  if (stop == nullptr) return curl_easy_perform(c);
  CURLM* m = curl_multi_init();
  if (m == nullptr) return curl_easy_perform(c);
  if (curl_multi_add_handle(m, c) != CURLM_OK) {
    curl_multi_cleanup(m);
    return curl_easy_perform(c);
  }
  CURLcode result = CURLE_OK;
  for (;;) {
    int running = 0;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      result = CURLE_RECV_ERROR;
      break;
    }
    bool done = false;
    int queued = 0;
    while (const CURLMsg* msg = curl_multi_info_read(m, &queued)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == c) {
        result = msg->data.result;
        done = true;
      }
    }
    if (done) break;
    if (stop->load()) {
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    if (curl_multi_poll(m, nullptr, 0, kStopPollMs, nullptr) != CURLM_OK) {
      result = CURLE_RECV_ERROR;
      break;
    }
  }
  curl_multi_remove_handle(m, c);
  curl_multi_cleanup(m);
  return result;
}

size_t on_read(char* buffer, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = std::min(size * n, t->request_body.size() - t->sent);
  std::memcpy(buffer, t->request_body.data() + t->sent, len);
  t->sent += len;
  return len;
}

}  // namespace

Client::Reply Client::send_once(std::string_view method, const std::string& url, std::string_view body,
                                std::string_view content_type, const std::function<bool(std::string_view)>* stream,
                                const std::atomic<bool>* stop, std::chrono::milliseconds timeout, size_t max_body) {
  Reply reply;
  auto auth = credentials_->current();
  if (!auth) {
    reply.transport_error = auth.error().message;
    reply.code = -1;  // not retryable
    return reply;
  }
  throttle();
  ++requests_sent_;
  auto h = acquire();
  CURL* c = h->curl;
  curl_easy_reset(c);
  Transfer t;
  if (max_body > 0) t.max_body = std::min(max_body, kMaxBody);
  t.curl = c;
  t.stream = stream;
  t.stop = stop;
  t.request_body = body;
  std::string target = url;
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!content_type.empty()) headers = curl_slist_append(headers, fmt::format("Content-Type: {}", content_type).c_str());
  if (!auth->bearer.empty()) headers = curl_slist_append(headers, fmt::format("Authorization: Bearer {}", auth->bearer).c_str());
  headers = curl_slist_append(headers, "Expect:");
  curl_slist* connect_to = nullptr;
  if (!config_.tls_server_name.empty()) {
    // Connect to the server's address, but speak TLS (SNI, verification) for tls-server-name.
    CURLU* u = curl_url();
    char *host = nullptr, *port = nullptr;
    if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
      connect_to = curl_slist_append(connect_to, fmt::format("{}:{}:{}:{}", config_.tls_server_name, port, host, port).c_str());
      curl_url_set(u, CURLUPART_HOST, config_.tls_server_name.c_str(), 0);
      char* rewritten = nullptr;
      if (curl_url_get(u, CURLUPART_URL, &rewritten, 0) == CURLUE_OK) {
        target = rewritten;
        curl_free(rewritten);
      }
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect_to);
  }
  curl_easy_setopt(c, CURLOPT_URL, target.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, std::string(method).c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERAGENT, config_.user_agent.c_str());
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "gzip");  // as client-go asks (brotli is far slower to produce)
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  if (method == "POST" || method == "PUT" || method == "PATCH") {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, &t);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size()));
  } else if (method == "DELETE" && !body.empty()) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
  }
  if (!config_.ca_pem.empty()) {
    curl_blob ca{const_cast<char*>(config_.ca_pem.data()), config_.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!auth->cert_pem.empty()) {
    curl_blob cert{auth->cert_pem.data(), auth->cert_pem.size(), CURL_BLOB_COPY};
    curl_blob key{auth->key_pem.data(), auth->key_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
  }
  if (!config_.proxy_url.empty()) curl_easy_setopt(c, CURLOPT_PROXY, config_.proxy_url.c_str());
  const CURLcode rc = perform(c, stop);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  curl_slist_free_all(connect_to);
  reply.code = static_cast<int>(code);
  reply.body = std::move(t.body);
  reply.content_type = std::move(t.content_type);
  reply.retry_after_s = t.retry_after_s;
  if (rc != CURLE_OK) {
    if (t.stopped_by_callback || (rc == CURLE_ABORTED_BY_CALLBACK && stop != nullptr && stop->load())) {
      reply.transport_error.clear();  // the caller ended it
    } else if (t.overflow) {
      reply.transport_error = "the server's answer exceeds the client's limit";
      reply.code = -1;
    } else if (rc == CURLE_OPERATION_TIMEDOUT && stream != nullptr && code == 200) {
      reply.transport_error.clear();  // a watch that outlived its deadline ends like a server timeout
    } else {
      reply.transport_error = fmt::format("{} {}: {}", method, url, curl_easy_strerror(rc));
      if (code == 0 || stream != nullptr) reply.code = 0;
      // A certificate the client rejects or cannot use does not get better by retrying.
      if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CACERT_BADFILE ||
          rc == CURLE_SSL_CIPHER || rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
        reply.code = -1;
      }
    }
  }
  if (rc == CURLE_OK || reply.code > 0) release(std::move(h));  // a broken handle is dropped
  return reply;
}

ApiResult<std::string> Client::call(std::string_view method, const std::string& url, std::string_view body,
                                    std::string_view content_type, bool idempotent, size_t max_body) {
  thread_local std::mt19937 rng{std::random_device{}()};
  auto backoff = options_.initial_backoff;
  bool reauthenticated = false;
  for (int attempt = 0;; ++attempt) {
    Reply r = send_once(method, url, body, content_type, nullptr, nullptr, config_.timeout, max_body);
    if (r.code == -1) return std::unexpected(ApiError{0, "", r.transport_error});
    if (r.transport_error.empty() && r.code >= 200 && r.code < 300) return std::move(r.body);
    if (r.code == 401 && !reauthenticated && credentials_->invalidate()) {
      reauthenticated = true;
      continue;
    }
    const bool told_to_retry = (r.code == 429 || r.code >= 500) && r.retry_after_s >= 0;
    const bool may_retry = told_to_retry || (idempotent && (r.code == 0 || r.code >= 500));
    if (!may_retry || attempt >= options_.max_retries) {
      if (r.code == 0) return std::unexpected(ApiError{0, "", r.transport_error});
      return std::unexpected(api_error(r.code, r.body, r.retry_after_s));
    }
    std::chrono::milliseconds wait = backoff;
    if (told_to_retry) {
      wait = std::chrono::seconds(std::min(r.retry_after_s, 60));
    } else {
      std::uniform_real_distribution<double> jitter(0.5, 1.5);
      wait = std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(backoff.count()) * jitter(rng)));
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
    std::this_thread::sleep_for(wait);
  }
}

ApiResult<json> Client::get(const Resource& r, std::string_view ns, std::string_view name, std::string_view sub) {
  auto body = call("GET", url(r, ns, name, sub), {}, {}, true);
  if (!body) return std::unexpected(body.error());
  return parse_body(*body);
}

ApiResult<json> Client::list(const Resource& r, std::string_view ns, const ListOptions& o) {
  std::string u = url(r, ns, {}, {});
  add_param(u, "labelSelector", o.label_selector);
  add_param(u, "fieldSelector", o.field_selector);
  if (o.limit > 0) add_param(u, "limit", std::to_string(o.limit));
  add_param(u, "continue", o.continue_token);
  add_param(u, "resourceVersion", o.resource_version);
  auto body = call("GET", u, {}, {}, true);
  if (!body) return std::unexpected(body.error());
  return parse_body(*body);
}

ApiResult<std::vector<json>> Client::list_all(const Resource& r, std::string_view ns, const ListOptions& o,
                                              std::string* rv) {
  ListOptions page = o;
  if (page.limit <= 0) page.limit = 500;
  std::vector<json> items;
  while (true) {
    auto l = list(r, ns, page);
    if (!l) return std::unexpected(l.error());
    if (!l->contains("items") || !(*l)["items"].is_array()) {
      return std::unexpected(ApiError{0, "BadResponse", "a list without items"});
    }
    for (auto& item : (*l)["items"]) items.push_back(std::move(item));
    const json& meta = (*l)["metadata"];
    const std::string next = meta.is_object() ? meta.value("continue", "") : "";
    if (next.empty()) {
      if (rv != nullptr) *rv = meta.is_object() ? meta.value("resourceVersion", "") : "";
      return items;
    }
    page.continue_token = next;
    page.resource_version.clear();
  }
}

ApiResult<json> Client::create(const Resource& r, std::string_view ns, const json& object, std::string_view sub,
                               std::string_view name) {
  json o = object;
  if (sub.empty() && o.is_object()) {
    if (!o.contains("apiVersion")) o["apiVersion"] = r.api_version();
    if (!o.contains("kind") && !r.kind.empty()) o["kind"] = r.kind;
  }
  auto body = call("POST", url(r, ns, name, sub), o.dump(), "application/json", false);
  if (!body) return std::unexpected(body.error());
  return parse_body(*body);
}

ApiResult<json> Client::update(const Resource& r, std::string_view ns, std::string_view name, const json& object,
                               std::string_view sub) {
  auto body = call("PUT", url(r, ns, name, sub), object.dump(), "application/json", true);
  if (!body) return std::unexpected(body.error());
  return parse_body(*body);
}

ApiResult<json> Client::patch(const Resource& r, std::string_view ns, std::string_view name, PatchType type,
                              const json& p, std::string_view sub) {
  auto body = call("PATCH", url(r, ns, name, sub), p.dump(), patch_content_type(type), false);
  if (!body) return std::unexpected(body.error());
  return parse_body(*body);
}

ApiResult<json> Client::remove(const Resource& r, std::string_view ns, std::string_view name, const DeleteOptions& o) {
  json opts{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!o.uid.empty()) opts["preconditions"]["uid"] = o.uid;
  if (!o.resource_version.empty()) opts["preconditions"]["resourceVersion"] = o.resource_version;
  if (o.grace_period_seconds) opts["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (!o.propagation_policy.empty()) opts["propagationPolicy"] = o.propagation_policy;
  auto body = call("DELETE", url(r, ns, name, {}), opts.dump(), "application/json", true);
  if (!body) return std::unexpected(body.error());
  return parse_body(*body);
}

ApiResult<std::string> Client::logs(std::string_view ns, std::string_view pod, std::string_view container,
                                    std::optional<int64_t> tail_lines, bool previous) {
  std::string u = url(resources::kPods, ns, pod, "log");
  add_param(u, "container", container);
  if (tail_lines) add_param(u, "tailLines", std::to_string(*tail_lines));
  if (previous) add_param(u, "previous", "true");
  return call("GET", u, {}, {}, true);
}

ApiResult<void> Client::bind(std::string_view ns, std::string_view pod, std::string_view uid, std::string_view node,
                             const json& annotations) {
  json b{{"apiVersion", "v1"},
         {"kind", "Binding"},
         {"metadata", {{"name", std::string(pod)}, {"namespace", std::string(ns)}}},
         {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", std::string(node)}}}};
  if (!uid.empty()) b["metadata"]["uid"] = std::string(uid);
  if (annotations.is_object() && !annotations.empty()) b["metadata"]["annotations"] = annotations;
  auto body = call("POST", url(resources::kPods, ns, pod, "binding"), b.dump(), "application/json", false);
  if (!body) return std::unexpected(body.error());
  return {};
}

ApiResult<std::string> Client::get_raw(std::string_view path_and_query, size_t max_bytes) {
  return call("GET", config_.server + std::string(path_and_query), {}, {}, true, max_bytes);
}

ApiResult<void> Client::watch(const Resource& r, std::string_view ns, const WatchOptions& o,
                              const std::function<bool(WatchEvent&&)>& on_event, const std::atomic<bool>* stop) {
  std::string u = url(r, ns, {}, {});
  add_param(u, "watch", "1");
  add_param(u, "labelSelector", o.label_selector);
  add_param(u, "fieldSelector", o.field_selector);
  add_param(u, "resourceVersion", o.resource_version);
  if (o.allow_bookmarks) add_param(u, "allowWatchBookmarks", "true");
  if (o.send_initial_events) {
    add_param(u, "sendInitialEvents", "true");
    add_param(u, "resourceVersionMatch", "NotOlderThan");
  }
  add_param(u, "timeoutSeconds", std::to_string(o.timeout_seconds));
  std::optional<ApiError> event_error;
  const std::function<bool(std::string_view)> stream = [&](std::string_view line) {
    if (!json_depth_ok(line)) {
      event_error = ApiError{0, "BadResponse", "a watch event nested too deeply"};
      return false;
    }
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      event_error = ApiError{0, "BadResponse", "a watch event that is not {type, object}"};
      return false;
    }
    WatchEvent ev{j["type"].get<std::string>(), std::move(j["object"])};
    if (ev.type == "ERROR") {
      const json& st = ev.object;
      event_error = api_error(st.is_object() ? st.value("code", 500) : 500, st.dump());
      return false;
    }
    return on_event(std::move(ev));
  };
  const auto timeout = std::chrono::seconds(o.timeout_seconds + 30);
  Reply reply = send_once("GET", u, {}, {}, &stream, stop, timeout);
  if (event_error) return std::unexpected(*event_error);
  if (reply.code == -1) return std::unexpected(ApiError{0, "ClientError", reply.transport_error});
  if (!reply.transport_error.empty()) return std::unexpected(ApiError{0, "", reply.transport_error});
  if (reply.code == 401) credentials_->invalidate();
  if (reply.code != 200 && reply.code != 0) return std::unexpected(api_error(reply.code, reply.body, reply.retry_after_s));
  return {};
}

}  // namespace kgpu::kube
