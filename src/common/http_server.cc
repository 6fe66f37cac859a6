#include "common/http_server.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "common/base64.h"
#include "common/files.h"
#include "common/log.h"
#include "common/web_config.h"

namespace kgpu {

namespace {

// Connections accepted past the limit, only to be answered 503 and closed.
constexpr unsigned kReserve = 64;

// After a request body this large is released, the heap's free memory goes back to the system.
constexpr size_t kTrimAfterBytes = 1u << 20;

// One request from its headers to its completion. Owned by libmicrohttpd's per-request context
// pointer: made when the headers are in, deleted by Impl::on_completed. While a worker runs its
// handler the connection is suspended and only that worker touches it.
struct Pending {
  std::string method, path, tail;
  const HttpServer::RequestHandler* handler = nullptr;  // null: a route() page
  std::string body;
  size_t declared = 0;   // Content-Length, 0 when chunked
  bool refused = false;  // the body outgrew the limit: discarded, answered 413 at its end
  std::atomic<bool> done{false};  // the worker's response is ready
  HttpResponse response;
};

void release_body(void* cls) { delete static_cast<std::shared_ptr<const std::string>*>(cls); }

// One web config in service with what GnuTLS made of it. Shared by every connection that started
// under it, so a reload never frees credentials a session still uses.
struct WebState {
  WebConfig config;
  gnutls_certificate_credentials_t cred = nullptr;
  gnutls_priority_t priority = nullptr;

