// Predicates over snapshot objects: GPU resources and requests, GPU nodes, the GPU stack's pods,
// owners.
#include <fmt/format.h>

#include "doctor/diagnoser.h"
#include "k8s/gpu_resources.h"

namespace kgpu::doctor::detail {


std::optional<GpuRequest> gpu_request(const k8s::PodSpec& spec) {
  for (const auto& list : {&spec.containers, &spec.init_containers}) {
    for (const auto& c : *list) {
      for (const auto* m : {&c.resources.limits, &c.resources.requests}) {
        for (const auto& [name, q] : *m) {
          if (!k8s::is_gpu_device_resource(name) || q->is_zero()) continue;  // `nvidia.com/gpu: 0` asks for no GPU
          auto total = k8s::pod_request(spec, name);
          if (!total.is_zero()) return GpuRequest{std::string(name), std::move(total)};
        }
      }
    }
  }
  return std::nullopt;
}

sv label(const k8s::Document* doc, sv key) {
  auto it = doc->metadata.labels.find(key);
  return it == doc->metadata.labels.end() ? sv{} : it->second;
}

bool is_gpu_node(const NodeObj& n) {
  const auto* d = n.doc;
  if (label(d, "nvidia.com/gpu.present") == "true" || !label(d, "nvidia.com/gpu.product").empty() ||
      label(d, "feature.node.kubernetes.io/pci-10de.present") == "true") {
    return true;
  }
  for (const auto& [name, q] : n.v.capacity) {
    if (k8s::is_gpu_device_resource(name) && !q->is_zero()) return true;
  }
  return false;
}

int64_t gpu_allocatable(const NodeObj& n) {
  int64_t total = 0;
  for (const auto& [name, q] : n.v.allocatable) {
    if (k8s::is_gpu_device_resource(name)) total += q->value();
  }
  return total;
}

// GPU operator / kgpu component of a pod, by its name or app label: "driver", "toolkit",
// "device-plugin", "validator", "cuda-validator", "mig-manager", "dcgm-exporter", "kgpu-agent", "".
sv component(const PodObj& p) {
  sv app = label(p.doc, "app");
  if (app.empty()) app = label(p.doc, "app.kubernetes.io/name");
  for (sv s : {app, p.name()}) {
    if (s.starts_with("nvidia-driver")) return "driver";
    if (s.starts_with("nvidia-container-toolkit")) return "toolkit";
    if (s.starts_with("nvidia-device-plugin")) return "device-plugin";
    if (s.starts_with("nvidia-operator-validator")) return "validator";
    if (s.starts_with("nvidia-cuda-validator")) return "cuda-validator";
    if (s.starts_with("nvidia-mig-manager")) return "mig-manager";
    if (s.starts_with("nvidia-dcgm-exporter")) return "dcgm-exporter";
    if (s.starts_with("kgpu-agent") || s == "kgpu") return "kgpu-agent";
  }
  return "";
}

const PodObj* stack_pod_on(const Snapshot& s, sv node, sv comp) {
  for (size_t i : s.pods_on(node)) {
    if (component(s.pods[i]) == comp) return &s.pods[i];
  }
  return nullptr;
}

// "Running", "CrashLoopBackOff", "Init:CrashLoopBackOff", "Init:1/4" ... as kubectl prints.
std::string pod_status_text(const k8s::Pod& p) {
  const auto& inits = p.status.init_container_statuses;
  for (size_t i = 0; i < inits.size(); ++i) {
    const auto& st = inits[i].state;
    if (st.state == "terminated" && st.exit_code == 0) continue;
    if (!st.reason.empty() && st.reason != "PodInitializing") return fmt::format("Init:{}", st.reason);
    return fmt::format("Init:{}/{}", i, inits.size());
  }
  for (const auto& c : p.status.container_statuses) {
    if (c.state.state == "waiting" && !c.state.reason.empty()) return std::string(c.state.reason);
    if (c.state.state == "terminated" && !c.state.reason.empty()) return std::string(c.state.reason);
  }
  if (!p.status.reason->empty()) return std::string(*p.status.reason);
  return std::string(p.status.phase.value_or("Unknown"));
}

// The controller at the top of a pod's owner chain: ("Deployment", name) through a ReplicaSet
// named <deployment>-<hash>, else the direct controller, else ("Pod", name).
std::pair<std::string, std::string> top_owner(const Snapshot& s, const PodObj& p) {
  for (const auto& o : p.doc->metadata.owner_references) {
    if (!o.controller) continue;
    if (o.kind == "ReplicaSet") {
      if (const auto* rs = s.workload("ReplicaSet", p.ns(), o.name)) {
        for (const auto& ro : rs->doc->metadata.owner_references) {
          if (ro.kind == "Deployment") return {"Deployment", std::string(ro.name)};
        }
      }
      if (auto dash = o.name.rfind('-'); dash != sv::npos) {
        const sv dep = o.name.substr(0, dash);
        if (s.workload("Deployment", p.ns(), dep) != nullptr) return {"Deployment", std::string(dep)};
      }
    }
    return {std::string(o.kind), std::string(o.name)};
  }
  return {"Pod", std::string(p.name())};
}

const k8s::Container* first_gpu_container(const k8s::PodSpec& spec) {
  for (const auto& c : spec.containers) {
    for (const auto& [name, q] : c.resources.limits) {
      if (k8s::is_gpu_device_resource(name)) return &c;
    }
    for (const auto& [name, q] : c.resources.requests) {
      if (k8s::is_gpu_device_resource(name)) return &c;
    }
  }
  return nullptr;
}

bool system_namespace(sv ns) {
  return ns.starts_with("kube-") || ns == "gpu-operator" || ns.starts_with("nvidia") || ns == "kgpu-system" ||
         ns == "monitoring" || ns == "cert-manager" || ns == "default-system";
}

}  // namespace kgpu::doctor::detail
