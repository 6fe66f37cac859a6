#include "kubelet/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace kgpu::kubelet {

namespace {

// True when something accepts connections on the unix socket `path`.
bool socket_answers(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

unsigned long inode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return static_cast<unsigned long>(st.st_ino);
}

std::vector<std::string> strings(const google::protobuf::RepeatedPtrField<std::string>& in) {
  return {in.begin(), in.end()};
}

}  // namespace

class DevicePluginServer::Service final : public v1beta1::DevicePlugin::Service {
 public:
  explicit Service(DevicePluginServer& owner) : owner_(owner) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(static_cast<bool>(owner_.callbacks_.preferred));
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::unique_lock lock(owner_.mu_);
    ++owner_.streams_;
    ++owner_.streams_opened_;
    uint64_t sent = 0;  // versions start at 1: the first pass always sends
    grpc::Status status = grpc::Status::OK;
    while (true) {
      owner_.changed_.wait_for(lock, std::chrono::milliseconds(250),
                               [&] { return owner_.stopping_ || owner_.version_ != sent; });
      if (owner_.stopping_) break;
      if (ctx->IsCancelled()) {
        status = grpc::Status(grpc::StatusCode::CANCELLED, "the kubelet closed the stream");
        break;
      }
      if (owner_.version_ == sent) continue;
      v1beta1::ListAndWatchResponse resp;
      for (const auto& d : owner_.devices_) {
        auto* dev = resp.add_devices();
        dev->set_id(d.id);
        dev->set_health(d.healthy ? "Healthy" : "Unhealthy");
        if (d.numa_node) dev->mutable_topology()->add_nodes()->set_id(*d.numa_node);
      }
      sent = owner_.version_;
      lock.unlock();
      const bool ok = writer->Write(resp);
      lock.lock();
      if (!ok) {
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "ListAndWatch stream closed");
        break;
      }
    }
    --owner_.streams_;
    owner_.last_stream_end_ = owner_.clock_.steady_now();
    return status;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    if (!owner_.callbacks_.preferred) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no preferred allocation");
    try {
      for (const auto& c : req->container_requests()) {
        auto ids = owner_.callbacks_.preferred(strings(c.available_deviceids()), strings(c.must_include_deviceids()),
                                               c.allocation_size());
        auto* r = out->add_container_responses();
        for (auto& id : ids) r->add_deviceids(std::move(id));
      }
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    std::vector<std::vector<std::string>> requests;
    for (const auto& c : req->container_requests()) requests.push_back(strings(c.devices_ids()));
    Result<std::vector<ContainerAllocation>> edits;
    try {
      edits = owner_.callbacks_.allocate(requests);
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
    }
    if (!edits) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, edits.error().message);
    for (const auto& e : *edits) {
      auto* r = out->add_container_responses();
      for (const auto& [k, v] : e.envs) (*r->mutable_envs())[k] = v;
      for (const auto& [k, v] : e.annotations) (*r->mutable_annotations())[k] = v;
      for (const auto& m : e.mounts) {
        auto* mount = r->add_mounts();
        mount->set_container_path(m.container_path);
        mount->set_host_path(m.host_path);
        mount->set_read_only(m.read_only);
      }
      for (const auto& d : e.devices) {
        auto* spec = r->add_devices();
        spec->set_container_path(d.container_path);
        spec->set_host_path(d.host_path);
        spec->set_permissions(d.permissions);
      }
      for (const auto& name : e.cdi_devices) r->add_cdi_devices()->set_name(name);
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  DevicePluginServer& owner_;
};

DevicePluginServer::DevicePluginServer(std::string resource, std::string dir, std::string socket_name,
                                       PluginCallbacks callbacks, Clock& clock)
    : resource_(std::move(resource)),
      dir_(std::move(dir)),
      socket_name_(std::move(socket_name)),
      callbacks_(std::move(callbacks)),
      clock_(clock) {}

DevicePluginServer::~DevicePluginServer() { stop(); }

