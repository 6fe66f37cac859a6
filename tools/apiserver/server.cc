#include "server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "manifest.h"
#include "protobuf.h"
#include "validation.h"

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 100;
constexpr size_t kMaxRequestsKept = 2000;
constexpr const char* kJson = "application/json";

void send(httplib::Response& res, const Answer& a) {
  res.status = a.code;
  res.set_content(a.body.dump(), kJson);
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    if (end > start) out.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool truthy(const httplib::Request& req, const char* param) {
  if (!req.has_param(param)) return false;
  const std::string v = req.get_param_value(param);
  return v == "1" || v == "true" || v == "True";
}

std::string param(const httplib::Request& req, const char* name) {
  return req.has_param(name) ? req.get_param_value(name) : std::string();
}

std::string verb_of(const std::string& method, bool has_name, bool watch) {
  if (method == "GET") return watch ? "watch" : has_name ? "get" : "list";
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return has_name ? "delete" : "deletecollection";
  return "";
}

}  // namespace

void send_status(httplib::Response& res, int code, std::string_view reason, std::string message) {
  send(res, status_answer(code, reason, std::move(message)));
}

// A REST path taken apart.
struct Server::Request {
  const ResourceInfo* res = nullptr;
  std::string ns;
  std::string name;
  std::string sub;  // "", "status", "binding", "log"
};

Server::Server(Registry registry, ServerOptions options)
    : registry_(std::move(registry)), options_(std::move(options)), store_(options_.history) {
  // The namespaces every cluster has.
  const ResourceInfo* ns = registry_.find("", "v1", "namespaces");
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    store_.create(*ns, "", json{{"metadata", json{{"name", name}}}}, false);
  }
}

Server::~Server() { stop(); }

std::string Server::url() const {
  return fmt::format("{}://{}:{}", options_.tls ? "https" : "http",
                     options_.host.find(':') != std::string::npos ? "[" + options_.host + "]" : options_.host, port_);
}

