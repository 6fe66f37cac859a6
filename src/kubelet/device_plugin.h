// One kubelet device plugin (Device Plugin API v1beta1) for one extended resource: a gRPC server
// on <dir>/<socket name> and its registration with the kubelet on <dir>/kubelet.sock.
//
// The server knows nothing about GPUs: the device list is pushed in with set_devices(), and
// Allocate / GetPreferredAllocation are answered by the callbacks, which the owner points at its
// current plan. Errors from the allocate callback become gRPC INVALID_ARGUMENT with the error's
// message (the kubelet shows it in the pod's UnexpectedAdmissionError event).
//
// Thread safety: set_devices(), socket_present() and the getters may be called from any thread;
// start()/stop()/register_with_kubelet() from one owner thread. gRPC handlers run on gRPC's
// threads and must not block; the callbacks are called on them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/error.h"

namespace grpc {
class Server;
}

namespace kgpu::kubelet {

inline constexpr const char* kDefaultDevicePluginDir = "/var/lib/kubelet/device-plugins";
inline constexpr const char* kKubeletSocketName = "kubelet.sock";
inline constexpr const char* kDevicePluginVersion = "v1beta1";

struct DeviceState {
  std::string id;
  bool healthy = true;
  std::optional<int> numa_node;
  bool operator==(const DeviceState&) const = default;
};

// What one container of an Allocate answer gets: the ContainerAllocateResponse fields, in the kubelet's
// terms (the owner converts its own allocation model into this).
struct Mount {
  std::string container_path, host_path;
  bool read_only = false;
  bool operator==(const Mount&) const = default;
};
struct DeviceNode {
  std::string container_path, host_path;
  std::string permissions = "rw";
  bool operator==(const DeviceNode&) const = default;
};
struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<Mount> mounts;
  std::vector<DeviceNode> devices;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names
  bool operator==(const ContainerAllocation&) const = default;
};

struct PluginCallbacks {
  // One answer per container request (same order); an error refuses the whole Allocate.
  std::function<Result<std::vector<ContainerAllocation>>(const std::vector<std::vector<std::string>>&)> allocate;
  // (available, must_include, size) -> preferred IDs
  std::function<std::vector<std::string>(const std::vector<std::string>&, const std::vector<std::string>&, int)>
      preferred;
};

class DevicePluginServer {
 public:
  // `clock` (not owned) must outlive the server; it times stream_lost().
  DevicePluginServer(std::string resource, std::string dir, std::string socket_name, PluginCallbacks callbacks,
                     Clock& clock = Clock::real());
  ~DevicePluginServer();
  DevicePluginServer(const DevicePluginServer&) = delete;
  DevicePluginServer& operator=(const DevicePluginServer&) = delete;

  // Removes a stale socket file, then serves on it. Refuses (kUnavailable) when another process
  // answers on that socket (another device plugin). Errors name the socket.
  Result<void> start();
  // Ends every ListAndWatch stream, stops serving and removes our socket (if it is still ours).
  void stop();
  bool running() const;

  // Calls Register on <dir>/kubelet.sock. kUnavailable when the kubelet is not there or did not
  // answer within `timeout`; kInvalidArgument when it refused (message from the kubelet).
  Result<void> register_with_kubelet(std::chrono::milliseconds timeout);

  // Replaces the device list; open ListAndWatch streams get the full list when it changed.
  void set_devices(std::vector<DeviceState> devices);
  std::vector<DeviceState> devices() const;

  // True while the socket file we created is still there (a restarting kubelet deletes it).
  bool socket_present() const;
  int open_streams() const;
  // True when a ListAndWatch stream was opened (since forget_streams()) and none has been open for
  // `grace`: the kubelet dropped us without deleting our socket, so we must register again.
  bool stream_lost(std::chrono::milliseconds grace) const;
  void forget_streams();
  const std::string& resource() const { return resource_; }
  std::string socket_path() const;
  const std::string& socket_name() const { return socket_name_; }

  class Service;  // the gRPC service (defined in the .cc)

 private:
  std::string resource_, dir_, socket_name_;
  PluginCallbacks callbacks_;
  Clock& clock_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<DeviceState> devices_;  // guarded by mu_
  uint64_t version_ = 1;              // guarded by mu_; bumped on every change
  bool stopping_ = false;             // guarded by mu_
  int streams_ = 0;                   // guarded by mu_
  uint64_t streams_opened_ = 0;       // guarded by mu_
  Clock::SteadyTime last_stream_end_{};  // guarded by mu_
  unsigned long socket_inode_ = 0;    // guarded by mu_; 0 = not serving

  friend class Service;
};

}  // namespace kgpu::kubelet
