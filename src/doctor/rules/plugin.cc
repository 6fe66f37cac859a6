// Plugin layer: the device plugin's registration (a GPU node advertising no GPUs) and the kubelet's
// device admission (UnexpectedAdmissionError).
#include <fmt/format.h>

#include <algorithm>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

void Diagnoser::plugin_findings(const NodeObj& n) {
  if (!is_gpu_node(n)) return;
  const sv name = n.name();
  if (gpu_allocatable(n) > 0) return;
  // DRA instead of the device plugin: the GPUs are published as ResourceSlices of a GPU driver
  // (gpu.nvidia.com, ...), or the GPU Operator was told not to deploy the plugin on the node.
  if (label(n.doc, "nvidia.com/gpu.deploy.device-plugin") == "false") return;
  if (std::any_of(s_.slices.begin(), s_.slices.end(), [&](const Obj<k8s::ResourceSlice>& sl) {
        return *sl.v.node_name == name && contains(*sl.v.driver, "nvidia.com") && !sl.v.devices.empty();
      })) {
    return;
  }
  not_advertised_nodes_.insert(std::string(name));
  Finding f;
  set_rule(f, RuleId::kGpuNotAdvertised);
  f.object = fmt::format("node/{}", name);
  f.summary = "the node has NVIDIA GPUs but advertises no nvidia.com/gpu: the device plugin has not registered";
  std::vector<std::string> alloc;
  for (const auto& [k, q] : n.v.allocatable) alloc.push_back(fmt::format("\"{}\":\"{}\"", k, q->to_string()));
  int alloc_line = 0;
  for (const auto& [k, q] : n.v.allocatable) alloc_line = alloc_line == 0 ? q.line : std::min(alloc_line, q.line);
  f.evidence.push_back(Evidence{fmt::format("node/{} .status.allocatable at {}", name, n.doc->where(alloc_line)),
                                fmt::format("{{{}}}", fmt::join(alloc, ","))});
  if (const auto* v = stack_pod_on(s_, name, "validator")) {
    const auto& inits = v->v.status.init_container_statuses;
    for (const auto& st : inits) {
      const auto& s = st.state;
      if (s.state == "terminated" && s.exit_code == 0) continue;
      sv stage = st.name;
      if (auto pos = stage.find("-validation"); pos != sv::npos) stage = stage.substr(0, pos);
      f.summary += fmt::format("; the operator validator's {} stage has not passed", stage);
      f.evidence.push_back(Evidence{
          fmt::format("pod/{}/{} init container {} at {}", v->ns(), v->name(), st.name, v->doc->where(st.line)),
          fmt::format("{} {}{} (restarts {})", s.state, s.reason,
                      s.message.empty() ? "" : ": " + std::string(s.message), st.restart_count)});
      std::vector<const ContainerLog*> logs;
      for (const auto* l : s_.logs_for(v->ns(), v->name())) {
        if (l->container == st.name) logs.push_back(l);
      }
      if (auto hit = find_in_logs(logs, {"rror", "failed", "Failed", "waiting", "not ready", "No such"})) {
        f.evidence.push_back(log_evidence(*hit));
      }
      f.fix.push_back(fmt::format("kubectl logs -n {} {} -c {} --tail=50", v->ns(), v->name(), st.name));
      if (stage == "driver") {
        if (const auto* d = stack_pod_on(s_, name, "driver")) {
          f.details.push_back(fmt::format("driver pod {}/{}: {}", d->ns(), d->name(), pod_status_text(d->v)));
          f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=100", d->ns(), d->name()));
        }
      }
      break;
    }
  }
  if (const auto* dp = stack_pod_on(s_, name, "device-plugin")) {
    f.details.push_back(fmt::format("device plugin pod {}/{}: {}", dp->ns(), dp->name(), pod_status_text(dp->v)));
  } else {
    f.details.push_back("no device plugin pod runs on the node");
  }
  f.fix.push_back(fmt::format("kubectl get pods -n gpu-operator -o wide --field-selector spec.nodeName={}", name));
  add(std::move(f));
}

std::optional<Finding> Diagnoser::admission(const PodObj& p) {
  return admission_rejected(p.ns(), p.name(), *p.v.spec.node_name, *p.v.status.message,
                            Evidence{fmt::format("{} .status (reason UnexpectedAdmissionError) at {}", pod_ref(p),
                                                 p.doc->where(p.v.status.message.line)),
                                     std::string(*p.v.status.message)},
                            &p);
}