std::string Server::bind() {
  if (options_.tls) {
    auto ssl = std::make_unique<httplib::SSLServer>([this](SSL_CTX& ctx) {
      if (SSL_CTX_use_certificate_chain_file(&ctx, options_.cert_file.c_str()) != 1) return false;
      if (SSL_CTX_use_PrivateKey_file(&ctx, options_.key_file.c_str(), SSL_FILETYPE_PEM) != 1) return false;
      if (!options_.client_ca_file.empty()) {
        if (SSL_CTX_load_verify_locations(&ctx, options_.client_ca_file.c_str(), nullptr) != 1) return false;
        // Ask for a client certificate, verify one when presented, but let token clients in.
        SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
        // With peer verification on, OpenSSL fails the handshake of a resumed session unless the
        // server names a session id context.
        static constexpr unsigned char kSessionContext[] = "kgpu-apiserver";
        SSL_CTX_set_session_id_context(&ctx, kSessionContext, sizeof kSessionContext - 1);
      }
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      return true;
    });
    if (!ssl->is_valid()) return "cannot load the TLS certificate " + options_.cert_file + " / " + options_.key_file;
    http_ = std::move(ssl);
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  const size_t threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(std::chrono::seconds(30));
  http_->set_write_timeout(std::chrono::seconds(30));
  http_->set_keep_alive_timeout(30);
  http_->set_keep_alive_max_count(10'000);  // cpp-httplib's default closes a connection after 5 requests
  http_->set_tcp_nodelay(true);  // headers and body go out in separate writes: no 40 ms Nagle/delayed-ACK stall
  for (const char* m : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    const std::string method = m;
    auto handler = [this, method](const httplib::Request& req, httplib::Response& res) {
      try {
        handle(req, res, method);
      } catch (const std::exception& e) {
        send_status(res, 500, "InternalError", std::string("Internal error occurred: ") + e.what());
      }
      note_request(method, req, res.status);
    };
    if (method == "GET") http_->Get(".*", handler);
    if (method == "POST") http_->Post(".*", handler);
    if (method == "PUT") http_->Put(".*", handler);
    if (method == "PATCH") http_->Patch(".*", handler);
    if (method == "DELETE") http_->Delete(".*", handler);
  }
  port_ = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                             : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0) return fmt::format("cannot listen on {}:{}", options_.host, options_.port);
  return {};
}

void Server::run() { http_->listen_after_bind(); }

void Server::stop() {
  stopping_ = true;
  store_.wake_all();
  if (http_) http_->stop();
}

void Server::add_fault(Fault f) {
  std::lock_guard lock(mu_);
  faults_.push_back(std::move(f));
}

void Server::drop_watches() {
  ++watch_generation_;
  store_.wake_all();
}

void Server::note_request(const std::string& method, const httplib::Request& req, int code) {
  json entry{{"method", method}, {"path", req.path}, {"code", code < 0 ? 200 : code}};
  json query = json::object();
  for (const auto& [k, v] : req.params) query[k] = v;
  entry["query"] = std::move(query);
  for (const char* h : {"Content-Type", "Accept", "User-Agent"}) {
    if (req.has_header(h)) entry["headers"][h] = req.get_header_value(h);
  }
  entry["authorized"] = req.has_header("Authorization");
  std::lock_guard lock(mu_);
  requests_.push_back(std::move(entry));
  while (requests_.size() > kMaxRequestsKept) requests_.pop_front();
}

bool Server::authenticate(const httplib::Request& req, httplib::Response& res, std::string& user) {
  if (req.ssl != nullptr) {
    if (X509* peer = SSL_get1_peer_certificate(const_cast<SSL*>(req.ssl)); peer != nullptr) {
      const bool verified = SSL_get_verify_result(req.ssl) == X509_V_OK;
      char cn[256] = {};
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
      X509_free(peer);
      if (verified) {
        user = cn;
        return true;
      }
    }
  }
  const std::string auth = req.get_header_value("Authorization");
  if (auth.starts_with("Bearer ")) {
    const std::string token = auth.substr(7);
    if (std::find(options_.tokens.begin(), options_.tokens.end(), token) != options_.tokens.end()) {
      user = "kgpu-test";
      return true;
    }
  } else if (options_.tokens.empty() && options_.client_ca_file.empty()) {
    user = "system:anonymous";
    return true;
  }
  send_status(res, 401, "Unauthorized", "Unauthorized");
  return false;
}

bool Server::apply_faults(const httplib::Request& req, httplib::Response& res, const std::string& method) {
  Fault hit;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(faults_.begin(), faults_.end(), [&](const Fault& f) {
      return (f.method.empty() || f.method == method) && (f.path.empty() || req.path.find(f.path) != std::string::npos);
    });
    if (it == faults_.end()) return false;
    hit = *it;
    if (it->times > 0 && --it->times == 0) faults_.erase(it);
  }
  if (hit.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hit.delay_ms));
  if (hit.status == 0) return false;
  if (hit.retry_after_s >= 0) res.set_header("Retry-After", std::to_string(hit.retry_after_s));
  switch (hit.status) {
    case 429:
      send_status(res, 429, "TooManyRequests", "the server has received too many requests and has asked us to try again later");
      break;
    case 403: {
      const auto parts = split_path(req.path);
      const bool core = !parts.empty() && parts[0] == "api";
      const size_t base = core ? 2 : 3;
      std::string resource = parts.size() > base ? parts[base] : "";
      std::string scope = "at the cluster scope";
      if (resource == "namespaces" && parts.size() > base + 2) {
        scope = fmt::format("in the namespace \"{}\"", parts[base + 1]);
        resource = parts[base + 2];
      }
      const std::string group = core || parts.size() < 2 ? "" : parts[1];
      const bool has_name = parts.size() > base + (scope.starts_with("in") ? 3 : 1);
      send_status(res, 403, "Forbidden",
                  fmt::format("{}{} is forbidden: User \"kgpu-test\" cannot {} resource \"{}\" in API group \"{}\" {}",
                              resource, group.empty() ? "" : "." + group,
                              verb_of(method, has_name, truthy(req, "watch")), resource, group, scope));
      break;
    }
    case 409:
      send_status(res, 409, "Conflict",
                  "Operation cannot be fulfilled: the object has been modified; please apply your changes to the "
                  "latest version and try again");
      break;
    case 500:
      send_status(res, 500, "InternalError", "Internal error occurred: injected fault");
      break;
    case 503:
      send_status(res, 503, "ServiceUnavailable", "the server is currently unable to handle the request");
      break;
    case 504:
      send_status(res, 504, "Timeout", "the server was unable to return a response in the time allotted");
      break;
    default:
      send_status(res, hit.status, "", fmt::format("injected fault {}", hit.status));
  }
  return true;
}

