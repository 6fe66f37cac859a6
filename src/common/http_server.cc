#include "common/http_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace kgpu {

namespace {

// Connections accepted past the limit, only to be answered 503 and closed.
constexpr unsigned kReserve = 64;

void release_body(void* cls) { delete static_cast<std::shared_ptr<const std::string>*>(cls); }

MHD_Result queue(MHD_Connection* c, const HttpResponse& r, bool close = false) {
  auto* keep = new std::shared_ptr<const std::string>(r.body ? r.body : std::make_shared<const std::string>());
  MHD_Response* resp = MHD_create_response_from_buffer_with_free_callback_cls(
      (*keep)->size(), const_cast<char*>((*keep)->data()), &release_body, keep);
  if (resp == nullptr) {
    delete keep;
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
  if (r.status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  if (r.status == MHD_HTTP_SERVICE_UNAVAILABLE && close) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  const MHD_Result q = MHD_queue_response(c, static_cast<unsigned>(r.status), resp);
  MHD_destroy_response(resp);
  return q;
}

// The server's own answers (404, 405, 413, 503; anything else reads as an internal error). Bodies
// are built once and shared by every response.
HttpResponse plain(int status) {
  static const auto not_found = std::make_shared<const std::string>("not found\n");
  static const auto bad_method = std::make_shared<const std::string>("only GET and HEAD are served\n");
  static const auto too_large = std::make_shared<const std::string>("request bodies are not accepted\n");
  static const auto busy = std::make_shared<const std::string>("too many connections; try again\n");
  static const auto internal = std::make_shared<const std::string>("internal error\n");
  const auto& body = status == 404 ? not_found
                     : status == 405 ? bad_method
                     : status == 413 ? too_large
                     : status == 503 ? busy
                                     : internal;
  return {status, "text/plain; charset=utf-8", body};
}

void set_nodelay(void*, MHD_Connection* c, void**, MHD_ConnectionNotificationCode code) {
  if (code != MHD_CONNECTION_NOTIFY_STARTED) return;
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == nullptr) return;
  const int one = 1;
  setsockopt(info->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  std::map<std::string, Handler, std::less<>> routes;
  MHD_Daemon* daemon = nullptr;

  // More connections open than the limit (the daemon accepts kReserve more, to say so).
  bool over_limit() const {
    const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info != nullptr && info->num_connections > options.max_connections;
  }

  static MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                               const char*, size_t* upload_size, void** state) {
    auto* self = static_cast<Impl*>(cls);
    const std::string_view m(method);
    if (*state == nullptr) {
      // Headers are in; decide before any body is read.
      *state = self;
      if (self->over_limit()) return queue(c, plain(503), true);
      if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD) return queue(c, plain(405), true);
      const char* length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
      const char* chunked = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
      if ((length != nullptr && std::string_view(length) != "0") || chunked != nullptr) {
        return queue(c, plain(413), true);
      }
      return MHD_YES;
    }
    if (*upload_size != 0) {
      *upload_size = 0;  // unreachable for accepted requests (no body); discard defensively
      return MHD_YES;
    }
    auto it = self->routes.find(std::string_view(url));
    if (it == self->routes.end()) return queue(c, plain(404));
    try {
      return queue(c, it->second());
    } catch (const std::exception&) {
      return queue(c, plain(500), true);
    }
  }
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::route(std::string path, Handler handler) { impl_->routes[std::move(path)] = std::move(handler); }

Result<int> HttpServer::start(const std::string& host, int port) {
  if (impl_->daemon != nullptr) return fail(ErrorCode::kInternal, "HTTP server already started");
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
  if (a->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  impl_->daemon = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Impl::on_request, impl_.get(),  //
      MHD_OPTION_LISTEN_SOCKET, fd,                                //
      MHD_OPTION_CONNECTION_LIMIT, impl_->options.max_connections + kReserve,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, impl_->options.max_header_bytes,
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(impl_->options.idle_timeout.count()),
      MHD_OPTION_NOTIFY_CONNECTION, &set_nodelay, nullptr,  //
      MHD_OPTION_END);
  if (impl_->daemon == nullptr) {
    close(fd);
    return fail(ErrorCode::kUnavailable, "cannot start the HTTP server on {}:{}", host, port);
  }
  return bound_port;
}

void HttpServer::stop() {
  if (impl_->daemon == nullptr) return;
  MHD_stop_daemon(impl_->daemon);  // closes the listening socket and every connection
  impl_->daemon = nullptr;
}

unsigned HttpServer::connections() const {
  if (impl_->daemon == nullptr) return 0;
  const MHD_DaemonInfo* info = MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
  return info == nullptr ? 0 : info->num_connections;
}

}  // namespace kgpu
