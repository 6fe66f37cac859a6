#include "device_plugin_peer.h"

#include "wire.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace kgpu::testing {

namespace {

constexpr const char* kRegister = "/v1beta1.Registration/Register";
constexpr const char* kGetOptions = "/v1beta1.DevicePlugin/GetDevicePluginOptions";
constexpr const char* kListAndWatch = "/v1beta1.DevicePlugin/ListAndWatch";
constexpr const char* kGetPreferred = "/v1beta1.DevicePlugin/GetPreferredAllocation";
constexpr const char* kAllocate = "/v1beta1.DevicePlugin/Allocate";
constexpr const char* kPreStart = "/v1beta1.DevicePlugin/PreStartContainer";
constexpr const char* kVersion = "v1beta1";

using namespace wire;  // NOLINT: the shared protobuf wire codec (wire.h)

Err parse_options(std::string_view in, PluginOptions& o) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) e = get_bool("DevicePluginOptions", "pre_start_required", f, o.pre_start_required);
    if (f.number == 2) {
      e = get_bool("DevicePluginOptions", "get_preferred_allocation_available", f,
                   o.get_preferred_allocation_available);
    }
    if (e) return e;
  }
  return r.error();
}

Err parse_register(std::string_view in, Registration& reg) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    switch (f.number) {
      case 1:
        e = get_string("RegisterRequest", "version", f, reg.version);
        break;
      case 2:
        e = get_string("RegisterRequest", "endpoint", f, reg.endpoint);
        break;
      case 3:
        e = get_string("RegisterRequest", "resource_name", f, reg.resource_name);
        break;
      case 4:
        e = get_message("RegisterRequest", "options", f,
                        [&](std::string_view b) { return parse_options(b, reg.options); });
        reg.has_options = true;
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

// Messages whose only known field is `repeated string <field> = 1`.
Err parse_string_list(std::string_view in, std::string_view message, std::string_view field,
                      std::vector<std::string>& out) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    std::string s;
    if (auto e = get_string(message, field, f, s)) return e;
    out.push_back(std::move(s));
  }
  return r.error();
}

// Messages whose only known field is `repeated <Sub> <field> = 1`: parse(bytes, T&) per element.
template <typename T, typename Parse>
Err parse_message_list(std::string_view in, std::string_view message, std::string_view field, std::vector<T>& out,
                       Parse&& parse) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    T item{};
    const std::string indexed = std::string(field) + "[" + std::to_string(out.size()) + "]";
    if (auto e = get_message(message, indexed, f, [&](std::string_view b) { return parse(b, item); })) return e;
    out.push_back(std::move(item));
  }
  return r.error();
}

Err parse_numa_node(std::string_view in, int64_t& id) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    if (auto e = check_type("NUMANode", "ID", f, kVarint)) return e;
    id = static_cast<int64_t>(f.varint);
  }
  return r.error();
}

Err parse_device(std::string_view in, DeviceEntry& d) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    switch (f.number) {
      case 1:
        e = get_string("Device", "ID", f, d.id);
        break;
      case 2:
        e = get_string("Device", "health", f, d.health);
        break;
      case 3:  // TopologyInfo; repeated occurrences merge, so nodes append.
        e = get_message("Device", "topology", f, [&](std::string_view b) {
          return parse_message_list<int64_t>(b, "TopologyInfo", "nodes", d.numa_nodes, parse_numa_node);
        });
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

Err parse_map_entry(std::string_view in, std::string_view message, std::map<std::string, std::string>& m) {
  std::string key, value;
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) e = get_string(message, "key", f, key);
    if (f.number == 2) e = get_string(message, "value", f, value);
    if (e) return e;
  }
  if (r.error()) return r.error();
  m[key] = std::move(value);
  return std::nullopt;
}

Err parse_mount(std::string_view in, MountEntry& m) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) e = get_string("Mount", "container_path", f, m.container_path);
    if (f.number == 2) e = get_string("Mount", "host_path", f, m.host_path);
    if (f.number == 3) e = get_bool("Mount", "read_only", f, m.read_only);
    if (e) return e;
  }
  return r.error();
}