void Server::handle_standin(const httplib::Request& req, httplib::Response& res, const std::string& method) {
  const auto parts = split_path(req.path);  // standin v1 <what> ...
  const std::string what = parts.size() > 2 ? parts[2] : "";
  if (what == "faults" && method == "POST") {
    if (!json_depth_ok(req.body, kMaxJsonDepth)) return send_status(res, 400, "BadRequest", "nested too deeply");
    json j = json::parse(req.body, nullptr, false);
    if (!j.is_object()) return send_status(res, 400, "BadRequest", "a fault is a JSON object");
    if (j.value("dropWatches", false)) drop_watches();
    if (j.value("compact", false)) store_.compact();
    if (j.value("clear", false)) {
      std::lock_guard lock(mu_);
      faults_.clear();
    }
    if (j.contains("status") || j.contains("delayMs")) {
      Fault f;
      f.method = j.value("method", "");
      f.path = j.value("path", "");
      f.status = j.value("status", 0);
      f.retry_after_s = j.value("retryAfterSeconds", -1);
      f.delay_ms = j.value("delayMs", 0);
      f.times = j.value("times", 1);
      add_fault(std::move(f));
    }
    res.set_content(R"({"ok":true})", kJson);
    return;
  }
  if (what == "logs" && method == "PUT" && parts.size() == 6) {
    std::lock_guard lock(mu_);
    logs_[parts[3] + "/" + parts[4] + "/" + parts[5] + (truthy(req, "previous") ? "#previous" : "")] = req.body;
    res.set_content(R"({"ok":true})", kJson);
    return;
  }
  if (what == "requests" && method == "GET") {
    json out = json::array();
    {
      std::lock_guard lock(mu_);
      for (const auto& r : requests_) out.push_back(r);
    }
    res.set_content(out.dump(), kJson);
    return;
  }
  if (what == "requests" && method == "DELETE") {
    std::lock_guard lock(mu_);
    requests_.clear();
    res.set_content(R"({"ok":true})", kJson);
    return;
  }
  send_status(res, 404, "NotFound", "the server could not find the requested resource");
}

