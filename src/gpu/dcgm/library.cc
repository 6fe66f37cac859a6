#include "gpu/dcgm/library.h"

#include <algorithm>
#include <cstdlib>

namespace kgpu::dcgm {

namespace {

// Entry points without which kgpu cannot read profiling fields, for either kind of endpoint.
constexpr const char* kRequired[] = {"dcgmInit",
                                     "dcgmShutdown",
                                     "dcgmGetAllSupportedDevices",
                                     "dcgmGroupCreate",
                                     "dcgmGroupAddEntity",
                                     "dcgmFieldGroupCreate",
                                     "dcgmWatchFields",
                                     "dcgmEntitiesGetLatestValues"};

}  // namespace

Result<std::unique_ptr<Library>> Library::open(const std::string& path) {
  auto so = SharedLibrary::open_first(
      SharedLibrary::candidates(path, kLibraryEnv, {std::begin(kDefaultLibraries), std::end(kDefaultLibraries)}));
  if (!so)
    return fail(ErrorCode::kNotFound, "cannot load the DCGM library ({}): DCGM does not seem to be installed here",
                so.error().message);
  // DCGM starts threads (embedded host engine): SharedLibrary keeps its code mapped.
  std::unique_ptr<Library> lib(new Library(std::move(*so)));
#define KGPU_DCGM_RESOLVE(name, ret, params)                              \
  lib->sym_.name = reinterpret_cast<fn::name>(lib->so_.symbol(#name)); \
  if (lib->sym_.name == nullptr) lib->missing_.push_back(#name);
  KGPU_DCGM_FUNCTIONS(KGPU_DCGM_RESOLVE)
#undef KGPU_DCGM_RESOLVE
  lib->sym_.errorString = reinterpret_cast<fn::errorString>(lib->so_.symbol("errorString"));
  return lib;
}

Library::~Library() {
  if (initialized_ && sym_.dcgmShutdown != nullptr) sym_.dcgmShutdown();
}

std::string Library::error_string(Return r) const {
  std::string name = return_name(r);
  if (sym_.errorString != nullptr) {
    if (const char* text = sym_.errorString(r); text != nullptr && *text != '\0' && name != text) {
      return std::string(text) + " (" + name + ")";
    }
  }
  return name;
}

Result<void> Library::init(bool remote) {
  std::vector<std::string> need(std::begin(kRequired), std::end(kRequired));
  need.push_back(remote ? "dcgmConnect_v2" : "dcgmStartEmbedded");
  std::string lacking;
  for (const auto& n : need) {
    if (std::find(missing_.begin(), missing_.end(), n) == missing_.end()) continue;
    lacking += lacking.empty() ? n : ", " + n;
  }
  if (!lacking.empty()) {
    return fail(ErrorCode::kNotSupported,
                "the DCGM library '{}' does not export {}: not a usable DCGM (kgpu needs 3.x "
                "or 4.x)",
                path(), lacking);
  }
  if (initialized_) return {};
  const Return r = sym_.dcgmInit();
  if (r != kOk) {
    return fail(ErrorCode::kUnavailable, "dcgmInit failed in '{}': {}", path(), error_string(r));
  }
  initialized_ = true;
  return {};
}

std::string Endpoint::describe() const {
  if (embedded) return "DCGM embedded in the agent";
  return unix_socket ? "the DCGM host engine on unix socket " + address : "the DCGM host engine at " + address;
}

Result<Endpoint> parse_endpoint(const std::string& remote) {
  Endpoint e;
  if (remote.empty()) return e;
  e.embedded = false;
  if (remote.size() > 4096 || remote.find_first_of(" \t\r\n") != std::string::npos) {
    return fail(ErrorCode::kInvalidArgument, "--remote-hostengine-info '{}': not an address", remote.substr(0, 64));
  }
  if (remote.starts_with("unix://") || remote.starts_with("/")) {
    e.unix_socket = true;
    e.address = remote.starts_with("unix://") ? remote.substr(7) : remote;
    if (!e.address.starts_with("/")) {
      return fail(ErrorCode::kInvalidArgument, "--remote-hostengine-info '{}': a unix socket needs an absolute path",
                  remote);
    }
    return e;
  }
  if (const auto scheme = remote.find("://"); scheme != std::string::npos) {
    if (remote.substr(0, scheme) != "tcp") {
      return fail(ErrorCode::kInvalidArgument,
                  "--remote-hostengine-info '{}': unsupported scheme '{}' (use <host>:<port>, tcp://<host>:<port> or "
                  "unix:///<socket>)",
                  remote, remote.substr(0, std::min<size_t>(scheme, 16)));
    }
    if (scheme + 3 == remote.size()) {
      return fail(ErrorCode::kInvalidArgument, "--remote-hostengine-info '{}': no host", remote);
    }
    return parse_endpoint(remote.substr(scheme + 3));
  }
  std::string host = remote, port;
  if (remote.starts_with("[")) {
    const auto close = remote.find(']');
    if (close == std::string::npos) {
      return fail(ErrorCode::kInvalidArgument, "--remote-hostengine-info '{}': unclosed '[' in an IPv6 address",
                  remote);
    }
    host = remote.substr(0, close + 1);
    const std::string rest = remote.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':')
        return fail(ErrorCode::kInvalidArgument, "--remote-hostengine-info '{}': expected ':<port>' after ']'", remote);
      port = rest.substr(1);
    }
  } else if (const auto colon = remote.rfind(':'); colon != std::string::npos) {
    if (remote.find(':') != colon) {
      return fail(ErrorCode::kInvalidArgument,
                  "--remote-hostengine-info '{}': write an IPv6 address as [<address>]:<port>", remote);
    }
    host = remote.substr(0, colon);
    port = remote.substr(colon + 1);
  }
  if (host.empty() || host == "[]") {
    return fail(ErrorCode::kInvalidArgument, "--remote-hostengine-info '{}': no host", remote);
  }
  if (port.empty()) {
    if (remote.ends_with(":"))
      return fail(ErrorCode::kInvalidArgument, "--remote-hostengine-info '{}': empty port", remote);
    port = std::to_string(kDefaultPort);
  }
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return fail(ErrorCode::kInvalidArgument, "--remote-hostengine-info '{}': port '{}' is not 1..65535", remote, port);
  }
  e.address = host + ":" + port;
  return e;
}

Result<std::unique_ptr<Connection>> Connection::open(const Library& lib, const Endpoint& where,
                                                     std::chrono::milliseconds timeout) {
  const auto& s = lib.symbols();
  Handle h = 0;
  if (where.embedded) {
    const Return r = lib.call(s.dcgmStartEmbedded, kOperationModeAuto, &h);
    if (r != kOk) {
      return fail(ErrorCode::kUnavailable,
                  "cannot start DCGM embedded in the agent: {}; install DCGM's modules (datacenter-gpu-manager) or "
                  "run nv-hostengine and point -r / DCGM_REMOTE_HOSTENGINE_INFO at it",
                  lib.error_string(r));
    }
  } else {
    ConnectParams p{kConnectParamsVersion, 0, static_cast<unsigned>(std::max<long long>(1, timeout.count())),
                    where.unix_socket ? 1u : 0u};
    const Return r = lib.call(s.dcgmConnect_v2, where.address.c_str(), &p, &h);
    if (r != kOk) {
      return fail(ErrorCode::kUnavailable, "cannot reach {}: {}; is nv-hostengine running there?", where.describe(),
                  lib.error_string(r));
    }
  }
  return std::unique_ptr<Connection>(new Connection(lib, where, h));
}

Connection::~Connection() {
  const auto& s = lib_.symbols();
  if (where_.embedded) {
    lib_.call(s.dcgmStopEmbedded, handle_);
  } else {
    lib_.call(s.dcgmDisconnect, handle_);
  }
}

}  // namespace kgpu::dcgm