std::string DevicePluginServer::socket_path() const { return dir_ + "/" + socket_name_; }

Result<void> DevicePluginServer::start() {
  stop();
  const std::string path = socket_path();
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return fail(ErrorCode::kInvalidArgument, "{}: socket path {} is longer than {} bytes", resource_, path,
                sizeof(sockaddr_un::sun_path) - 1);
  }
  if (inode_of(path) != 0 && socket_answers(path)) {
    return fail(ErrorCode::kUnavailable,
                "{}: another device plugin is serving {} (NVIDIA's device plugin?); remove it from this node or "
                "run the agent with --device-plugin=false",
                resource_, path);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fail(ErrorCode::kPermissionDenied, "{}: cannot remove the old socket {}: {}", resource_, path,
                std::strerror(errno));
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  service_ = std::make_unique<Service>(*this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) {
    service_.reset();
    return fail(ErrorCode::kUnavailable, "{}: cannot serve on {} (does the directory exist and is it writable?)",
                resource_, path);
  }
  std::lock_guard lock(mu_);
  socket_inode_ = inode_of(path);
  return {};
}

void DevicePluginServer::stop() {
  if (!server_) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  server_->Shutdown(Clock::real().system_now() + std::chrono::milliseconds(500));  // gRPC deadlines are real time
  server_.reset();
  service_.reset();
  std::lock_guard lock(mu_);
  const std::string path = socket_path();
  if (socket_inode_ != 0 && inode_of(path) == socket_inode_) ::unlink(path.c_str());
  socket_inode_ = 0;
}

bool DevicePluginServer::running() const { return server_ != nullptr; }

Result<void> DevicePluginServer::register_with_kubelet(std::chrono::milliseconds timeout) {
  const std::string kubelet = dir_ + "/" + kKubeletSocketName;
  if (inode_of(kubelet) == 0) return fail(ErrorCode::kUnavailable, "{}: the kubelet socket {} is not there", resource_, kubelet);
  auto channel = grpc::CreateChannel("unix://" + kubelet, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version(kDevicePluginVersion);
  req.set_endpoint(socket_name_);
  req.set_resource_name(resource_);
  req.mutable_options()->set_pre_start_required(false);
  req.mutable_options()->set_get_preferred_allocation_available(static_cast<bool>(callbacks_.preferred));
  v1beta1::Empty resp;
  grpc::ClientContext ctx;
  // No wait_for_ready: a kubelet that is not listening fails at once, and the caller retries.
  ctx.set_deadline(Clock::real().system_now() + timeout);  // gRPC deadlines are real time
  const grpc::Status s = stub->Register(&ctx, req, &resp);
  if (s.ok()) return {};
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return fail(ErrorCode::kUnavailable, "{}: registration with the kubelet at {} failed: {}", resource_, kubelet,
                s.error_message());
  }
  return fail(ErrorCode::kInvalidArgument, "{}: the kubelet refused the registration: {}", resource_,
              s.error_message());
}

void DevicePluginServer::set_devices(std::vector<DeviceState> devices) {
  {
    std::lock_guard lock(mu_);
    if (devices == devices_) return;
    devices_ = std::move(devices);
    ++version_;
  }
  changed_.notify_all();
}

std::vector<DeviceState> DevicePluginServer::devices() const {
  std::lock_guard lock(mu_);
  return devices_;
}

bool DevicePluginServer::socket_present() const {
  std::lock_guard lock(mu_);
  return socket_inode_ != 0 && inode_of(socket_path()) == socket_inode_;
}

int DevicePluginServer::open_streams() const {
  std::lock_guard lock(mu_);
  return streams_;
}

bool DevicePluginServer::stream_lost(std::chrono::milliseconds grace) const {
  std::lock_guard lock(mu_);
  return streams_opened_ > 0 && streams_ == 0 && clock_.steady_now() - last_stream_end_ > grace;
}

void DevicePluginServer::forget_streams() {
  std::lock_guard lock(mu_);
  streams_opened_ = 0;
}

}  // namespace kgpu::kubelet
