// Pods known only from their events (`kubectl get events` pasted without the pods): what the
// scheduler and the kubelet did to them, from the event and whatever else the snapshot holds. The
// scheduler's FailedScheduling for GPUs (its message only: without the pod its fit cannot be
// recomputed), admission rejections (UnexpectedAdmissionError, OutOf<resource>), the runtime hook
// failing, probe kills of a loading model server. A pod that is in the snapshot is walked by
// pod_finding() instead; when other pods of its namespace are, it was deleted and its events are
// history.
#include <fmt/format.h>

#include <set>

#include "doctor/diagnoser.h"
#include "k8s/gpu_resources.h"

namespace kgpu::doctor::detail {

void Diagnoser::pod_event_findings() {
  std::set<std::pair<sv, sv>> seen;
  std::set<sv> collected;  // namespaces whose pods are in the snapshot
  for (const auto& p : s_.pods) collected.insert(p.ns());
  for (const auto& e : s_.events) {
    const auto& io = e.v.involved_object;
    if (io.kind != "Pod" || s_.pod(io.namespace_, io.name) != nullptr) continue;
    // With the namespace's pods collected, a pod missing from them was deleted: its events are history.
    if (collected.contains(io.namespace_)) continue;
    switch (o_.target.kind) {
      case Target::Kind::kCluster:
        break;
      case Target::Kind::kNamespace:
        if (io.namespace_ != o_.target.ns) continue;
        break;
      case Target::Kind::kNode:
        if (e.v.source_host != o_.target.name) continue;
        break;
      case Target::Kind::kPod:
        continue;  // diagnose() requires the target pod in the snapshot
    }
    if (!seen.emplace(io.namespace_, io.name).second) continue;
    if (auto f = pod_event_finding(io.namespace_, io.name)) add(std::move(*f));
  }
}

std::optional<Finding> Diagnoser::pod_event_finding(sv ns, sv name) {
  const auto events = s_.events_for("Pod", ns, name);
  const std::string obj = fmt::format("pod/{}/{}", ns, name);
  // The kubelet's device admission: "Allocate failed due to ..., which is unexpected".
  if (const auto* e = last_event(s_, "Pod", ns, name, "UnexpectedAdmissionError")) {
    return admission_rejected(ns, name, e->v.source_host, e->v.message, event_evidence(*e), nullptr);
  }
  // The kubelet's resource admission (a pod bound with spec.nodeName, or a race with another pod):
  // reason OutOf<resource>, "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 1,
  // capacity: 1".
  for (const auto* e : events) {
    if (!e->v.reason.starts_with("OutOf") || !k8s::is_gpu_device_resource(e->v.reason.substr(5))) continue;
    const sv resource = e->v.reason.substr(5);
    const sv node = e->v.source_host;
    Finding f = make_finding(RuleId::kAdmissionOutOfResource, obj);
    f.summary = fmt::format(
        "the kubelet{}{} rejected the pod ({}): the node had no free {} when the pod arrived (a pod that names its "
        "node in spec.nodeName skips the scheduler)",
        node.empty() ? "" : " on ", node, e->v.reason, resource);
    f.evidence.push_back(event_evidence(*e));
    f.details.push_back("the pod is not in the snapshot: diagnosed from its event");
    f.fix.push_back(
        fmt::format("drop spec.nodeName and select the node with a nodeSelector (kubernetes.io/hostname: {}) so that "
                    "the scheduler waits for a free {}",
                    node.empty() ? sv("<node>") : node, resource));
    f.fix.push_back(fmt::format("kubectl get pod -n {} {} -o yaml  # then re-create it", ns, name));
    return f;
  }
  // The NVIDIA container runtime hook (CreateContainerError / RunContainerError events).
  if (const auto* e = last_event(s_, "Pod", ns, name, "", "nvidia-container-cli")) {
    const sv msg = e->v.message;
    const sv node = e->v.source_host;
    const bool cuda = contains(msg, "requirement error") || contains(msg, "unsatisfied condition: cuda");
    Finding f = make_finding(cuda ? RuleId::kAppCudaNewerThanDriver : RuleId::kToolkitInitError, obj);
    f.summary = cuda ? fmt::format("the image requires a newer CUDA than the driver on {} supports",
                                   node.empty() ? sv("the node") : node)
                     : fmt::format(
                           "the NVIDIA container runtime hook failed on {}: the toolkit ran but the driver was not "
                           "ready",
                           node.empty() ? sv("the node") : node);
    f.evidence.push_back(event_evidence(*e));
    if (!node.empty()) {
      if (const auto* d = stack_pod_on(s_, node, "driver")) {
        f.details.push_back(fmt::format("driver pod {}/{} on {}: {}", d->ns(), d->name(), node, pod_status_text(d->v)));
      }
    }
    f.fix.push_back(cuda
                        ? "use an image built for the node's CUDA version, or upgrade the driver on the node pool"
                        : "kubectl logs -n gpu-operator -l app=nvidia-driver-daemonset --tail=100  # the driver first");
    if (!cuda) f.fix.push_back("kubectl logs -n gpu-operator -l app=nvidia-container-toolkit-daemonset --tail=50");
    return f;
  }
  if (auto f = probe_killed(ns, name, nullptr)) return f;
  // The scheduler: "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match
  // Pod's node affinity/selector. preemption: ...", or a GPU taint no node's pod tolerated.
  if (const auto* e = last_event(s_, "Pod", ns, name, "FailedScheduling")) {
    const sv msg = e->v.message;
    const sv nodes = msg.substr(0, msg.find(" preemption:"));
    std::string resource;
    for (size_t pos = nodes.find("Insufficient "); pos != sv::npos; pos = nodes.find("Insufficient ", pos + 1)) {
      sv r = nodes.substr(pos + 13);
      r = r.substr(0, r.find_first_of(", "));
      while (r.ends_with('.')) r.remove_suffix(1);
      if (k8s::is_gpu_device_resource(r)) resource = std::string(r);
    }
    const bool gpu_taint = contains(nodes, "untolerated taint") && contains(nodes, "nvidia.com/");
    if (!resource.empty() || gpu_taint) {
      Finding f = make_finding(resource.empty() ? RuleId::kGpuTaintNotTolerated : RuleId::kInsufficientGpu, obj);
      f.summary = resource.empty() ? "the scheduler finds no node whose GPU taint the pod tolerates"
                                   : fmt::format("the scheduler finds no node with a free {} for the pod", resource);
      f.evidence.push_back(event_evidence(*e));
      f.details.push_back(
          "the pod is not in the snapshot: diagnosed from its FailedScheduling event; its GPU holders and near "
          "misses need the pods and nodes (kgpu doctor --collect)");
      if (resource.empty()) {
        f.fix.push_back(
            "add a toleration for the GPU nodes' taint (e.g. key nvidia.com/gpu, operator Exists, effect NoSchedule)");
      } else {
        f.fix.push_back(fmt::format(
            "kubectl get pods -A -o wide --field-selector status.phase=Running | grep -v Completed  # who holds {}",
            resource));
      }
      f.fix.push_back("kgpu doctor --collect -o snapshot.json  # then kgpu doctor --snapshot snapshot.json --pod " +
                      std::string(ns) + "/" + std::string(name));
      return f;
    }
  }
  return std::nullopt;
}

}  // namespace kgpu::doctor::detail
