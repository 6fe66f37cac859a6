#include "kubelet_dra_peer.h"

#include "wire.h"

namespace kgpu::testing {

namespace {

using namespace wire;  // NOLINT: the shared protobuf wire codec (wire.h)

constexpr const char* kGetInfo = "/pluginregistration.Registration/GetInfo";
constexpr const char* kNotify = "/pluginregistration.Registration/NotifyRegistrationStatus";

std::string dra_method(const std::string& version, const char* rpc) {
  return "/k8s.io.kubelet.pkg.apis.dra." + version + ".DRAPlugin/" + rpc;
}

Err parse_info(std::string_view in, DraPluginInfo& info) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    std::string s;
    switch (f.number) {
      case 1:
        e = get_string("PluginInfo", "type", f, info.type);
        break;
      case 2:
        e = get_string("PluginInfo", "name", f, info.name);
        break;
      case 3:
        e = get_string("PluginInfo", "endpoint", f, info.endpoint);
        break;
      case 4:
        e = get_string("PluginInfo", "supported_versions", f, s);
        if (!e) info.supported_versions.push_back(std::move(s));
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

Err parse_device(std::string_view in, DraDevice& d) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    std::string s;
    switch (f.number) {
      case 1:
        e = get_string("Device", "request_names", f, s);
        if (!e) d.request_names.push_back(std::move(s));
        break;
      case 2:
        e = get_string("Device", "pool_name", f, d.pool_name);
        break;
      case 3:
        e = get_string("Device", "device_name", f, d.device_name);
        break;
      case 4:
        e = get_string("Device", "cdi_device_ids", f, s);
        if (!e) d.cdi_device_ids.push_back(std::move(s));
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

Err parse_prepared(std::string_view in, DraPrepared& p) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) {
      DraDevice d;
      e = get_message("NodePrepareResourceResponse", "devices", f,
                      [&](std::string_view b) { return parse_device(b, d); });
      if (!e) p.devices.push_back(std::move(d));
    }
    if (f.number == 2) e = get_string("NodePrepareResourceResponse", "error", f, p.error);
    if (e) return e;
  }
  return r.error();
}

Err parse_unprepared(std::string_view in, std::string& error) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number == 1) {
      if (auto e = get_string("NodeUnprepareResourceResponse", "error", f, error)) return e;
    }
  }
  return r.error();
}

// map<string, V> claims = 1: entries {key = 1, value = 2}; a missing value is V's default.
template <typename V, typename ParseValue>
Err parse_claim_map(std::string_view in, const char* message, std::map<std::string, V>& out, ParseValue&& parse_value) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    std::string key;
    V value{};
    auto e = get_message(message, "claims", f, [&](std::string_view entry) -> Err {
      Reader er(entry);
      Field ef;
      while (er.next(ef)) {
        Err x;
        if (ef.number == 1) x = get_string("ClaimsEntry", "key", ef, key);
        if (ef.number == 2)
          x = get_message("ClaimsEntry", "value", ef, [&](std::string_view b) { return parse_value(b, value); });
        if (x) return x;
      }
      return er.error();
    });
    if (e) return e;
    out[key] = std::move(value);
  }
  return r.error();
}

template <typename T, typename Decode>
RpcResult<T> decoded(RpcResult<std::string> bytes, Decode&& decode) {
  if (!bytes) return std::unexpected(std::move(bytes.error()));
  auto value = decode(*bytes);
  if (!value) return std::unexpected(RpcError{grpc::StatusCode::INTERNAL, std::move(value.error()), true});
  return std::move(*value);
}

}  // namespace

Decoded<DraPluginInfo> decode_plugin_info(std::string_view bytes) {
  return decode_with<DraPluginInfo>(bytes, parse_info);
}

std::string encode_registration_status(bool registered, const std::string& error) {
  std::string out;
  put_bool(out, 1, registered);
  put_string(out, 2, error);
  return out;
}

std::string encode_claims(const std::vector<DraClaim>& claims) {
  std::string out;
  for (const auto& c : claims) {
    std::string m;
    put_string(m, 1, c.ns);
    put_string(m, 2, c.uid);
    put_string(m, 3, c.name);
    put_len(out, 1, m);
  }
  return out;
}

Decoded<std::map<std::string, DraPrepared>> decode_prepare_response(std::string_view bytes) {
  return decode_with<std::map<std::string, DraPrepared>>(bytes, [](std::string_view b, auto& out) {
    return parse_claim_map(b, "NodePrepareResourcesResponse", out, parse_prepared);
  });
}

Decoded<std::map<std::string, std::string>> decode_unprepare_response(std::string_view bytes) {
  return decode_with<std::map<std::string, std::string>>(bytes, [](std::string_view b, auto& out) {
    return parse_claim_map(b, "NodeUnprepareResourcesResponse", out, parse_unprepared);
  });
}

RpcResult<DraPluginInfo> dra_get_info(const std::string& registration_socket) {
  return decoded<DraPluginInfo>(call_unary(registration_socket, kGetInfo, ""), decode_plugin_info);
}

RpcResult<Empty> dra_notify(const std::string& registration_socket, bool registered, const std::string& error) {
  return decoded<Empty>(call_unary(registration_socket, kNotify, encode_registration_status(registered, error)),
                        decode_empty);
}

RpcResult<DraPluginInfo> dra_register(const std::string& registration_socket) {
  auto info = dra_get_info(registration_socket);
  if (!info) return info;
  std::string why;
  if (info->type != "DRAPlugin") why = "plugin type '" + info->type + "' is not DRAPlugin";
  bool speaks = false;
  for (const auto& v : info->supported_versions) speaks = speaks || v == "v1.DRAPlugin" || v == "v1beta1.DRAPlugin";
  if (why.empty() && !speaks) why = "no supported version (want v1.DRAPlugin or v1beta1.DRAPlugin)";
  if (why.empty() && info->endpoint.empty()) why = "empty endpoint";
  auto notified = dra_notify(registration_socket, why.empty(), why);
  if (!notified) return std::unexpected(notified.error());
  if (!why.empty()) return std::unexpected(RpcError{grpc::StatusCode::FAILED_PRECONDITION, why, false});
  return info;
}

RpcResult<std::map<std::string, DraPrepared>> dra_prepare(const std::string& endpoint, const std::string& version,
                                                          const std::vector<DraClaim>& claims,
                                                          std::chrono::milliseconds deadline) {
  return decoded<std::map<std::string, DraPrepared>>(
      call_unary(endpoint, dra_method(version, "NodePrepareResources"), encode_claims(claims), deadline),
      decode_prepare_response);
}

RpcResult<std::map<std::string, std::string>> dra_unprepare(const std::string& endpoint, const std::string& version,
                                                            const std::vector<DraClaim>& claims,
                                                            std::chrono::milliseconds deadline) {
  return decoded<std::map<std::string, std::string>>(
      call_unary(endpoint, dra_method(version, "NodeUnprepareResources"), encode_claims(claims), deadline),
      decode_unprepare_response);
}

}  // namespace kgpu::testing