Finding Diagnoser::admission_rejected(sv ns, sv name, sv node_name, sv msg, Evidence evidence, const PodObj* p) {
  Finding f;
  f.object = fmt::format("pod/{}/{}", ns, name);
  f.evidence.push_back(std::move(evidence));
  if (p == nullptr) f.details.push_back("the pod is not in the snapshot: diagnosed from its event");
  const auto owner = p != nullptr ? top_owner(s_, *p) : std::pair<std::string, std::string>{"Pod", std::string(name)};
  const NodeObj* node = s_.node(node_name);
  const std::optional<GpuRequest> req = p != nullptr ? gpu_request(p->v.spec) : std::nullopt;
  const std::string resource = req ? req->resource : "nvidia.com/gpu";
  // The device plugin's own refusals of a shared GPU: time-slicing's failRequestsGreaterThanOne
  // and MPS's one-replica limit on multi-GPU nodes.
  if (contains_any(
          msg, {"maximum request size for shared resources is 1", "too large", "invalid request for sharing GPU"})) {
    set_rule(f, RuleId::kAdmissionSharedRequest);
    f.summary = contains(msg, "(MPS)")
                    ? fmt::format(
                          "the kubelet rejected the pod on {}: it asks for {} {} replicas of an MPS-shared GPU and "
                          "the plugin allows at most one per pod on multi-GPU nodes",
                          node_name, req ? req->quantity.to_string() : "several", req ? req->resource : "GPU")
                    : fmt::format(
                          "the kubelet rejected the pod on {}: it asks for {} {} replicas of a shared (time-sliced) "
                          "GPU and the plugin fails requests greater than one (failRequestsGreaterThanOne)",
                          node_name, req ? req->quantity.to_string() : "several", req ? req->resource : "GPU");
    if (node != nullptr) {
      if (sv r = label(node->doc, "nvidia.com/gpu.replicas"); !r.empty()) {
        f.evidence.push_back(
            Evidence{fmt::format("node/{} label at {}", node_name, node->doc->where(node->doc->metadata.labels_line)),
                     fmt::format("nvidia.com/gpu.replicas={}", r)});
      }
    }
    f.details.push_back(
        "Two replicas of a time-sliced GPU are not twice the compute; request one replica, or a MIG "
        "slice or whole GPU on an unshared node pool.");
    const k8s::Container* c = p != nullptr ? first_gpu_container(p->v.spec) : nullptr;
    f.fix.push_back(
        patch_command(owner, ns,
                      fmt::format("{{\"containers\":[{{\"name\":\"{}\",\"resources\":{{\"limits\":{{\"{}\":1}}}}}}]}}",
                                  c != nullptr ? sv(c->name) : sv("main"), resource)));
    if (owner.first != "Pod") f.fix.push_back(fmt::format("kubectl delete pod -n {} {}", ns, name));
    return f;
  }
  const auto delete_pod =
      fmt::format("kubectl delete pod -n {} {}{}", ns, name,
                  p == nullptr           ? "  # its controller re-creates it; a bare pod: re-apply its manifest"
                  : owner.first == "Pod" ? "  # bare pod: re-apply its manifest afterwards"
                                         : "");
  // The plugin answered, with an error: its GetPreferredAllocation or Allocate RPC failed (a GPU
  // fallen off the bus, NVLink state unreadable, the plugin's own error).
  if (contains_any(msg, {"rpc error", "rpc failed", "GPU is lost"})) {
    set_rule(f, RuleId::kAdmissionDeviceError);
    f.summary = fmt::format(
        "the kubelet on {} rejected the pod: the device plugin's allocation call failed, which usually means a "
        "faulty or lost GPU on the node",
        node_name);
    f.details.push_back("the kubelet does not retry an admission failure: the pod stays Failed");
    f.fix.push_back(fmt::format("kubectl cordon {}  # until the GPU is checked", node_name));
    f.fix.push_back(fmt::format(
        "kubectl logs -n gpu-operator -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName={} "
        "--tail=100  # and nvidia-smi / XID errors on the node",
        node_name));
    f.fix.push_back(delete_pod);
    return f;
  }
  set_rule(f, RuleId::kAdmissionPluginNotRegistered);
  f.summary = fmt::format(
      "the kubelet on {} admitted the pod before the device plugin had (re-)registered its devices "
      "(typically right after a kubelet restart); the pod failed and will not be retried",
      node_name);
  if (const auto* e = last_event(s_, "Node", "", node_name, "Starting")) f.evidence.push_back(event_evidence(*e));
  if (const auto* dp = stack_pod_on(s_, node_name, "device-plugin")) {
    f.details.push_back(
        fmt::format("device plugin pod {}/{} on the node: {}", dp->ns(), dp->name(), pod_status_text(dp->v)));
  }
  f.fix.push_back(delete_pod);
  f.fix.push_back(fmt::format("kubectl get node {} -o jsonpath='{{.status.allocatable}}'", node_name));
  f.fix.push_back(
      "kubectl rollout restart -n gpu-operator daemonset/nvidia-device-plugin-daemonset  # if still missing");
  return f;
}

}  // namespace kgpu::doctor::detail
