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

// One device a DRA ResourceClaim gave a container (ContainerResources.dynamic_resources: one entry
// per DynamicResource claim_resources item), as the kubelet reports it.
struct ContainerClaimDevice {
  std::string ns, pod, container;
  std::string claim_namespace, claim_name;
  std::string driver;                    // ClaimResource.driver_name: "gpu.nvidia.com"
  std::string pool;                      // pool_name: a node-local driver's pool is the node's name
  std::string device;                    // device_name: "gpu-3", "gpu-7-mig-1g10gb-19-0"
  std::vector<std::string> cdi_devices;  // fully qualified CDI names
};

// One List answer: the device-plugin devices and the DRA claim devices of every container.
struct PodResourcesListing {
  std::vector<ContainerDevice> devices;
  std::vector<ContainerClaimDevice> claims;
};

class PodResourcesClient {
 public:
  explicit PodResourcesClient(std::string socket_path);
  ~PodResourcesClient();

  // Calls List with a deadline. Errors (kUnavailable) name the socket and gRPC's status; a missing
  // socket is an ordinary state (no kubelet yet). The channel reconnects by itself.
  Result<std::vector<ContainerDevice>> list(std::chrono::milliseconds timeout);
  // The same call, with the DRA claim devices too. The answer is bounded by the channel's 16 MiB
  // message limit.
  Result<PodResourcesListing> list_all(std::chrono::milliseconds timeout);

  const std::string& socket_path() const { return socket_; }

 private:
  struct Impl;
  std::string socket_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kgpu::kubelet