Err parse_device_spec(std::string_view in, DeviceSpecEntry& d) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    if (f.number == 1) e = get_string("DeviceSpec", "container_path", f, d.container_path);
    if (f.number == 2) e = get_string("DeviceSpec", "host_path", f, d.host_path);
    if (f.number == 3) e = get_string("DeviceSpec", "permissions", f, d.permissions);
    if (e) return e;
  }
  return r.error();
}

Err parse_cdi_device(std::string_view in, std::string& name) {
  Reader r(in);
  Field f;
  while (r.next(f)) {
    if (f.number != 1) continue;
    if (auto e = get_string("CDIDevice", "name", f, name)) return e;
  }
  return r.error();
}

Err parse_container_allocation(std::string_view in, ContainerAllocation& c) {
  constexpr const char* kMsg = "ContainerAllocateResponse";
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    switch (f.number) {
      case 1:
        e = get_message(kMsg, "envs", f, [&](std::string_view b) { return parse_map_entry(b, "EnvsEntry", c.envs); });
        break;
      case 2: {
        MountEntry m;
        e = get_message(kMsg, "mounts", f, [&](std::string_view b) { return parse_mount(b, m); });
        c.mounts.push_back(std::move(m));
        break;
      }
      case 3: {
        DeviceSpecEntry d;
        e = get_message(kMsg, "devices", f, [&](std::string_view b) { return parse_device_spec(b, d); });
        c.devices.push_back(std::move(d));
        break;
      }
      case 4:
        e = get_message(kMsg, "annotations", f,
                        [&](std::string_view b) { return parse_map_entry(b, "AnnotationsEntry", c.annotations); });
        break;
      case 5: {
        std::string name;
        e = get_message(kMsg, "cdi_devices", f, [&](std::string_view b) { return parse_cdi_device(b, name); });
        c.cdi_devices.push_back(std::move(name));
        break;
      }
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

Err parse_preferred_container(std::string_view in, PreferredRequest& p) {
  constexpr const char* kMsg = "ContainerPreferredAllocationRequest";
  Reader r(in);
  Field f;
  while (r.next(f)) {
    Err e;
    std::string s;
    switch (f.number) {
      case 1:
        e = get_string(kMsg, "available_deviceIDs", f, s);
        if (!e) p.available.push_back(std::move(s));
        break;
      case 2:
        e = get_string(kMsg, "must_include_deviceIDs", f, s);
        if (!e) p.must_include.push_back(std::move(s));
        break;
      case 3:
        e = check_type(kMsg, "allocation_size", f, kVarint);
        p.size = static_cast<int32_t>(static_cast<uint32_t>(f.varint));  // int32: the low 32 bits
        break;
      default:
        break;
    }
    if (e) return e;
  }
  return r.error();
}

// ---- gRPC plumbing ----

std::string address(const std::string& socket_path) {
  return "unix://" + std::filesystem::absolute(socket_path).lexically_normal().string();
}

grpc::ByteBuffer to_buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string to_bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Valid() || !buffer.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

RpcResult<std::string> unary(grpc::GenericStub& stub, const std::string& method, const std::string& request,
                             std::chrono::milliseconds deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  grpc::ByteBuffer req = to_buffer(request), resp;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return std::unexpected(RpcError{status.error_code(), status.error_message(), false});
  return to_bytes(resp);
}

template <typename T, typename Decode>
RpcResult<T> decode_response(RpcResult<std::string> bytes, Decode&& decode) {
  if (!bytes) return std::unexpected(std::move(bytes.error()));
  auto value = decode(*bytes);
  if (!value) return std::unexpected(RpcError{grpc::StatusCode::INTERNAL, std::move(value.error()), true});
  return std::move(*value);
}

}  // namespace

// ---- Codec ----

std::string encode_plugin_options(const PluginOptions& options) {
  std::string out;
  put_bool(out, 1, options.pre_start_required);
  put_bool(out, 2, options.get_preferred_allocation_available);
  return out;
}

Decoded<PluginOptions> decode_plugin_options(std::string_view bytes) {
  return decode_with<PluginOptions>(bytes, parse_options);
}

std::string encode_register_request(const Registration& request) {
  std::string out;
  put_string(out, 1, request.version);
  put_string(out, 2, request.endpoint);
  put_string(out, 3, request.resource_name);
  if (request.has_options) put_len(out, 4, encode_plugin_options(request.options));
  return out;
}

Decoded<Registration> decode_register_request(std::string_view bytes) {
  return decode_with<Registration>(bytes, parse_register);
}

std::string encode_list_and_watch_response(const std::vector<DeviceEntry>& devices) {
  std::string out;
  for (const auto& d : devices) {
    std::string device;
    put_string(device, 1, d.id);
    put_string(device, 2, d.health);
    if (!d.numa_nodes.empty()) {
      std::string topology;
      for (int64_t id : d.numa_nodes) {
        std::string node;
        put_int(node, 1, id);
        put_len(topology, 1, node);
      }
      put_len(device, 3, topology);
    }
    put_len(out, 1, device);
  }
  return out;
}

Decoded<std::vector<DeviceEntry>> decode_list_and_watch_response(std::string_view bytes) {
  return decode_with<std::vector<DeviceEntry>>(bytes, [](std::string_view b, std::vector<DeviceEntry>& out) {
    return parse_message_list<DeviceEntry>(b, "ListAndWatchResponse", "devices", out, parse_device);
  });
}

std::string encode_allocate_request(const std::vector<std::vector<std::string>>& per_container_ids) {
  std::string out;
  for (const auto& ids : per_container_ids) {
    std::string container;
    for (const auto& id : ids) put_len(container, 1, id);
    put_len(out, 1, container);
  }
  return out;
}

Decoded<std::vector<std::vector<std::string>>> decode_allocate_request(std::string_view bytes) {
  using Ids = std::vector<std::string>;
  return decode_with<std::vector<Ids>>(bytes, [](std::string_view b, std::vector<Ids>& out) {
    return parse_message_list<Ids>(b, "AllocateRequest", "container_requests", out, [](std::string_view c, Ids& ids) {
      return parse_string_list(c, "ContainerAllocateRequest", "devices_ids", ids);
    });
  });
}

std::string encode_allocate_response(const std::vector<ContainerAllocation>& containers) {
  std::string out;
  for (const auto& c : containers) {
    std::string container;
    put_map(container, 1, c.envs);
    for (const auto& m : c.mounts) {
      std::string mount;
      put_string(mount, 1, m.container_path);
      put_string(mount, 2, m.host_path);
      put_bool(mount, 3, m.read_only);
      put_len(container, 2, mount);
    }
    for (const auto& d : c.devices) {
      std::string spec;
      put_string(spec, 1, d.container_path);
      put_string(spec, 2, d.host_path);
      put_string(spec, 3, d.permissions);
      put_len(container, 3, spec);
    }
    put_map(container, 4, c.annotations);
    for (const auto& name : c.cdi_devices) {
      std::string cdi;
      put_string(cdi, 1, name);
      put_len(container, 5, cdi);
    }
    put_len(out, 1, container);
  }
  return out;
}

Decoded<std::vector<ContainerAllocation>> decode_allocate_response(std::string_view bytes) {
  return decode_with<std::vector<ContainerAllocation>>(
      bytes, [](std::string_view b, std::vector<ContainerAllocation>& out) {
        return parse_message_list<ContainerAllocation>(b, "AllocateResponse", "container_responses", out,
                                                       parse_container_allocation);
      });
}

std::string encode_preferred_request(const std::vector<PreferredRequest>& containers) {
  std::string out;
  for (const auto& p : containers) {
    std::string container;
    for (const auto& id : p.available) put_len(container, 1, id);
    for (const auto& id : p.must_include) put_len(container, 2, id);
    put_int(container, 3, p.size);
    put_len(out, 1, container);
  }
  return out;
}

Decoded<std::vector<PreferredRequest>> decode_preferred_request(std::string_view bytes) {
  return decode_with<std::vector<PreferredRequest>>(bytes, [](std::string_view b, std::vector<PreferredRequest>& out) {
    return parse_message_list<PreferredRequest>(b, "PreferredAllocationRequest", "container_requests", out,
                                                parse_preferred_container);
  });
}

std::string encode_preferred_response(const std::vector<std::vector<std::string>>& per_container_ids) {
  std::string out;
  for (const auto& ids : per_container_ids) {
    std::string container;
    for (const auto& id : ids) put_len(container, 1, id);
    put_len(out, 1, container);
  }
  return out;
}

Decoded<std::vector<std::vector<std::string>>> decode_preferred_response(std::string_view bytes) {
  using Ids = std::vector<std::string>;
  return decode_with<std::vector<Ids>>(bytes, [](std::string_view b, std::vector<Ids>& out) {
    return parse_message_list<Ids>(
        b, "PreferredAllocationResponse", "container_responses", out, [](std::string_view c, Ids& ids) {
          return parse_string_list(c, "ContainerPreferredAllocationResponse", "deviceIDs", ids);
        });
  });
}

std::string encode_pre_start_request(const std::vector<std::string>& device_ids) {
  std::string out;
  for (const auto& id : device_ids) put_len(out, 1, id);
  return out;
}

Decoded<std::vector<std::string>> decode_pre_start_request(std::string_view bytes) {
  return decode_with<std::vector<std::string>>(bytes, [](std::string_view b, std::vector<std::string>& out) {
    return parse_string_list(b, "PreStartContainerRequest", "devices_ids", out);
  });
}

Decoded<Empty> decode_empty(std::string_view bytes) {
  Reader r(bytes);
  Field f;
  while (r.next(f)) {
  }
  if (r.error()) return std::unexpected("Empty: " + *r.error());
  return Empty{};
}

RpcResult<std::string> call_unary(const std::string& socket_path, const std::string& method, const std::string& request,
                                  std::chrono::milliseconds deadline) {
  grpc::GenericStub stub(grpc::CreateChannel(address(socket_path), grpc::InsecureChannelCredentials()));
  return unary(stub, method, request, deadline);
}

// ---- KubeletRegistry ----

struct KubeletRegistry::Impl {
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::vector<Registration> received, accepted;  // guarded by mu
  std::vector<std::string> errors;               // guarded by mu
  std::map<std::string, std::string> rejects;    // guarded by mu

  std::mutex server_mu;  // serialises start/stop/restart
  struct Service;
  std::unique_ptr<Service> service;  // one per server: gRPC binds a generic service to one server
  std::unique_ptr<grpc::Server> server;

  // Records a Register call and says how to answer it. Runs on gRPC threads.
  grpc::Status handle(const std::string& method, const std::string& request) {
    if (method != kRegister) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not served: " + method);
    auto reg = decode_register_request(request);
    grpc::Status status;
    {
      std::lock_guard lock(mu);
      if (!reg) {
        errors.push_back(reg.error());
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed RegisterRequest: " + reg.error());
      }
      received.push_back(*reg);
      if (reg->version != kVersion) {
        status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "requested device plugin API version \"" + reg->version +
                                  "\" is not supported by kubelet; supported versions are [\"v1beta1\"]");
      } else if (auto it = rejects.find(reg->resource_name); it != rejects.end()) {
        status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, it->second);
      } else {
        accepted.push_back(*reg);
      }
    }
    cv.notify_all();
    return status;
  }

  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(grpc::GenericCallbackServerContext* ctx, Impl* impl) : ctx_(ctx), impl_(impl) { StartRead(&request_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      grpc::Status status = impl_->handle(ctx_->method(), to_bytes(request_));
      if (!status.ok()) {
        Finish(status);
        return;
      }
      response_ = to_buffer(std::string());
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::GenericCallbackServerContext* ctx_;
    Impl* impl_;
    grpc::ByteBuffer request_, response_;
  };

  void start_locked(const std::string& dir, const std::string& socket);  // throws when it cannot serve
  void stop_locked(const std::string& socket);
};

