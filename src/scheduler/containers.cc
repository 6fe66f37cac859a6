// How a pod's GPUs are divided among its containers (scheduler.h: container_requests, split_assignment).
#include "scheduler/scheduler.h"

namespace kgpu::scheduler {

std::vector<ContainerRequest> container_requests(const k8s::api::PodObject& pod, const std::string& resource) {
  std::vector<ContainerRequest> out;
  for (const auto& c : pod.containers)
    if (const int64_t units = c.request(resource); units > 0) out.push_back({c.name, units, c.init && !c.sidecar});
  return out;
}

k8s::Assignment split_assignment(const std::vector<ContainerRequest>& containers, const std::vector<std::string>& gpus,
                                 bool share) {
  k8s::Assignment out;
  size_t next = 0;
  for (const auto& c : containers) {
    k8s::ContainerGpus cg{c.name, {}};
    if (share && gpus.size() <= 1) {
      if (!gpus.empty()) cg.uuids.push_back(gpus.front());
    } else if (c.init) {
      for (size_t i = 0; i < gpus.size() && static_cast<int64_t>(i) < c.units; ++i) cg.uuids.push_back(gpus[i]);
    } else {
      for (int64_t i = 0; i < c.units && next < gpus.size(); ++i) cg.uuids.push_back(gpus[next++]);
    }
    out.push_back(std::move(cg));
  }
  return out;
}

}  // namespace kgpu::scheduler
