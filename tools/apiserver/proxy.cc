// The pods/proxy subresource: GET /api/v1/namespaces/<ns>/pods/<[scheme:]name[:port]>/proxy[/<path>]
// forwarded to the pod's status.podIP, as kube-apiserver's pod ResourceLocation and proxy handler
// do (docs: tools/apiserver/README.md, "pods/proxy").
#include <fmt/format.h>
#include <httplib.h>

#include <memory>

#include "server.h"

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

// kube-apiserver's SplitSchemeNamePort: "name", "name:port" or "scheme:name:port".
bool split_scheme_name_port(const std::string& id, std::string& scheme, std::string& name, std::string& port) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = id.find(':', start);
    parts.push_back(id.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() == 1) {
    name = parts[0];
  } else if (parts.size() == 2) {
    name = parts[0];
    port = parts[1];
  } else if (parts.size() == 3) {
    scheme = parts[0];
    name = parts[1];
    port = parts[2];
    if (scheme != "http" && scheme != "https") return false;
  } else {
    return false;
  }
  return !name.empty();
}

}  // namespace

void Server::serve_proxy(const std::string& ns, const std::string& id, const std::string& rest,
                         const httplib::Request& req, httplib::Response& res, const std::string& method) {
  std::string scheme, name, port;
  if (!split_scheme_name_port(id, scheme, name, port)) {
    return send_status(res, 400, "BadRequest", fmt::format("invalid pod request \"{}\"", id));
  }
  const ResourceInfo* pods = registry_.find("", "v1", "pods");
  const Answer pod = store_.get(*pods, ns, name);
  if (pod.code != 200) {
    res.status = pod.code;
    res.set_content(pod.body.dump(), "application/json");
    return;
  }
  // Only GET is forwarded: what kgpu and its tests read through the proxy.
  if (method != "GET") {
    return send_status(res, 405, "MethodNotAllowed", "the stand-in proxies GET only");
  }
  if (port.empty()) {
    // kube-apiserver: the first port of the first container that declares one.
    const auto spec = pod.body.find("spec");
    const json containers = spec != pod.body.end() && spec->is_object() ? spec->value("containers", json::array())
                                                                          : json::array();
    for (const auto& c : containers.is_array() ? containers : json::array()) {
      const json ports = c.is_object() ? c.value("ports", json::array()) : json::array();
      if (ports.is_array() && !ports.empty() && ports[0].is_object() && ports[0].contains("containerPort") &&
          ports[0]["containerPort"].is_number_integer()) {
        port = std::to_string(ports[0]["containerPort"].get<int>());
        break;
      }
    }
  }
  int port_number = 80;
  if (!port.empty()) {
    // kube-apiserver puts the port into the URL as given: a name is not resolved, and the dial fails.
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (end == port.c_str() || *end != '\0' || p <= 0 || p > 65535) {
      return send_status(res, 503, "ServiceUnavailable",
                         fmt::format("error trying to reach service: dial tcp: address {}: invalid port", port));
    }
    port_number = static_cast<int>(p);
  }
  std::string ip;
  if (const auto st = pod.body.find("status"); st != pod.body.end() && st->is_object()) ip = st->value("podIP", "");
  // kube-apiserver refuses addresses that are not global unicast; the stand-in's pods run on the
  // loopback, so only an empty or unspecified address is refused.
  if (ip.empty() || ip == "0.0.0.0" || ip == "::") return send_status(res, 400, "BadRequest", "address not allowed");

  std::string path = rest.empty() ? "/" : rest;
  if (!req.params.empty()) path += "?" + httplib::detail::params_to_query_str(req.params);
  const std::string host_port = ip.find(':') != std::string::npos ? fmt::format("[{}]:{}", ip, port_number)
                                                                  : fmt::format("{}:{}", ip, port_number);
  std::unique_ptr<httplib::ClientImpl> client;
  if (scheme == "https") {
    auto c = std::make_unique<httplib::SSLClient>(ip, port_number);
    c->enable_server_certificate_verification(false);  // kube-apiserver does not verify pods either
    client = std::move(c);
  } else {
    client = std::make_unique<httplib::ClientImpl>(ip, port_number);
  }
  const auto timeout = std::chrono::milliseconds(options_.proxy_timeout_ms);
  client->set_connection_timeout(timeout);
  client->set_read_timeout(timeout);
  client->set_write_timeout(timeout);
  client->set_keep_alive(false);
  httplib::Headers headers;
  for (const char* h : {"Accept", "User-Agent"}) {
    if (req.has_header(h)) headers.emplace(h, req.get_header_value(h));
  }
  std::string body;
  bool too_large = false;
  int upstream_status = 0;
  std::string content_type;
  auto result = client->Get(
      path, headers,
      [&](const httplib::Response& r) {
        upstream_status = r.status;
        content_type = r.get_header_value("Content-Type");
        return true;
      },
      [&](const char* data, size_t len) {
        if (body.size() + len > options_.proxy_max_body_bytes) {
          too_large = true;
          return false;
        }
        body.append(data, len);
        return true;
      });
  if (!result) {
    std::string why;
    switch (result.error()) {
      case httplib::Error::Connection:
        why = fmt::format("dial tcp {}: connect: connection refused", host_port);
        break;
      case httplib::Error::ConnectionTimeout:
        why = fmt::format("dial tcp {}: i/o timeout", host_port);
        break;
      case httplib::Error::Read:
        why = fmt::format("read tcp {}: no answer within {} ms or connection closed", host_port,
                          options_.proxy_timeout_ms);
        break;
      case httplib::Error::Canceled:
        why = too_large ? fmt::format("the answer from {} exceeds {} bytes", host_port, options_.proxy_max_body_bytes)
                        : "canceled";
        break;
      default:
        why = fmt::format("{} {}", host_port, httplib::to_string(result.error()));
    }
    return send_status(res, 503, "ServiceUnavailable", "error trying to reach service: " + why);
  }
  res.status = upstream_status;
  res.set_content(std::move(body), content_type.empty() ? "text/plain" : content_type);
}

}  // namespace kgpu::apiserver