struct KubeletRegistry::Impl::Service : grpc::CallbackGenericService {
  explicit Service(Impl* i) : impl(i) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Reactor(ctx, impl);
  }
  Impl* impl;
};

void KubeletRegistry::Impl::start_locked(const std::string& dir, const std::string& socket) {
  if (server) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  service = std::make_unique<Service>(this);
  builder.RegisterCallbackGenericService(service.get());
  server = builder.BuildAndStart();
  if (!server) {
    service.reset();
    throw std::runtime_error("KubeletRegistry: cannot serve " + socket);
  }
}

void KubeletRegistry::Impl::stop_locked(const std::string& socket) {
  if (server) {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server.reset();
    service.reset();
  }
  ::unlink(socket.c_str());
}

KubeletRegistry::KubeletRegistry(std::string device_plugin_dir)
    : dir_(std::filesystem::absolute(device_plugin_dir).lexically_normal().string()), impl_(std::make_unique<Impl>()) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  socket_ = dir_ + "/kubelet.sock";
}

KubeletRegistry::~KubeletRegistry() { stop(); }

void KubeletRegistry::start() {
  std::lock_guard lock(impl_->server_mu);
  impl_->start_locked(dir_, socket_);
}

void KubeletRegistry::stop() {
  std::lock_guard lock(impl_->server_mu);
  impl_->stop_locked(socket_);
}

