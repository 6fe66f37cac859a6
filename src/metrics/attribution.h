// Which pod and container a GPU process belongs to, without the API server; and which node
// device a DRA claim's device name is (claim_devices()).
//
// A process's cgroup path (/proc/<pid>/cgroup) names its pod UID and container ID, under the
// systemd (kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope) and
// cgroupfs (/kubepods/burstable/pod<uid>/<id>) layouts, for containerd, CRI-O and Docker. The
// kubelet's log directories turn those into names: /var/log/containers holds
// <pod>_<namespace>_<container>-<container id>.log for every running container, and
// /var/log/pods holds <namespace>_<pod>_<uid>/ for every pod. Both roots are configurable so
// tests run on a fabricated tree.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "gpu/dra_names.h"
#include "kubelet/pod_resources.h"
#include "metrics/frame.h"

namespace kgpu::metrics {

struct CgroupRef {
  std::string pod_uid;       // with dashes
  std::string container_id;  // 64 hex characters, or empty when the path has none
};

// Parses the content of /proc/<pid>/cgroup; nullopt when the process is not in a pod.
std::optional<CgroupRef> parse_cgroup(std::string_view content);

// Resolves processes to containers. Thread safety: resolve() may be called from any thread.
class ProcessResolver {
 public:
  // `clock` (not owned) must outlive the resolver; it paces rescans (at most one a second).
  ProcessResolver(std::string proc_root, std::string container_log_dir, std::string pod_log_dir,
                  Clock& clock = Clock::real());

  // The container a process runs in, or nullopt (not in a pod, exited, or unknown names).
  std::optional<PodRef> resolve(unsigned pid);
  // A pod's UID from the kubelet's pod log directories (<namespace>_<pod>_<uid>), or nullopt.
  std::optional<std::string> pod_uid(const std::string& ns, const std::string& pod);

 private:
  void rescan_locked();
  std::string proc_root_, container_log_dir_, pod_log_dir_;
  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, PodRef> by_container_id_;                      // guarded by mu_
  std::map<std::string, std::pair<std::string, std::string>> by_uid_;  // uid -> (ns, pod)
  Clock::SteadyTime last_scan_{};
};

// The DRA claim devices PodResources lists that are this node's: driver `driver`, pool `pool` (a
// node-local driver's pool is the node's name), a device name found among `devices`
// (gpu::dra_names of the node's inventory: gpu-<minor>, or a MIG device's name). Each becomes
// a device-plugin-style entry (resource = the driver name, device_id = the device's UUID, GPU-...
// or MIG-...), so the device is attributed to the container as a device-plugin device is. Claim
// devices of other drivers or pools, and names the node does not have, are left out.
std::vector<kubelet::ContainerDevice> claim_devices(const std::vector<kubelet::ContainerClaimDevice>& listed,
                                                    std::string_view driver, std::string_view pool,
                                                    const std::vector<gpu::DraName>& devices);

}  // namespace kgpu::metrics
