// Node layer: the GPU node's own state (MIG configuration applied or failed).
#include <fmt/format.h>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

void Diagnoser::node_findings(const NodeObj& n) {
  if (!is_gpu_node(n)) return;
  const sv name = n.name();
  const sv state = label(n.doc, "nvidia.com/mig.config.state");
  if (state == "failed" || state == "pending" || state == "rebooting") {
    Finding f;
    set_rule(f, state == "failed" ? RuleId::kMigConfigFailed : RuleId::kMigConfigPending);
    f.object = fmt::format("node/{}", name);
    const sv cfg = label(n.doc, "nvidia.com/mig.config");
    f.summary = state == "failed"
                    ? fmt::format(
                          "MIG Manager failed to apply the layout {} (the profile is not valid for this GPU "
                          "model, or processes outside Kubernetes hold the GPU)",
                          cfg)
                    : fmt::format("the MIG layout {} is still being applied ({}): GPU pods on the node were drained",
                                  cfg, state);
    f.evidence.push_back(Evidence{fmt::format("node/{} labels at {}", name, n.doc->where(n.doc->metadata.labels_line)),
                                  fmt::format("nvidia.com/mig.config={}, nvidia.com/mig.config.state={}", cfg, state)});
    if (sv product = label(n.doc, "nvidia.com/gpu.product"); !product.empty()) {
      f.details.push_back(fmt::format("GPU: {}", product));
    }
    if (const auto* mm = stack_pod_on(s_, name, "mig-manager")) {
      if (auto hit = find_in_logs(s_.logs_for(mm->ns(), mm->name()),
                                  {"rror", "nvalid", "failed", "Failed", "not supported", "in use"})) {
        f.evidence.push_back(log_evidence(*hit));
      }
      f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=100", mm->ns(), mm->name()));
    }
    if (state == "failed") {
      f.fix.push_back(fmt::format("kubectl label node {} nvidia.com/mig.config=<a profile valid for {}> --overwrite",
                                  name, label(n.doc, "nvidia.com/gpu.product")));
    } else {
      f.fix.push_back(fmt::format(
          "kubectl get node {} -o jsonpath='{{.metadata.labels.nvidia\\.com/mig\\.config\\.state}}' -w", name));
    }
    add(std::move(f));
  }
}

}  // namespace kgpu::doctor::detail