void KubeletRegistry::restart() {
  std::lock_guard lock(impl_->server_mu);
  impl_->stop_locked(socket_);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::error_code entry_ec;
    if (entry.symlink_status(entry_ec).type() == std::filesystem::file_type::socket) {
      std::filesystem::remove(entry.path(), entry_ec);
    }
  }
  impl_->start_locked(dir_, socket_);
}

void KubeletRegistry::set_reject(const std::string& resource_name, const std::string& message) {
  std::lock_guard lock(impl_->mu);
  if (message.empty()) {
    impl_->rejects.erase(resource_name);
  } else {
    impl_->rejects[resource_name] = message;
  }
}

std::vector<Registration> KubeletRegistry::registrations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->received;
}

std::vector<Registration> KubeletRegistry::accepted() const {
  std::lock_guard lock(impl_->mu);
  return impl_->accepted;
}

std::vector<std::string> KubeletRegistry::decode_errors() const {
  std::lock_guard lock(impl_->mu);
  return impl_->errors;
}

bool KubeletRegistry::wait_for_registrations(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->received.size() >= n; });
}

// ---- PluginClient ----

// What the watches report, shared with them: a watch given up on by cancel_watch() may outlive the client.
struct PluginClient::State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<DeviceEntry>> lists;  // guarded by mu, as is everything below
  std::vector<std::string> errors;
  size_t first = 0;     // index in lists of the current watch's first list
  bool opened = false;  // watch() was called
  bool ended = false;   // the current watch's OnDone has run (it touches the watch no more)
  std::optional<RpcError> status;
};