  WebState() = default;
  WebState(const WebState&) = delete;
  WebState& operator=(const WebState&) = delete;
  ~WebState() {
    if (priority != nullptr) gnutls_priority_deinit(priority);
    if (cred != nullptr) gnutls_certificate_free_credentials(cred);
  }
};

Result<std::shared_ptr<const WebState>> make_state(WebConfig config) {
  auto state = std::make_shared<WebState>();
  state->config = std::move(config);
  if (!state->config.tls) return state;
  const WebTlsConfig& t = *state->config.tls;
  const std::string& path = state->config.path;
  if (gnutls_certificate_allocate_credentials(&state->cred) < 0) {
    return fail(ErrorCode::kInternal, "{}: cannot allocate TLS credentials", path);
  }
  auto datum = [](const std::string& s) {
    return gnutls_datum_t{reinterpret_cast<unsigned char*>(const_cast<char*>(s.data())),
                          static_cast<unsigned>(s.size())};
  };
  const gnutls_datum_t cert = datum(t.cert_pem), key = datum(t.key_pem);
  if (int rc = gnutls_certificate_set_x509_key_mem2(state->cred, &cert, &key, GNUTLS_X509_FMT_PEM, nullptr, 0);
      rc < 0) {
    return fail(ErrorCode::kInvalidArgument, "{}: tls_server_config: the certificate and key do not load: {}", path,
                gnutls_strerror(rc));
  }
  if (!t.client_ca_pem.empty()) {
    const gnutls_datum_t ca = datum(t.client_ca_pem);
    const int n = gnutls_certificate_set_x509_trust_mem(state->cred, &ca, GNUTLS_X509_FMT_PEM);
    if (n < 0) {
      return fail(ErrorCode::kInvalidArgument, "{}: tls_server_config: the client CA does not load: {}", path,
                  gnutls_strerror(n));
    }
    if (n == 0) {
      return fail(ErrorCode::kInvalidArgument, "{}: tls_server_config: the client CA holds no certificate", path);
    }
  } else if (t.cert_verified()) {
    gnutls_certificate_set_x509_system_trust(state->cred);  // as Go verifies without ClientCAs
  }
  const std::string priority = t.gnutls_priority();
  const char* where = nullptr;
  if (int rc = gnutls_priority_init(&state->priority, priority.c_str(), &where); rc < 0) {
    state->priority = nullptr;
    return fail(ErrorCode::kInvalidArgument,
                "{}: tls_server_config: GnuTLS refuses the versions, suites or curves (\"{}\" at \"{}\"): {}", path,
                priority, where != nullptr ? where : "", gnutls_strerror(rc));
  }
  return std::shared_ptr<const WebState>(std::move(state));
}

// Identity of a file's current contents, as cheaply as the kernel tells it.
struct FileStamp {
  int err = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  long long mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

std::vector<FileStamp> stamp(const std::vector<std::string>& files) {
  std::vector<FileStamp> out;
  for (const auto& f : files) {
    struct stat st {};
    FileStamp s;
    if (::stat(f.c_str(), &st) != 0) {
      s.err = errno;
    } else {
      s = {0, st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
    }
    out.push_back(s);
  }
  return out;
}

// The peer certificate's SANs as Go's x509 package lists them: DNS names, e-mail addresses, IP
// addresses in their text form, URIs.
std::vector<std::string> subject_alt_names(const gnutls_datum_t& der) {
  std::vector<std::string> out;
  gnutls_x509_crt_t crt = nullptr;
  if (gnutls_x509_crt_init(&crt) < 0) return out;
  if (gnutls_x509_crt_import(crt, &der, GNUTLS_X509_FMT_DER) >= 0) {
    for (unsigned i = 0; i < 1024; ++i) {
      char buf[4096];
      size_t size = sizeof buf;
      const int type = gnutls_x509_crt_get_subject_alt_name(crt, i, buf, &size, nullptr);
      if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) break;
      if (type < 0) continue;  // too long or malformed: cannot match
      if (type == GNUTLS_SAN_DNSNAME || type == GNUTLS_SAN_RFC822NAME || type == GNUTLS_SAN_URI) {
        out.emplace_back(buf, size);
      } else if (type == GNUTLS_SAN_IPADDRESS && (size == 4 || size == 16)) {
        char text[INET6_ADDRSTRLEN];
        if (inet_ntop(size == 4 ? AF_INET : AF_INET6, buf, text, sizeof text) != nullptr) out.emplace_back(text);
      }
    }
  }
  gnutls_x509_crt_deinit(crt);
  return out;
}

// The session's connection's WebState (held in its socket context since the connection started).
const WebState* session_state(gnutls_session_t session) {
  auto* c = static_cast<MHD_Connection*>(gnutls_session_get_ptr(session));
  if (c == nullptr) return nullptr;
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  if (info == nullptr || info->socket_context == nullptr) return nullptr;
  return static_cast<std::shared_ptr<const WebState>*>(info->socket_context)->get();
}

// GnuTLS's check of the client's certificate during the handshake: nonzero fails the handshake,
// as Go's crypto/tls does for the toolkit's client_auth_type and client_allowed_sans.
int verify_client(gnutls_session_t session) {
  const WebState* state = session_state(session);
  if (state == nullptr || !state->config.tls) return -1;
  const WebTlsConfig& t = *state->config.tls;
  unsigned n = 0;
  const gnutls_datum_t* certs = gnutls_certificate_get_peers(session, &n);
  if (certs == nullptr || n == 0) return t.cert_required() ? -1 : 0;
  if (t.cert_verified()) {
    gnutls_typed_vdata_st purpose{};
    purpose.type = GNUTLS_DT_KEY_PURPOSE_OID;
    purpose.data = reinterpret_cast<unsigned char*>(const_cast<char*>(GNUTLS_KP_TLS_WWW_CLIENT));
    unsigned status = 0;
    if (gnutls_certificate_verify_peers(session, &purpose, 1, &status) < 0 || status != 0) {
      log::debug("TLS client certificate refused: not verified by the client CA", {log::kv("status", status)});
      return -1;
    }
  }
  if (t.client_allowed_sans) {
    const auto sans = subject_alt_names(certs[0]);
    const bool allowed = std::any_of(sans.begin(), sans.end(), [&](const std::string& s) {
      return std::find(t.client_allowed_sans->begin(), t.client_allowed_sans->end(), s) != t.client_allowed_sans->end();
    });
    if (!allowed) {
      log::debug("TLS client certificate refused: no SAN in client_allowed_sans");
      return -1;
    }
  }
  return 0;
}

// Queues `r`; `close` ends the connection after it. 503 and 429 carry Retry-After: 1 when the
// connection closes or `retry` says so. `allow` is the Allow header of a 405.
MHD_Result queue(MHD_Connection* c, const HttpResponse& r, bool close = false, const WebState* web = nullptr,
                 bool retry = false, const std::string& allow = "GET, HEAD") {
  auto* keep = new std::shared_ptr<const std::string>(r.body ? r.body : std::make_shared<const std::string>());
  MHD_Response* resp = MHD_create_response_from_buffer_with_free_callback_cls(
      (*keep)->size(), const_cast<char*>((*keep)->data()), &release_body, keep);
  if (resp == nullptr) {
    delete keep;
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
  if (r.status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow.c_str());
  if ((r.status == MHD_HTTP_SERVICE_UNAVAILABLE || r.status == MHD_HTTP_TOO_MANY_REQUESTS) && (close || retry)) {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  }
  if (r.status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic");
  if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  if (web != nullptr) {
    for (const auto& [name, value] : web->config.headers) MHD_add_response_header(resp, name.c_str(), value.c_str());
  }
  const MHD_Result q = MHD_queue_response(c, static_cast<unsigned>(r.status), resp);
  MHD_destroy_response(resp);
  return q;
}

// The server's own answers (401, 404, 405, 413, 429, 503, and the three below; anything else reads
// as an internal error). Bodies are built once and shared by every response.
constexpr int kSaturated = -503;         // 503: the workers' queue is full
constexpr int kBodyTooLarge = -413;      // 413: a body beyond max_body_bytes for a route taking one
constexpr int kMethodNotAllowed = -405;  // 405 where handle() routes exist
HttpResponse plain(int status) {
  static const auto unauthorized = std::make_shared<const std::string>("Unauthorized\n");
  static const auto too_many = std::make_shared<const std::string>("Too Many Requests\n");
  static const auto not_found = std::make_shared<const std::string>("not found\n");
  static const auto bad_method = std::make_shared<const std::string>("only GET and HEAD are served\n");
  static const auto too_large = std::make_shared<const std::string>("request bodies are not accepted\n");
  static const auto busy = std::make_shared<const std::string>("too many connections; try again\n");
  static const auto saturated = std::make_shared<const std::string>("every worker is busy; try again\n");
  static const auto body_too_large = std::make_shared<const std::string>("request body too large\n");
  static const auto method = std::make_shared<const std::string>("method not allowed\n");
  static const auto internal = std::make_shared<const std::string>("internal error\n");
  // Codes only this server answers with, told apart from the agent's by a distinct value.
  if (status == kSaturated) return {503, "text/plain; charset=utf-8", saturated};
  if (status == kBodyTooLarge) return {413, "text/plain; charset=utf-8", body_too_large};
  if (status == kMethodNotAllowed) return {405, "text/plain; charset=utf-8", method};
  const auto& body = status == 401   ? unauthorized
                     : status == 429 ? too_many
                     : status == 404 ? not_found
                     : status == 405 ? bad_method
                     : status == 413 ? too_large
                     : status == 503 ? busy
                                     : internal;
  return {status, "text/plain; charset=utf-8", body};
}

void set_nodelay(MHD_Connection* c) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == nullptr) return;
  const int one = 1;
  setsockopt(info->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// "Basic <base64(user:password)>" as Go's Request.BasicAuth reads it.
std::optional<std::pair<std::string, std::string>> basic_credentials(const char* header) {
  if (header == nullptr) return std::nullopt;
  const std::string_view h(header);
  if (h.size() < 6 || strncasecmp(h.data(), "Basic ", 6) != 0) return std::nullopt;
  auto decoded = base64_decode(h.substr(6));
  if (!decoded) return std::nullopt;
  const size_t colon = decoded->find(':');
  if (colon == std::string::npos) return std::nullopt;
  return std::pair{decoded->substr(0, colon), decoded->substr(colon + 1)};
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  std::map<std::string, Handler, std::less<>> routes;
  struct Route {
    std::string method, path;
    bool prefix = false;
    RequestHandler handler;
  };
  std::vector<Route> handlers;  // fixed once started
  MHD_Daemon* daemon = nullptr;

  // Workers and the requests waiting for them (each one's connection suspended).
  struct Job {
    MHD_Connection* connection;
    Pending* request;
  };
  std::vector<std::thread> workers;
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  std::deque<Job> jobs;      // guarded by jobs_mu
  bool stopping = false;     // guarded by jobs_mu
  std::atomic<unsigned> waiting{0};

  unsigned queue_limit() const {
    return options.max_queued > 0 ? options.max_queued : 4 * std::max(1u, options.workers);
  }

  // The handle() route for `method` and `path`: an exact path first, then the longest prefix.
  const Route* find(std::string_view method, std::string_view path) const {
    const Route* best = nullptr;
    for (const auto& r : handlers) {
      if (r.method != method) continue;
      if (!r.prefix && r.path == path) return &r;
      if (r.prefix && path.starts_with(r.path) && (best == nullptr || r.path.size() > best->path.size())) best = &r;
    }
    return best;
  }

  // The methods `path` is served for (the Allow header of a 405).
  std::string allowed(std::string_view path) const {
    std::vector<std::string> methods{"GET", "HEAD"};
    for (const auto& r : handlers)
      if ((r.prefix ? path.starts_with(r.path) : r.path == path) &&
          std::find(methods.begin(), methods.end(), r.method) == methods.end())
        methods.push_back(r.method);
    std::string out;
    for (const auto& m : methods) out += (out.empty() ? "" : ", ") + m;
    return out;
  }

  static HttpResponse run(const RequestHandler& handler, const Pending& p) {
    try {
      return handler(HttpRequest{p.method, p.path, p.tail, p.body});
    } catch (const std::exception& e) {
      log::error("HTTP handler failed", {log::kv("path", p.path), log::kv("error", e.what())});
      return {500, "text/plain; charset=utf-8", std::make_shared<const std::string>(std::string("internal error: ") + e.what() + "\n")};
    }
  }

  void work() {
    for (;;) {
      Job job{};
      bool answer_busy = false;
      {
        std::unique_lock lock(jobs_mu);
        jobs_cv.wait(lock, [&] { return stopping || !jobs.empty(); });
        if (jobs.empty()) return;
        job = jobs.front();
        jobs.pop_front();
        waiting.fetch_sub(1, std::memory_order_relaxed);
        answer_busy = stopping;  // shutting down: what still waits is not started
      }
      job.request->response = answer_busy ? plain(kSaturated) : run(*job.request->handler, *job.request);
      job.request->done.store(true, std::memory_order_release);
      MHD_resume_connection(job.connection);
    }
  }

  // Runs `p`'s handler, inline or on a worker. MHD_YES with the connection suspended when queued.
  MHD_Result dispatch(MHD_Connection* c, Pending* p, const WebState* web) {
    if (options.workers == 0) return queue(c, run(*p->handler, *p), false, web);
    {
      std::lock_guard lock(jobs_mu);
      if (stopping || jobs.size() >= queue_limit()) return queue(c, plain(kSaturated), false, web, true);
      MHD_suspend_connection(c);
      jobs.push_back({c, p});
      waiting.fetch_add(1, std::memory_order_relaxed);
    }
    jobs_cv.notify_one();
    return MHD_YES;
  }

  static void on_completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
    auto* p = static_cast<Pending*>(*state);
    *state = nullptr;
    if (p == nullptr) return;
    const bool large = p->body.capacity() >= kTrimAfterBytes;
    delete p;
    if (large) malloc_trim(0);
  }

  // The web config in service and what is known of its files. Server thread only once started.
  std::shared_ptr<const WebState> web;
  std::vector<FileStamp> web_stamps;
  std::chrono::steady_clock::time_point next_check{};
  bool web_broken = false;  // the files changed into something refused: look again at each check
  std::string logged_error;
  // Basic-auth answers by SHA-256(user, hash, password); bounded, dropped when full.
  std::unordered_map<std::string, bool> auth_cache;
  std::string unknown_user_hash;  // checked for unknown users too, so timing does not tell them apart
  // Token bucket of rate_limit.
  double tokens = 0;
  std::chrono::steady_clock::time_point tokens_at{};

  mutable std::mutex status_mu;
  WebConfigStatus status;

  static constexpr size_t kAuthCacheEntries = 1024;

  void set_status(const std::function<void(WebConfigStatus&)>& f) {
    std::lock_guard lock(status_mu);
    f(status);
  }

  // Looks at the web config's files (at most every web_config_check) and takes a changed config
  // into service, or keeps the last good one and says why once.
  void maybe_reload() {
    if (web == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_check) return;
    next_check = now + options.web_config_check;
    if (!web_broken && stamp(web->config.files) == web_stamps) return;
    auto refused = [&](const std::string& why) {
      web_broken = true;
      if (why != logged_error) {
        log::error(why + "; keeping the last good web config", {log::kv("file", config_source())});
        logged_error = why;
        set_status([&](WebConfigStatus& s) {
          ++s.failures;
          s.last_error = why;
        });
      }
    };
    auto loaded = load_config();
    if (!loaded) return refused(loaded.error().message);
    if (loaded->tls.has_value() != web->config.tls.has_value()) {
      return refused(config_source() +
                     ": tls_server_config: TLS cannot be switched on or off while serving; restart to change it");
    }
    auto files = loaded->files;
    auto state = make_state(std::move(*loaded));
    if (!state) return refused(state.error().message);
    take(std::move(*state), stamp(files));
    log::info("web config reloaded", {log::kv("file", config_source())});
  }

  // The web config file, or the TLS pair standing in for one.
  std::string config_source() const {
    return !options.web_config_file.empty() ? options.web_config_file : options.tls_cert_file;
  }
  bool configured() const { return !options.web_config_file.empty() || !options.tls_cert_file.empty() || !options.tls_key_file.empty(); }

  // The web config file, or a config of TLS alone from the certificate and key files (watched as
  // the file's are, so a renewed certificate is served without a restart).
  Result<WebConfig> load_config() const {
    if (!options.web_config_file.empty()) return load_web_config(options.web_config_file);
    if (options.tls_cert_file.empty() || options.tls_key_file.empty())
      return fail(ErrorCode::kInvalidArgument, "TLS needs both a certificate file and a key file (given: \"{}\", \"{}\")",
                  options.tls_cert_file, options.tls_key_file);
    WebConfigLimits limits;
    WebConfig config;
    config.path = options.tls_cert_file;
    WebTlsConfig tls;
    auto cert = read_file_limited(options.tls_cert_file, limits.max_file_bytes);
    if (!cert) return fail(ErrorCode::kInvalidArgument, "TLS certificate {}: {}", options.tls_cert_file, cert.error().message);
    auto key = read_file_limited(options.tls_key_file, limits.max_file_bytes);
    if (!key) return fail(ErrorCode::kInvalidArgument, "TLS key {}: {}", options.tls_key_file, key.error().message);
    tls.cert_pem = std::move(*cert);
    tls.key_pem = std::move(*key);
    config.tls = std::move(tls);
    config.files = {options.tls_cert_file, options.tls_key_file};
    return config;
  }

  void take(std::shared_ptr<const WebState> state, std::vector<FileStamp> stamps) {
    web = std::move(state);
    web_stamps = std::move(stamps);
    web_broken = false;
    logged_error.clear();
    auth_cache.clear();
    tokens = web->config.rate_burst;
    tokens_at = std::chrono::steady_clock::now();
    set_status([&](WebConfigStatus& s) {
      s.tls = web->config.tls.has_value();
      ++s.loads;
      s.last_error.clear();
    });
  }

  // Whether the request may pass the rate limit (a token bucket refilled one per interval).
  bool rate_allows() {
    const auto& cfg = web->config;
    if (cfg.rate_interval.count() <= 0) return true;
    const auto now = std::chrono::steady_clock::now();
    tokens = std::min<double>(cfg.rate_burst,
                              tokens + std::chrono::duration<double>(now - tokens_at) /
                                           std::chrono::duration<double>(cfg.rate_interval));
    tokens_at = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }

  // Uncached bcrypt checks: options.password_checks_per_second a second (and in a burst).
  double check_tokens = 0;
  std::chrono::steady_clock::time_point check_tokens_at{};

  enum class Auth { kOk, kDenied, kBusy };

  Auth authorize(MHD_Connection* c) {
    const auto& cfg = web->config;
    if (cfg.users.empty()) return Auth::kOk;
    auto creds = basic_credentials(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION));
    if (!creds) return Auth::kDenied;
    const std::string* hash = cfg.user_hash(creds->first);
    if (hash == nullptr) {
      if (unknown_user_hash.empty()) unknown_user_hash = bcrypt_hash("unknown user", 10);
      hash = &unknown_user_hash;
    }
    std::string material = creds->first;
    material.push_back('\0');
    material += *hash;
    material.push_back('\0');
    material += creds->second;
    std::string key(32, '\0');
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, material.data(), material.size(), key.data()) < 0) key = material;
    std::fill(material.begin(), material.end(), '\0');
    auto it = auth_cache.find(key);
    if (it == auth_cache.end()) {
      const auto now = std::chrono::steady_clock::now();
      const double rate = options.password_checks_per_second;
      check_tokens = std::min(std::max(rate, 1.0),
                              check_tokens + rate * std::chrono::duration<double>(now - check_tokens_at).count());
      check_tokens_at = now;
      if (check_tokens < 1) return Auth::kBusy;
      check_tokens -= 1;
      const bool ok = cfg.user_hash(creds->first) != nullptr && bcrypt_matches(*hash, creds->second);
      if (auth_cache.size() >= kAuthCacheEntries) auth_cache.clear();
      it = auth_cache.emplace(std::move(key), ok).first;
    }
    return it->second ? Auth::kOk : Auth::kDenied;
  }

