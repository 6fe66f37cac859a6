// A kubelet peer for tests: serves the PodResources v1 `List` method on a unix socket.
//
// It does not use kgpu's .proto: responses are encoded by hand, field by field, from the wire
// contract's field numbers (ListPodResourcesResponse.pod_resources = 1; PodResources.name = 1,
// namespace = 2, containers = 3; ContainerResources.name = 1, devices = 2;
// ContainerDevices.resource_name = 1, device_ids = 2; ContainerResources.dynamic_resources = 5;
// DynamicResource.claim_name = 2, claim_namespace = 3, claim_resources = 4; ClaimResource.cdi_devices
// = 1, driver_name = 2, pool_name = 3, device_name = 4; CDIDevice.name = 1), and served through gRPC's generic
// (byte-level) service under the method path /v1.PodResourcesLister/List. So a mistake in our
// .proto cannot hide behind a peer that shares it.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kgpu::testing {

// One device of a DRA claim (ClaimResource).
struct PeerClaimDevice {
  std::string driver, pool, device;
  std::vector<std::string> cdi_devices;
};

// A claim a container uses (DynamicResource).
struct PeerClaim {
  std::string name, ns;
  std::vector<PeerClaimDevice> devices;
};

struct PeerContainer {
  std::string name;
  std::string resource;  // empty with no device_ids: no ContainerDevices entry
  std::vector<std::string> device_ids;
  std::vector<PeerClaim> claims = {};  // DynamicResource entries
};

struct PeerPod {
  std::string ns, name;
  std::vector<PeerContainer> containers;
};

// Protobuf encoding of a ListPodResourcesResponse, written from the wire contract.
std::string encode_list_response(const std::vector<PeerPod>& pods);

class KubeletPeer {
 public:
  explicit KubeletPeer(std::string socket_path);
  ~KubeletPeer();

  void start();  // serve (creates the socket)
  void stop();   // stop serving and remove the socket, as a kubelet restart does

  void set_pods(std::vector<PeerPod> pods);
  void set_delay(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }
  int list_calls() const { return calls_.load(); }
  const std::string& socket_path() const { return socket_; }

 private:
  struct Impl;
  std::string socket_;
  std::unique_ptr<Impl> impl_;
  std::atomic<int> delay_ms_{0};
  std::atomic<int> calls_{0};
};

}  // namespace kgpu::testing