// One ListAndWatch call. Owned by the client and destroyed on a client thread once ended (never in OnDone:
// its ClientContext may hold the last reference to the channel, and gRPC 1.51 must not release a channel's
// callback completion queue from one of that queue's own threads).
struct PluginClient::Watch : grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
  explicit Watch(std::shared_ptr<State> s) : state(std::move(s)), request(to_buffer(std::string())) {}

  void start(grpc::GenericStub& stub) {
    stub.PrepareBidiStreamingCall(&ctx, kListAndWatch, grpc::StubOptions(), this);
    StartWriteLast(&request, grpc::WriteOptions());
    StartRead(&response);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // no more messages; OnDone follows
    auto devices = decode_list_and_watch_response(to_bytes(response));
    {
      std::lock_guard lock(state->mu);
      if (devices) {
        state->lists.push_back(std::move(*devices));
      } else {
        state->errors.push_back(std::move(devices.error()));
      }
    }
    state->cv.notify_all();
    StartRead(&response);
  }

  // The last touch of `this`: once `ended` is seen under the lock, the client may destroy the watch.
  void OnDone(const grpc::Status& s) override {
    std::shared_ptr<State> keep = state;
    std::lock_guard lock(keep->mu);
    keep->ended = true;
    keep->status = RpcError{s.error_code(), s.error_message(), false};
    keep->cv.notify_all();
  }

  std::shared_ptr<State> state;
  grpc::ClientContext ctx;
  grpc::ByteBuffer request, response;
};

struct PluginClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  std::shared_ptr<State> state = std::make_shared<State>();
  std::mutex watch_mu;           // serialises watch() and cancel_watch()
  std::unique_ptr<Watch> watch;  // guarded by watch_mu: the current watch, open or ended
};