void Server::handle(const httplib::Request& req, httplib::Response& res, const std::string& method) {
  const std::string& path = req.path;
  if (path == "/healthz" || path == "/livez" || path == "/readyz") {
    res.set_content("ok", "text/plain");
    return;
  }
  if (path.starts_with("/standin/")) return handle_standin(req, res, method);
  std::string user;
  if (!authenticate(req, res, user)) return;
  if (apply_faults(req, res, method)) return;

  const auto parts = split_path(path);
  if (method == "GET") {
    if (path == "/version") {
      res.set_content(json{{"major", "1"},
                           {"minor", "35"},
                           {"gitVersion", "v1.35.0-kgpu-apiserver"},
                           {"gitCommit", "0000000000000000000000000000000000000000"},
                           {"gitTreeState", "clean"},
                           {"buildDate", "2026-01-01T00:00:00Z"},
                           {"goVersion", "n/a"},
                           {"compiler", "gc"},
                           {"platform", "linux/amd64"}}
                          .dump(),
                      kJson);
      return;
    }
    if (path == "/api") return res.set_content(registry_.api_versions(fmt::format("{}:{}", options_.host, port_)).dump(), kJson);
    if (path == "/apis") return res.set_content(registry_.group_list().dump(), kJson);
    if (parts.size() == 2 && parts[0] == "api") {
      const json list = registry_.resource_list("", parts[1]);
      if (!list.is_null()) return res.set_content(list.dump(), kJson);
    }
    if (parts.size() == 2 && parts[0] == "apis") {
      const json g = registry_.group(parts[1]);
      if (!g.is_null()) return res.set_content(g.dump(), kJson);
    }
    if (parts.size() == 3 && parts[0] == "apis") {
      const json list = registry_.resource_list(parts[1], parts[2]);
      if (!list.is_null()) return res.set_content(list.dump(), kJson);
    }
    if (path == "/openapi/v3") return res.set_content(registry_.openapi_index().dump(), kJson);
    if (parts.size() >= 4 && parts[0] == "openapi" && parts[1] == "v3") {
      const bool core = parts[2] == "api";
      const json doc = core ? registry_.openapi_group_version("", parts[3])
                            : (parts.size() == 5 ? registry_.openapi_group_version(parts[3], parts[4]) : json());
      if (!doc.is_null()) return res.set_content(doc.dump(), kJson);
    }
  }

  // /api/v1/... or /apis/<group>/<version>/...
  size_t i = 0;
  std::string group, version;
  if (parts.size() >= 2 && parts[0] == "api") {
    version = parts[1];
    i = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    group = parts[1];
    version = parts[2];
    i = 3;
  } else {
    return send_status(res, 404, "NotFound", "the server could not find the requested resource");
  }
  Request r;
  std::vector<std::string> rest(parts.begin() + static_cast<long>(i), parts.end());
  if (rest.size() >= 3 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize") {
    r.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  // pods/proxy: the rest of the path, whatever its depth, belongs to the pod.
  if (group.empty() && version == "v1" && !r.ns.empty() && rest.size() >= 3 && rest[0] == "pods" &&
      rest[2] == "proxy") {
    const std::string marker = "/pods/" + rest[1] + "/proxy";
    const size_t at = path.find(marker);
    const size_t tail = at == std::string::npos ? path.size() : at + marker.size();
    return serve_proxy(r.ns, rest[1], path.substr(std::min(tail, path.size())), req, res, method);
  }
  if (rest.empty() || rest.size() > 3) {
    return send_status(res, 404, "NotFound", "the server could not find the requested resource");
  }
  // The `bindings` collection: POST a Binding named after the pod (what the python client's
  // create_namespaced_binding and older schedulers use), the same as pods/<name>/binding.
  if (group.empty() && version == "v1" && rest.size() == 1 && rest[0] == "bindings" && !r.ns.empty()) {
    if (method != "POST") return send_status(res, 405, "MethodNotAllowed", "bindings only take create");
    if (!json_depth_ok(req.body, kMaxJsonDepth)) return send_status(res, 400, "BadRequest", "nested too deeply");
    const json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) return send_status(res, 400, "BadRequest", "the request body is not a JSON object");
    const std::string pod = body.contains("metadata") && body["metadata"].is_object()
                                ? body["metadata"].value("name", "")
                                : std::string();
    return send(res, store_.bind(*registry_.find("", "v1", "pods"), r.ns, pod, body));
  }
  r.res = registry_.find(group, version, rest[0]);
  if (r.res == nullptr) return send_status(res, 404, "NotFound", "the server could not find the requested resource");
  if (!r.ns.empty() && !r.res->namespaced) {
    return send_status(res, 404, "NotFound", "the server could not find the requested resource");
  }
  if (rest.size() >= 2) r.name = rest[1];
  if (rest.size() == 3) r.sub = rest[2];
  const bool pods = r.res->group.empty() && r.res->plural == "pods";
  if (!r.sub.empty() && !(r.sub == "status" && r.res->has_status) && !(pods && (r.sub == "binding" || r.sub == "log"))) {
    return send_status(res, 404, "NotFound", "the server could not find the requested resource");
  }
  if (r.res->namespaced && r.ns.empty() && (!r.name.empty() || method == "POST")) {
    return send_status(res, 404, "NotFound", "the server could not find the requested resource");
  }
  const bool dry_run = param(req, "dryRun") == "All";

  if (method == "GET" && r.sub == "log") return serve_log(r, req, res);
  if (method == "GET" && r.name.empty()) {
    if (truthy(req, "watch")) return serve_watch(r, req, res);
    ListOptions lo;
    lo.ns = r.ns;
    std::string error;
    if (auto s = parse_label_selector(param(req, "labelSelector"), error)) {
      lo.labels = std::move(*s);
    } else {
      return send_status(res, 400, "BadRequest", "unable to parse requirement: " + error);
    }
    if (auto s = parse_field_selector(param(req, "fieldSelector"), r.res->field_labels, error)) {
      lo.fields = std::move(*s);
    } else {
      return send_status(res, 400, "BadRequest", error);
    }
    if (const std::string limit = param(req, "limit"); !limit.empty()) {
      try {
        lo.limit = std::stoll(limit);
      } catch (const std::exception&) {
        return send_status(res, 400, "BadRequest", "limit: invalid value " + limit);
      }
    }
    lo.continue_token = param(req, "continue");
    return send(res, store_.list(*r.res, lo));
  }
  if (method == "GET") return send(res, store_.get(*r.res, r.ns, r.name));

  // Writes: JSON bodies; protobuf for what protobuf.h decodes (objects created or updated,
  // DeleteOptions); YAML for server-side apply.
  const std::string content_type = req.get_header_value("Content-Type");
  PatchType patch_kind = PatchType::kMerge;
  const bool is_patch_type = method == "PATCH" && patch_type(content_type, patch_kind);
  json body;
  if (!req.body.empty() && content_type.starts_with(kProtobufContentType)) {
    std::string error;
    if (method == "DELETE") {
      body = decode_delete_options(req.body, error);
    } else if ((method == "POST" && r.name.empty()) || (method == "PUT" && !r.name.empty() && r.sub.empty())) {
      body = decode_protobuf(req.body, r.res->kind, error);
    } else {
      error = fmt::format("protobuf is not understood for {} of {}", method, r.res->qualified());
    }
    if (body.is_null()) {
      return send_status(res, 415, "UnsupportedMediaType",
                         fmt::format("the body of the request was in an unknown format - accepted media types "
                                     "include: application/json, application/yaml ({})",
                                     error));
    }
  } else if (!req.body.empty()) {
    const bool json_like = content_type.empty() || content_type.starts_with("application/json") || is_patch_type;
    if (!json_like) {
      return send_status(res, 415, "UnsupportedMediaType",
                         fmt::format("the body of the request was in an unknown format - accepted media types "
                                     "include: application/json, application/yaml (got {})",
                                     content_type));
    }
    if (!json_depth_ok(req.body, kMaxJsonDepth)) {
      return send_status(res, 400, "BadRequest", fmt::format("the request body is nested deeper than {}", kMaxJsonDepth));
    }
    body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() && is_patch_type && patch_kind == PatchType::kApply &&
        content_type.starts_with("application/apply-patch+yaml")) {
      // An applied configuration in YAML: one document, read with the bounds of every manifest.
      auto docs = parse_manifests(req.body, "the applied configuration");
      if (!docs) return send_status(res, 400, "BadRequest", "error decoding YAML: " + docs.error().message);
      if (docs->size() != 1) {
        return send_status(res, 400, "BadRequest", "error decoding YAML: an applied configuration is one object");
      }
      body = std::move(docs->front());
    }
    if (body.is_discarded()) return send_status(res, 400, "BadRequest", "the request body is not valid JSON");
  }
  if ((method == "POST" || method == "PUT") && r.sub != "binding") {
    const auto unknown = unknown_fields(*r.res, body);
    const std::string validation = param(req, "fieldValidation");
    if (!unknown.empty() && validation == "Strict") {
      return send_status(res, 400, "BadRequest", fmt::format("strict decoding error: unknown field \"{}\"", unknown[0]));
    }
    if (!unknown.empty() && validation == "Warn") {
      res.set_header("Warning", fmt::format("299 - \"unknown field \\\"{}\\\"\"", unknown[0]));
    }
  }
  if (method == "POST" && r.sub == "binding") return send(res, store_.bind(*r.res, r.ns, r.name, body));
  if (method == "POST" && r.name.empty()) return send(res, store_.create(*r.res, r.ns, std::move(body), dry_run));
  const Part part = r.sub == "status" ? Part::kStatus : Part::kMain;
  if (method == "PUT" && !r.name.empty()) return send(res, store_.update(*r.res, r.ns, r.name, std::move(body), part, dry_run));
  if (method == "PATCH" && !r.name.empty()) {
    if (!is_patch_type) {
      return send_status(res, 415, "UnsupportedMediaType",
                         fmt::format("the body of the request was in an unknown format - accepted media types include: "
                                     "application/json-patch+json, application/merge-patch+json, "
                                     "application/apply-patch+yaml (got {})",
                                     content_type));
    }
    // kube-apiserver's PatchOptions validation.
    if (patch_kind == PatchType::kApply && param(req, "fieldManager").empty()) {
      return send_status(res, 422, "Invalid",
                         "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for "
                         "apply patch");
    }
    if (patch_kind != PatchType::kApply && req.has_param("force")) {
      return send_status(res, 422, "Invalid",
                         "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for "
                         "non-apply patch");
    }
    // Apply's `force` takes fields other managers own; without field ownership there is no
    // conflict to force, so it is accepted and changes nothing.
    return send(res, store_.patch(*r.res, r.ns, r.name, body, patch_kind, part, dry_run));
  }
  if (method == "DELETE" && !r.name.empty() && r.sub.empty()) {
    // DeleteOptions may ask for a dry run in the body as well as in the query.
    bool delete_dry_run = dry_run;
    if (body.is_object() && body.contains("dryRun") && body["dryRun"].is_array()) {
      for (const auto& d : body["dryRun"]) delete_dry_run = delete_dry_run || d == "All";
    }
    return send(res, store_.remove(*r.res, r.ns, r.name, body, delete_dry_run));
  }
  send_status(res, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
}

