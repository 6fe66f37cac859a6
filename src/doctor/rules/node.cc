// Node layer: the GPU node's own state (MIG configuration applied or failed, GPU faults under
// remediation, a failed validation).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

namespace {

// The kgpu.io/remediation record of GPU `uuid` named in a condition message, as "phase: message".
std::string remediation_record(const k8s::Document& doc, sv message) {
  const auto it = doc.metadata.annotations.find("kgpu.io/remediation");
  if (it == doc.metadata.annotations.end() || it->second.size() > 64 * 1024) return "";
  const auto j = nlohmann::json::parse(it->second, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("gpus") || !j["gpus"].is_object()) return "";
  std::string out;
  for (const auto& [uuid, r] : j["gpus"].items()) {
    if (!r.is_object() || !contains(message, uuid) || r.value("phase", "") == "in-service") continue;
    out += fmt::format("{}{}: phase {}, action {}, {} reset(s) tried{}: {}", out.empty() ? "" : "; ", uuid,
                       r.value("phase", "?"), r.value("action", "?"), r.value("resets", 0),
                       r.value("budget", false) ? ", holds a budget slot" : "", r.value("message", ""));
  }
  return out;
}

}  // namespace

void Diagnoser::remediation_findings(const NodeObj& n) {
  const sv name = n.name();
  for (const auto& c : n.v.conditions) {
    if (c.status != "True" ||
        (c.type != "GpuResetRequired" && c.type != "GpuRebootRequired" && c.type != "GpuNeedsAttention")) {
      continue;
    }
    Finding f;
    set_rule(f, RuleId::kGpuRemediation);
    f.object = fmt::format("node/{}", name);
    const bool noted = c.reason == "Noted";
    f.summary =
        c.type == "GpuRebootRequired"
            ? fmt::format("a GPU fault on {} needs a reboot of the node ({})", name, c.reason)
            : c.type == "GpuResetRequired"
                  ? fmt::format("a GPU on {} needs a reset and is {}", name,
                                noted ? "out of service until remediated (remediation is off or dry-run)"
                                      : "being remediated (" + std::string(c.reason) + ")")
                  : fmt::format("a GPU on {} waits for an operator ({})", name, c.reason);
    f.evidence.push_back(Evidence{fmt::format("node/{} .status.conditions[{}] at {}", name, c.type, n.doc->where(c.line)),
                                  std::string(c.message)});
    if (auto rec = remediation_record(*n.doc, c.message); !rec.empty()) {
      f.evidence.push_back(Evidence{fmt::format("node/{} annotation kgpu.io/remediation", name), rec});
    }
    f.fix.push_back(fmt::format("kubectl get events --field-selector involvedObject.kind=Node,involvedObject.name={} "
                                "--sort-by=.lastTimestamp",
                                name));
    if (noted) {
      f.fix.push_back("helm upgrade kgpu deploy/helm/kgpu --reuse-values --set remediation.mode=on   # or drain the GPU's pods and reset it by hand");
    } else if (c.type == "GpuRebootRequired") {
      f.fix.push_back(fmt::format("reboot node {} (cordoned and drained by kgpu; it is uncordoned once the GPU validates)", name));
    } else if (c.type == "GpuNeedsAttention") {
      f.fix.push_back("inspect or replace the GPU, then: kubectl annotate node " + std::string(name) +
                      " kgpu.io/remediation-release=<GPU UUID>   # the agent validates it and returns it");
    }
    add(std::move(f));
  }
  std::vector<std::string> failed;
  for (const auto& [key, value] : n.doc->metadata.labels) {
    if (sv(key).starts_with("kgpu.io/validation.") && value == "failed") failed.push_back(std::string(sv(key).substr(19)));
  }
  if (!failed.empty()) {
    Finding f;
    set_rule(f, RuleId::kGpuValidationFailed);
    f.object = fmt::format("node/{}", name);
    f.summary = fmt::format("kgpu validate failed on {}: {}", name, fmt::join(failed, ", "));
    f.evidence.push_back(Evidence{fmt::format("node/{} labels at {}", name, n.doc->where(n.doc->metadata.labels_line)),
                                  fmt::format("kgpu.io/validation.{}=failed", fmt::join(failed, "=failed, kgpu.io/validation."))});
    f.fix.push_back(fmt::format("kubectl debug node/{} -it --image=<the kgpu image> -- kgpu validate --dev-root /host", name));
    add(std::move(f));
  }
}

void Diagnoser::node_findings(const NodeObj& n) {
  if (!is_gpu_node(n)) return;
  remediation_findings(n);
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
    // kgpu's MIG manager (the agent) says why in an annotation.
    if (const auto it = n.doc->metadata.annotations.find("kgpu.io/mig-config-error");
        it != n.doc->metadata.annotations.end() && !it->second.empty()) {
      f.evidence.push_back(Evidence{fmt::format("node/{} annotation kgpu.io/mig-config-error", name), std::string(it->second)});
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
