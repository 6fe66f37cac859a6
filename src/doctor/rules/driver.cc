// Driver layer: the NVIDIA kernel driver on a node, from the GPU stack's pods and their logs.
#include <fmt/format.h>

#include <set>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

void Diagnoser::driver_findings() {
  std::set<std::string> seen;  // rule/node
  for (const auto& p : s_.pods) {
    const sv comp = component(p);
    if (comp.empty()) continue;
    const sv node = *p.v.spec.node_name;
    if (o_.target.kind == Target::Kind::kNode && node != o_.target.name) continue;
    if (o_.target.kind == Target::Kind::kPod || o_.target.kind == Target::Kind::kNamespace) continue;
    const auto logs = s_.logs_for(p.ns(), p.name());
    const NodeObj* n = s_.node(node);
    Finding f;
    f.object = fmt::format("node/{}", node);
    if (auto hit = find_in_logs(logs, {"Driver/library version mismatch"})) {
      set_rule(f, RuleId::kDriverVersionMismatch);
      f.summary =
          "the user-space NVIDIA libraries and the loaded kernel module are different versions (a host package "
          "upgrade, or a host driver fighting the Operator's)";
      f.evidence.push_back(log_evidence(*hit));
      f.fix.push_back(
          "pick one driver owner: host packages or the GPU Operator (driver.enabled=false when the host owns it)");
      f.fix.push_back(
          fmt::format("kubectl drain {} --ignore-daemonsets --delete-emptydir-data  # then reboot the node", node));
      f.fix.push_back(fmt::format("kubectl uncordon {}", node));
    } else if (auto sb = find_in_logs(
                   logs, {"Key was rejected by service", "Required key not available", "Secure Boot", "SecureBoot"})) {
      set_rule(f, RuleId::kDriverSecureBoot);
      f.summary = "Secure Boot is on and the NVIDIA kernel modules are unsigned: the kernel refuses to load them";
      f.evidence.push_back(log_evidence(*sb));
      f.fix.push_back(
          "use signed driver modules (precompiled, signed images) or enroll the signing key (MOK); or "
          "disable Secure Boot on the GPU node pool");
      f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=100", p.ns(), p.name()));
    } else if (comp == "driver") {
      bool crashloop = false;
      for (const auto* list : {&p.v.status.container_statuses, &p.v.status.init_container_statuses}) {
        for (const auto& c : *list) {
          if (c.state.reason == "CrashLoopBackOff") {
            crashloop = true;
            f.evidence.push_back(
                Evidence{fmt::format("{} container {} at {}", pod_ref(p), c.name, p.doc->where(c.state.line)),
                         fmt::format("waiting: CrashLoopBackOff (restarts {}){}", c.restart_count,
                                     c.state.message.empty() ? "" : ": " + std::string(c.state.message))});
          }
        }
      }
      if (!crashloop) continue;
      set_rule(f, RuleId::kDriverKernelCrashloop);
      std::string kernel = n != nullptr ? std::string(n->v.node_info.kernel_version) : "";
      f.summary = fmt::format(
          "the driver pod is in CrashLoopBackOff: it cannot build or find kernel modules for the "
          "node's kernel {}",
          kernel.empty() ? "(unknown)" : kernel);
      if (auto kh = find_in_logs(logs, {"kernel headers", "Could not resolve Linux kernel version", "linux-headers",
                                        "Unable to locate package", "kernel-devel", "Failed to install", "rror"})) {
        f.evidence.push_back(log_evidence(*kh));
      }
      if (n != nullptr && !kernel.empty()) {
        f.evidence.push_back(Evidence{fmt::format("node/{} .status.nodeInfo at {}", node, n->doc->where()),
                                      fmt::format("kernelVersion: {}, osImage: {}", kernel, n->v.node_info.os_image)});
      }
      f.fix.push_back(
          "use a driver version that supports this kernel/OS, or precompiled driver images "
          "(driver.usePrecompiled=true); pin node kernels to a tested combination");
      f.fix.push_back(fmt::format("kubectl logs -n {} {} --previous --tail=100", p.ns(), p.name()));
    } else {
      continue;
    }
    if (!seen.insert(f.rule + "/" + std::string(node)).second) continue;
    add(std::move(f));
  }
}

}  // namespace kgpu::doctor::detail