PluginClient::PluginClient(std::string socket_path, std::chrono::milliseconds deadline)
    : socket_(std::move(socket_path)), deadline_(deadline), impl_(std::make_unique<Impl>()) {
  impl_->channel = grpc::CreateChannel(address(socket_), grpc::InsecureChannelCredentials());
  impl_->stub = std::make_unique<grpc::GenericStub>(impl_->channel);
}

PluginClient::~PluginClient() { cancel_watch(); }

RpcResult<PluginOptions> PluginClient::options() {
  return decode_response<PluginOptions>(unary(*impl_->stub, kGetOptions, std::string(), deadline_),
                                        decode_plugin_options);
}

RpcResult<std::vector<ContainerAllocation>> PluginClient::allocate(
    const std::vector<std::vector<std::string>>& per_container_ids) {
  return decode_response<std::vector<ContainerAllocation>>(
      unary(*impl_->stub, kAllocate, encode_allocate_request(per_container_ids), deadline_), decode_allocate_response);
}

RpcResult<std::vector<std::vector<std::string>>> PluginClient::preferred(
    const std::vector<PreferredRequest>& requests) {
  return decode_response<std::vector<std::vector<std::string>>>(
      unary(*impl_->stub, kGetPreferred, encode_preferred_request(requests), deadline_), decode_preferred_response);
}

RpcResult<Empty> PluginClient::pre_start(const std::vector<std::string>& device_ids) {
  return decode_response<Empty>(unary(*impl_->stub, kPreStart, encode_pre_start_request(device_ids), deadline_),
                                decode_empty);
}

void PluginClient::watch() {
  std::lock_guard watch_lock(impl_->watch_mu);
  auto& st = *impl_->state;
  {
    std::lock_guard lock(st.mu);
    if (impl_->watch && !st.ended) return;
  }
  impl_->watch.reset();  // ended: OnDone has run
  impl_->watch = std::make_unique<Watch>(impl_->state);
  {
    std::lock_guard lock(st.mu);
    st.opened = true;
    st.ended = false;
    st.status.reset();
    st.first = st.lists.size();
  }
  impl_->watch->start(*impl_->stub);
}

void PluginClient::cancel_watch() {
  std::lock_guard watch_lock(impl_->watch_mu);
  if (!impl_->watch) return;
  impl_->watch->ctx.TryCancel();  // no-op once the call has ended
  auto& st = *impl_->state;
  std::unique_lock lock(st.mu);
  if (st.cv.wait_for(lock, deadline_, [&] { return st.ended; })) {
    lock.unlock();
    impl_->watch.reset();
  } else {
    (void)impl_->watch.release();  // gRPC still holds it: leak it rather than free it under gRPC
  }
}

std::vector<std::vector<DeviceEntry>> PluginClient::lists() const {
  std::lock_guard lock(impl_->state->mu);
  return impl_->state->lists;
}

std::optional<std::vector<DeviceEntry>> PluginClient::wait_for_list(
    const std::function<bool(const std::vector<DeviceEntry>&)>& pred, std::chrono::milliseconds timeout) const {
  auto& st = *impl_->state;
  std::unique_lock lock(st.mu);
  std::optional<std::vector<DeviceEntry>> found;
  st.cv.wait_for(lock, timeout, [&] {
    if (st.lists.size() > st.first && pred(st.lists.back())) {
      found = st.lists.back();
      return true;
    }
    return !st.opened || st.ended;
  });
  return found;
}

bool PluginClient::stream_ended() const {
  std::lock_guard lock(impl_->state->mu);
  return impl_->state->ended;
}

bool PluginClient::wait_for_stream_end(std::chrono::milliseconds timeout) const {
  auto& st = *impl_->state;
  std::unique_lock lock(st.mu);
  return st.cv.wait_for(lock, timeout, [&] { return st.ended; });
}

std::optional<RpcError> PluginClient::stream_status() const {
  std::lock_guard lock(impl_->state->mu);
  return impl_->state->status;
}

std::vector<std::string> PluginClient::watch_errors() const {
  std::lock_guard lock(impl_->state->mu);
  return impl_->state->errors;
}

}  // namespace kgpu::testing