void Server::serve_log(const Request& r, const httplib::Request& req, httplib::Response& res) {
  const Answer pod = store_.get(*r.res, r.ns, r.name);
  if (pod.code != 200) return send(res, pod);
  std::string container = param(req, "container");
  std::vector<std::string> names;
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    for (const auto& c : pod.body["spec"].value(list, json::array())) names.push_back(c.value("name", ""));
  }
  if (container.empty()) {
    if (names.size() != 1) {
      return send_status(res, 400, "BadRequest",
                         fmt::format("a container name must be specified for pod {}, choose one of: [{}]", r.name,
                                     fmt::join(names, " ")));
    }
    container = names[0];
  } else if (std::find(names.begin(), names.end(), container) == names.end()) {
    return send_status(res, 400, "BadRequest",
                       fmt::format("container {} is not valid for pod {}", container, r.name));
  }
  std::string text;
  const bool previous = truthy(req, "previous");
  {
    std::lock_guard lock(mu_);
    const auto it = logs_.find(r.ns + "/" + r.name + "/" + container + (previous ? "#previous" : ""));
    if (it != logs_.end()) {
      text = it->second;
    } else if (previous) {
      return send_status(res, 400, "BadRequest",
                         fmt::format("previous terminated container \"{}\" in pod \"{}\" not found", container, r.name));
    }
  }
  if (text.empty()) {
    // No log stored: a container that never started has none (the kubelet's answer), one that
    // runs has an empty one.
    std::string waiting = "ContainerCreating";
    const json& st = pod.body.contains("status") ? pod.body["status"] : json::object();
    for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
      for (const auto& cs : st.value(list, json::array())) {
        if (cs.value("name", "") != container || !cs.contains("state") || !cs["state"].is_object()) continue;
        const json& state = cs["state"];
        if (state.contains("running") || state.contains("terminated")) waiting.clear();
        if (state.contains("waiting") && state["waiting"].is_object()) {
          waiting = state["waiting"].value("reason", "ContainerCreating");
        }
      }
    }
    if (!waiting.empty()) {
      return send_status(res, 400, "BadRequest",
                         fmt::format("container \"{}\" in pod \"{}\" is waiting to start: {}", container, r.name,
                                     waiting));
    }
  }
  if (const std::string tail = param(req, "tailLines"); !tail.empty()) {
    long n = 0;
    try {
      n = std::stol(tail);
    } catch (const std::exception&) {
      return send_status(res, 400, "BadRequest", "tailLines: invalid value " + tail);
    }
    size_t pos = text.size();
    if (!text.empty() && text.back() == '\n') --pos;
    for (long k = 0; k < n && pos != std::string::npos && pos > 0; ++k) pos = text.rfind('\n', pos - 1);
    if (pos != std::string::npos && pos < text.size() && n >= 0) text = text.substr(pos == 0 && text[0] != '\n' ? 0 : pos + 1);
  }
  res.set_content(text, "text/plain");
}

