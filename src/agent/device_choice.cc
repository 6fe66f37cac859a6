#include "agent/device_choice.h"

#include <fmt/format.h>

#include <algorithm>

namespace kgpu::agent {

namespace {

// Whether `id` (a whole device or a replica) is held: the same ID, a replica of it, or the whole
// device it is a replica of. Returns the holder.
const std::string* holder_of(const InUse& used, const std::string& id) {
  const std::string base = sharing::strip_replica(id);
  for (const auto& [held, who] : used) {
    if (held == id || sharing::strip_replica(held) == id || held == base) return &who;
  }
  return nullptr;
}

std::vector<const sharing::PlannedDevice*> devices_of_gpu(const sharing::PlannedResource& r, const std::string& uuid) {
  std::vector<const sharing::PlannedDevice*> out;
  for (const auto& d : r.devices) {
    if (!r.mig && d.gpu_uuid == uuid) out.push_back(&d);
  }
  return out;
}

}  // namespace

InUse in_use(const std::vector<AllocationTable::Holding>& holdings, const PodInfo* reusing) {
  InUse out;
  for (const auto& h : holdings) {
    if (reusing != nullptr && !h.uid.empty() && h.uid == reusing->uid &&
        std::ranges::any_of(reusing->containers,
                            [&](const PodContainer& c) { return c.name == h.container && c.init && !c.sidecar; })) {
      continue;
    }
    const std::string who = h.pod.empty() ? "a container the kubelet has not reported yet"
                                          : fmt::format("pod {}/{} container {}", h.ns, h.pod, h.container);
    for (const auto& id : h.ids) out.emplace(id, who);
  }
  return out;
}

Result<std::vector<std::string>> assigned_devices(const sharing::Plan& plan, const sharing::PlannedResource& resource,
                                                  const PodInfo& pod, const PodContainer& container, int64_t n,
                                                  const HealthyFn& healthy, const InUse& used) {
  const std::string who = fmt::format("pod {}/{} container {}", pod.ns, pod.name, container.name);
  auto refuse = [&](ErrorCode code, const std::string& why) {
    return std::unexpected(Error{code, fmt::format("cannot honour the assignment: {}: {}", who, why)});
  };
  if (!pod.assignment_error.empty()) return refuse(ErrorCode::kInvalidArgument, pod.assignment_error);
  const k8s::ContainerGpus* entry = pod.assignment ? k8s::find_container(*pod.assignment, container.name) : nullptr;
  if (entry == nullptr) {
    return refuse(ErrorCode::kInvalidArgument, fmt::format("{} names no GPU for it", k8s::kAnnotationGpuAssignment));
  }
  std::vector<std::string> out;
  for (const auto& uuid : entry->uuids) {
    const auto devices = devices_of_gpu(resource, uuid);
    if (devices.empty()) {
      for (const auto& other : plan.resources) {
        if (!devices_of_gpu(other, uuid).empty()) {
          return refuse(ErrorCode::kInvalidArgument,
                        fmt::format("GPU {} is advertised under {}, not {}", uuid, other.name, resource.name));
        }
      }
      return refuse(ErrorCode::kInvalidArgument, fmt::format("GPU {} is not on this node", uuid));
    }
    if (!healthy(uuid)) return refuse(ErrorCode::kUnavailable, fmt::format("GPU {} is unhealthy", uuid));
    if (devices.front()->replica < 0) {
      if (entry->uuids.size() != static_cast<size_t>(n)) {
        return refuse(ErrorCode::kInvalidArgument,
                      fmt::format("the assignment gives it {} GPU(s) but it requests {} of {}", entry->uuids.size(), n,
                                  resource.name));
      }
      if (const std::string* h = holder_of(used, uuid)) {
        return refuse(ErrorCode::kUnavailable, fmt::format("GPU {} is already in use by {}", uuid, *h));
      }
      out.push_back(devices.front()->id);
      continue;
    }
    if (entry->uuids.size() != 1) {
      return refuse(ErrorCode::kInvalidArgument,
                    fmt::format("a share of {} names one GPU, the assignment names {}", resource.name,
                                entry->uuids.size()));
    }
    std::vector<std::string> free;
    std::vector<std::string> holders;
    for (const auto* d : devices) {
      if (const std::string* h = holder_of(used, d->id)) {
        holders.push_back(*h);
      } else {
        free.push_back(d->id);
      }
    }
    if (free.size() < static_cast<size_t>(n)) {
      std::ranges::sort(holders);
      holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
      return refuse(ErrorCode::kUnavailable,
                    fmt::format("GPU {} has {} of {} replicas free, it requests {} (in use by {})", uuid, free.size(),
                                devices.size(), n, fmt::join(holders, ", ")));
    }
    out.assign(free.begin(), free.begin() + n);
  }
  return out;
}

void reserve_assigned(const sharing::PlannedResource& resource, const std::vector<PodInfo>& pods,
                      const Served& served, InUse& used) {
  for (const auto& pod : pods) {
    if (pod.done || pod.gpu_resource != resource.name || !pod.assignment) continue;
    for (const auto& c : pod.containers) {
      const int64_t want = c.request(resource.name);
      if (want <= 0 || served.contains({pod.uid, c.name}) || k8s::find_container(pod.allocated, c.name) != nullptr)
        continue;
      const k8s::ContainerGpus* entry = k8s::find_container(*pod.assignment, c.name);
      if (entry == nullptr) continue;
      const std::string who =
          fmt::format("pod {}/{} container {} (assigned, not admitted yet)", pod.ns, pod.name, c.name);
      for (const auto& uuid : entry->uuids) {
        int64_t left = entry->uuids.size() == 1 ? want : 1;  // a share's k replicas, or one whole GPU
        for (const auto* d : devices_of_gpu(resource, uuid)) {
          if (left == 0) break;
          if (used.emplace(d->id, who).second) --left;
        }
      }
    }
  }
}

Result<std::vector<std::string>> unassigned_devices(const sharing::PlannedResource& resource,
                                                    const std::vector<std::string>& kubelet_ids,
                                                    const std::vector<std::vector<gpu::Link>>& topology,
                                                    sharing::SharedPolicy policy, const HealthyFn& healthy,
                                                    const InUse& used) {
  std::vector<std::string> must;
  for (const auto& id : kubelet_ids) {
    if (holder_of(used, id) == nullptr) must.push_back(id);
  }
  if (must.size() == kubelet_ids.size()) return kubelet_ids;
  std::vector<std::string> available;
  for (const auto& d : resource.devices) {
    if (healthy(d.uuid) && healthy(d.gpu_uuid) && holder_of(used, d.id) == nullptr) available.push_back(d.id);
  }
  const int n = static_cast<int>(kubelet_ids.size());
  auto chosen = sharing::preferred_allocation(resource, topology, policy, available, must, n);
  if (chosen.size() < kubelet_ids.size()) {
    return fail(ErrorCode::kUnavailable,
                "{}: the kubelet's devices {} are really in use and only {} free device(s) are left for {} requested",
                resource.name, fmt::join(kubelet_ids, ","), available.size(), n);
  }
  return chosen;
}

std::map<std::string, std::string> mps_client_limits(int k, int replicas, uint64_t memory_mib) {
  const int r = std::max(replicas, 1);
  return {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(100 * k / r)},
          {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", fmt::format("0={}M", static_cast<uint64_t>(k) * memory_mib / r)}};
}

k8s::NodeGpuReport node_report(const gpu::Inventory& inventory, const sharing::Plan& plan, const HealthyFn& healthy,
                               const std::vector<AllocationTable::Holding>& holdings, std::string observed_at) {
  k8s::NodeGpuReport report;
  report.observed_at = std::move(observed_at);
  for (size_t i = 0; i < inventory.gpus.size(); ++i) {
    const auto& g = inventory.gpus[i];
    k8s::ReportedGpu r;
    r.index = static_cast<int>(g.index);
    r.uuid = g.uuid;
    r.model = g.name;
    r.memory_mib = g.memory_total_mib.value_or(0);
    r.healthy = !g.lost && healthy(g.uuid);
    for (const auto& res : plan.resources) {
      if (const auto devices = devices_of_gpu(res, g.uuid); !devices.empty()) {
        r.resource = res.name;
        r.replicas = devices.front()->replica < 0 ? 1 : devices.front()->replicas;
        break;
      }
    }
    if (i < inventory.topology.size()) {
      for (size_t j = 0; j < inventory.topology[i].size() && j < inventory.gpus.size(); ++j) {
        if (j != i && inventory.topology[i][j] == gpu::Link::kNvLink) {
          r.nvlink_peers.push_back(static_cast<int>(inventory.gpus[j].index));
        }
      }
    }
    for (const auto& h : holdings) {
      const int n = static_cast<int>(
          std::ranges::count_if(h.ids, [&](const std::string& id) { return sharing::strip_replica(id) == g.uuid; }));
      if (n > 0) r.used.push_back({h.ns, h.pod, h.uid, h.container, n});
    }
    report.gpus.push_back(std::move(r));
  }
  return report;
}

}  // namespace kgpu::agent
