// Client of the kubelet's PodResources API v1 (List) over its unix socket.
//
// Thread safety: list() may be called from one thread at a time (the agent's poller).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"

namespace kgpu::kubelet {

inline constexpr const char* kDefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

// One device of one container, as the kubelet reports it.
struct ContainerDevice {
  std::string ns, pod, container;
  std::string resource;   // "nvidia.com/gpu"
  std::string device_id;  // "GPU-...", "GPU-...::2", "MIG-..."
};

class PodResourcesClient {
 public:
  explicit PodResourcesClient(std::string socket_path);
  ~PodResourcesClient();

  // Calls List with a deadline. Errors (kUnavailable) name the socket and gRPC's status; a missing
  // socket is an ordinary state (no kubelet yet). The channel reconnects by itself.
  Result<std::vector<ContainerDevice>> list(std::chrono::milliseconds timeout);

  const std::string& socket_path() const { return socket_; }

 private:
  struct Impl;
  std::string socket_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kgpu::kubelet