  static void on_connection(void* cls, MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<Impl*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
      delete static_cast<std::shared_ptr<const WebState>*>(*socket_context);
      *socket_context = nullptr;
      return;
    }
    if (code != MHD_CONNECTION_NOTIFY_STARTED) return;
    set_nodelay(c);
    if (self->web == nullptr || !self->web->config.tls) return;
    self->maybe_reload();
    // The session is set up, its handshake not begun: it takes this config's certificate,
    // versions, suites and client-certificate policy.
    auto* held = new std::shared_ptr<const WebState>(self->web);
    *socket_context = held;
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (info == nullptr || info->tls_session == nullptr) return;
    auto session = static_cast<gnutls_session_t>(info->tls_session);
    const WebState& st = **held;
    const WebTlsConfig& t = *st.config.tls;
    gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, st.cred);
    gnutls_priority_set(session, st.priority);
    gnutls_certificate_server_set_request(session, t.cert_required()    ? GNUTLS_CERT_REQUIRE
                                                   : t.cert_requested() ? GNUTLS_CERT_REQUEST
                                                                        : GNUTLS_CERT_IGNORE);
    if (t.cert_requested()) gnutls_session_set_verify_function(session, &verify_client);
  }

  // More connections open than the limit (the daemon accepts kReserve more, to say so).
  bool over_limit() const {
    const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info != nullptr && info->num_connections > options.max_connections;
  }

  static MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                               const char* upload_data, size_t* upload_size, void** state) {
    auto* self = static_cast<Impl*>(cls);
    const std::string_view m(method);
    const WebState* web = self->web.get();
    auto* p = static_cast<Pending*>(*state);
    if (p == nullptr) {
      // Headers are in; decide before any body is read.
      p = new Pending;  // deleted by on_completed
      *state = p;
      if (self->over_limit()) return queue(c, plain(503), true);
      self->maybe_reload();
      web = self->web.get();
      if (web != nullptr && !self->rate_allows()) return queue(c, plain(429), false, web);
      if (web != nullptr) {
        switch (self->authorize(c)) {
          case Auth::kOk:
            break;
          case Auth::kDenied:
            return queue(c, plain(401), false, web);
          case Auth::kBusy:
            return queue(c, plain(429), true, web);
        }
      }
      const std::string_view path(url);
      const Route* route = self->find(m, path);
      const bool page = m == MHD_HTTP_METHOD_GET || m == MHD_HTTP_METHOD_HEAD;
      if (route == nullptr && !page) {
        if (self->handlers.empty()) return queue(c, plain(405), true, web);
        return queue(c, plain(kMethodNotAllowed), true, web, false, self->allowed(path));
      }
      const char* length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
      const char* chunked = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
      if ((length != nullptr && std::string_view(length) != "0") || chunked != nullptr) {
        const size_t limit = self->options.max_body_bytes;
        if (route == nullptr || limit == 0) return queue(c, plain(413), true, web);
        if (length != nullptr) {
          const std::string_view text(length);
          size_t n = 0;
          const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
          if (ec != std::errc() || end != text.data() + text.size() || n > limit)
            return queue(c, plain(kBodyTooLarge), true, web);
          // Memory follows what arrives: the declared length is reserved whole (one allocation,
          // released whole) only once its first MiB is in, so announcing 64 MiB costs nothing.
          p->declared = n;
          p->body.reserve(std::min(n, kTrimAfterBytes));
        }
      }
      p->method = m;
      p->path = path;
      if (route != nullptr) {
        p->handler = &route->handler;
        if (route->prefix) p->tail = path.substr(route->path.size());
      }
      return MHD_YES;
    }
    if (p->done.load(std::memory_order_acquire)) return queue(c, p->response, false, web);  // back from a worker
    if (*upload_size != 0) {
      const size_t n = *upload_size;
      *upload_size = 0;
      if (p->refused) return MHD_YES;  // the rest of a refused body, discarded as it arrives
      if (p->handler == nullptr || p->body.size() + n > self->options.max_body_bytes) {
        // Read to its end before answering: closing on unread data would reset the connection
        // and lose the answer. The idle timeout still ends a body that never ends.
        p->refused = true;
        p->body = std::string();
        return MHD_YES;
      }
      try {
        if (p->declared > p->body.capacity() && p->body.size() + n > kTrimAfterBytes) p->body.reserve(p->declared);
        p->body.append(upload_data, n);
      } catch (const std::bad_alloc&) {
        p->refused = true;  // answered 413 at the body's end, like any body that does not fit
        p->body = std::string();
      }
      return MHD_YES;
    }
    if (p->refused) return queue(c, plain(p->handler == nullptr ? 413 : kBodyTooLarge), true, web);
    if (p->handler != nullptr) return self->dispatch(c, p, web);
    auto it = self->routes.find(std::string_view(url));
    if (it == self->routes.end()) return queue(c, plain(404), false, web);
    try {
      return queue(c, it->second(), false, web);
    } catch (const std::exception&) {
      return queue(c, plain(500), true, web);
    }
  }
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::route(std::string path, Handler handler) { impl_->routes[std::move(path)] = std::move(handler); }