void Server::serve_watch(const Request& r, const httplib::Request& req, httplib::Response& res) {
  struct Watch {
    const ResourceInfo* res;
    std::string ns;
    Selector labels, fields;
    uint64_t rv = 0;
    bool initial = false;        // send the current objects as ADDED first
    bool initial_end = false;    // then a BOOKMARK marking the end of them
    bool bookmarks = false;
    bool expired = false;
    std::chrono::steady_clock::time_point deadline, next_bookmark;
    uint64_t generation = 0;
  };
  auto w = std::make_shared<Watch>();
  w->res = r.res;
  w->ns = r.ns;
  std::string error;
  if (auto s = parse_label_selector(param(req, "labelSelector"), error)) {
    w->labels = std::move(*s);
  } else {
    return send_status(res, 400, "BadRequest", "unable to parse requirement: " + error);
  }
  if (auto s = parse_field_selector(param(req, "fieldSelector"), r.res->field_labels, error)) {
    w->fields = std::move(*s);
  } else {
    return send_status(res, 400, "BadRequest", error);
  }
  const std::string rv = param(req, "resourceVersion");
  w->bookmarks = truthy(req, "allowWatchBookmarks");
  const bool send_initial = truthy(req, "sendInitialEvents");
  if (send_initial && param(req, "resourceVersionMatch") != "NotOlderThan") {
    return send_status(res, 422, "Invalid",
                       "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                       "NotOlderThan");
  }
  if (rv.empty() || rv == "0" || send_initial) {
    w->initial = true;
    w->initial_end = send_initial;
  } else {
    try {
      w->rv = std::stoull(rv);
    } catch (const std::exception&) {
      return send_status(res, 400, "BadRequest", "resourceVersion: Invalid value: \"" + rv + "\": must be a number");
    }
    if (w->rv < store_.oldest_watchable()) w->expired = true;
  }
  int timeout_s = 1800;
  if (const std::string t = param(req, "timeoutSeconds"); !t.empty()) {
    try {
      timeout_s = std::clamp(std::stoi(t), 0, 3600);
    } catch (const std::exception&) {
      return send_status(res, 400, "BadRequest", "timeoutSeconds: invalid value " + t);
    }
  }
  const auto now = std::chrono::steady_clock::now();
  w->deadline = now + std::chrono::seconds(timeout_s);
  w->next_bookmark = now + std::chrono::milliseconds(options_.bookmark_interval_ms);
  w->generation = watch_generation_.load();
  res.status = 200;
  res.set_header("Cache-Control", "no-cache, private");
  // The parameter keeps cpp-httplib from gzip-compressing the stream (it compresses exactly
  // "application/json", and its compressor holds small events back until the buffer fills).
  res.set_chunked_content_provider("application/json; charset=utf-8", [this, w](size_t, httplib::DataSink& sink) {
    const auto write_event = [&](std::string_view type, const json& object) {
      std::string line = json{{"type", type}, {"object", object}}.dump();
      line += '\n';
      return sink.write(line.data(), line.size());
    };
    const auto selected = [&](const json* o) {
      if (o == nullptr) return false;
      if (!w->ns.empty()) {
        const auto m = o->find("metadata");
        if (m == o->end() || m->value("namespace", "") != w->ns) return false;
      }
      return matches_labels(w->labels, *o) && matches_fields(w->fields, *o);
    };
    const auto bookmark = [&](bool initial_end) {
      json meta{{"resourceVersion", std::to_string(w->rv)}};
      if (initial_end) meta["annotations"] = json{{"k8s.io/initial-events-end", "true"}};
      return write_event("BOOKMARK",
                         json{{"kind", w->res->kind}, {"apiVersion", w->res->api_version()}, {"metadata", meta}});
    };
    if (w->expired) {
      write_event("ERROR", status_answer(410, "Expired",
                                         fmt::format("too old resource version: {} ({})", w->rv, store_.oldest_watchable()))
                               .body);
      sink.done();
      return true;
    }
    if (w->initial) {
      w->initial = false;
      for (const auto& o : store_.snapshot(*w->res, w->ns, w->rv)) {
        if (selected(o.get()) && !write_event("ADDED", *o)) return false;
      }
      if (w->initial_end && !bookmark(true)) return false;
      return true;
    }
    std::vector<Change> changes;
    const auto result = store_.changes_after(*w->res, w->rv, std::chrono::milliseconds(500), changes, [&] {
      return stopping_.load() || watch_generation_.load() != w->generation;
    });
    if (result == Store::WatchResult::kStopped) {
      sink.done();
      return true;
    }
    if (result == Store::WatchResult::kExpired) {
      w->expired = true;
      return true;
    }
    for (const auto& c : changes) {
      const bool now_in = selected(c.object.get());
      const bool was_in = selected(c.previous.get());
      std::string_view type;
      if (c.type == "ADDED") {
        type = now_in ? "ADDED" : "";
      } else if (c.type == "DELETED") {
        type = now_in || was_in ? "DELETED" : "";
      } else {
        type = now_in && was_in ? "MODIFIED" : now_in ? "ADDED" : was_in ? "DELETED" : "";
      }
      if (!type.empty() && !write_event(type, *c.object)) return false;
    }
    const auto t = std::chrono::steady_clock::now();
    if (w->bookmarks && t >= w->next_bookmark) {
      w->next_bookmark = t + std::chrono::milliseconds(options_.bookmark_interval_ms);
      if (!bookmark(false)) return false;
    }
    if (t >= w->deadline) {
      sink.done();
      return true;
    }
    return sink.is_writable();
  });
}

}  // namespace kgpu::apiserver