void HttpServer::handle(std::string method, std::string path, RequestHandler handler, bool prefix) {
  impl_->handlers.push_back({std::move(method), std::move(path), prefix, std::move(handler)});
}

Result<int> HttpServer::start(const std::string& host, int port) {
  if (impl_->daemon != nullptr) return fail(ErrorCode::kInternal, "HTTP server already started");
  impl_->web.reset();
  if (impl_->configured()) {
    // As the toolkit: a web config that does not load at start is fatal.
    auto config = impl_->load_config();
    if (!config) return std::unexpected(config.error());
    if (config->tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
      return fail(ErrorCode::kNotSupported, "{}: tls_server_config: this libmicrohttpd is built without TLS",
                  impl_->config_source());
    }
    auto files = config->files;
    auto state = make_state(std::move(*config));
    if (!state) return std::unexpected(state.error());
    impl_->take(std::move(*state), stamp(files));
    impl_->next_check = std::chrono::steady_clock::now() + impl_->options.web_config_check;
    const WebConfig& c = impl_->web->config;
    log::info("web config loaded", {log::kv("file", impl_->config_source()), log::kv("tls", c.tls.has_value()),
                                    log::kv("basic_auth_users", c.users.size())});
  }
  // Enough descriptors for the connection limit (containers usually allow far more already).
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < impl_->options.max_connections + kReserve + 64u) {
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, impl_->options.max_connections + kReserve + 64u);
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return fail(ErrorCode::kInvalidArgument, "cannot listen on {}:{}: {}", host, port, gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addrs(found, &freeaddrinfo);
  const addrinfo* a = addrs.get();
  const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
  if (fd < 0) return fail(ErrorCode::kUnavailable, "cannot listen on {}:{}: {}", host, port, std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
    const int err = errno;
    close(fd);
    return fail(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kUnavailable, "cannot listen on {}:{}: {}",
                host, port, std::strerror(err));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC;
  if (impl_->options.workers > 0) flags |= MHD_ALLOW_SUSPEND_RESUME;
  if (a->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  const WebState* web = impl_->web.get();
  const bool tls = web != nullptr && web->config.tls;
  if (tls) flags |= MHD_USE_TLS;
  // The daemon's own TLS options only let it start: every session takes the credentials and
  // priorities of the config in service when it begins (Impl::on_connection).
  std::vector<MHD_OptionItem> tls_options;
  std::string priority;
  if (tls) {
    priority = web->config.tls->gnutls_priority();
    tls_options = {{MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(web->config.tls->cert_pem.c_str())},
                   {MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(web->config.tls->key_pem.c_str())},
                   {MHD_OPTION_HTTPS_PRIORITIES, 0, const_cast<char*>(priority.c_str())}};
  }
  tls_options.push_back({MHD_OPTION_END, 0, nullptr});
  impl_->daemon = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Impl::on_request, impl_.get(),  //
      MHD_OPTION_LISTEN_SOCKET, fd,                                //
      MHD_OPTION_CONNECTION_LIMIT, impl_->options.max_connections + kReserve,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, impl_->options.max_header_bytes,
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(impl_->options.idle_timeout.count()),
      MHD_OPTION_NOTIFY_CONNECTION, &Impl::on_connection, impl_.get(),  //
      MHD_OPTION_NOTIFY_COMPLETED, &Impl::on_completed, impl_.get(),    //
      MHD_OPTION_ARRAY, tls_options.data(),                             //
      MHD_OPTION_END);
  if (impl_->daemon == nullptr) {
    close(fd);
    return fail(ErrorCode::kUnavailable, "cannot start the HTTP server on {}:{}", host, port);
  }
  impl_->stopping = false;
  for (unsigned i = 0; i < impl_->options.workers; ++i) impl_->workers.emplace_back([this] { impl_->work(); });
  return bound_port;
}

void HttpServer::stop() {
  if (impl_->daemon == nullptr) return;
  // Workers finish what runs and answer what waits (503), so no connection stays suspended.
  {
    std::lock_guard lock(impl_->jobs_mu);
    impl_->stopping = true;
  }
  impl_->jobs_cv.notify_all();
  for (auto& t : impl_->workers) t.join();
  impl_->workers.clear();
  MHD_stop_daemon(impl_->daemon);  // closes the listening socket and every connection
  impl_->daemon = nullptr;
}

WebConfigStatus HttpServer::web_config_status() const {
  std::lock_guard lock(impl_->status_mu);
  return impl_->status;
}

unsigned HttpServer::queued() const { return impl_->waiting.load(std::memory_order_relaxed); }

unsigned HttpServer::connections() const {
  if (impl_->daemon == nullptr) return 0;
  const MHD_DaemonInfo* info = MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
  return info == nullptr ? 0 : info->num_connections;
}

}  // namespace kgpu
