// The rule catalog: every rule's id, name, severity, summary and fix (docs/lint.md), and the
// lookups and option parsing over it.
#include <array>

#include "lint/checks.h"

namespace kgpu::lint {

namespace {

constexpr std::array kRules = {
    RuleInfo{
        "GPU001", "gpu-request-not-limit", Severity::kError,
        "A GPU is requested without a limit, or its request differs from its limit (GPUs cannot be overcommitted).",
        "Set the GPU count under resources.limits only (the request defaults to it), or make request == limit."},
    RuleInfo{"GPU002", "gpu-fractional", Severity::kError,
             "A GPU quantity is not a whole number (0.5, 500m): extended resources are counted in whole units.",
             "Request a whole number; for a fraction of a GPU request a MIG slice or use time-slicing replicas."},
    RuleInfo{"GPU003", "gpu-resource-name", Severity::kError,
             "A resource name looks like a misspelled NVIDIA GPU resource; no node advertises it, so the pod stays "
             "Pending.",
             "Use nvidia.com/gpu, nvidia.com/gpu.shared or nvidia.com/mig-<n>g.<m>gb (lower case, as the device plugin "
             "advertises them)."},
    RuleInfo{"GPU004", "single-gpu-rolling-update", Severity::kWarning,
             "A single-replica GPU Deployment uses the RollingUpdate strategy: a rollout needs a second GPU while "
             "the old pod still holds the first.",
             "Set spec.strategy.type: Recreate (or rollingUpdate.maxSurge: 0)."},
    RuleInfo{"GPU005", "gpu-taint-not-tolerated", Severity::kWarning,
             "A GPU workload does not tolerate the GPU node taint nvidia.com/gpu=present:NoSchedule, so it cannot "
             "schedule on tainted GPU nodes.",
             "Add a toleration {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule} to the pod spec."},
    RuleInfo{"GPU006", "privileged-gpu-container", Severity::kError,
             "A GPU container runs with privileged: true, which exposes every GPU on the node and bypasses the "
             "device plugin.",
             "Remove privileged: true and request GPUs through resources.limits (the device plugin and CDI inject "
             "the devices)."},
    RuleInfo{"GPU007", "host-nvidia-device", Severity::kError,
             "A hostPath volume mounts /dev/nvidia* device nodes into the pod, bypassing the scheduler and the device "
             "plugin.",
             "Remove the hostPath volume and request nvidia.com/gpu instead."},
    RuleInfo{"GPU008", "manual-visible-devices", Severity::kError,
             "NVIDIA_VISIBLE_DEVICES is set by hand; it is not a substitute for a GPU request and can bypass the "
             "scheduler. Node GPU agents (pods that mount the kubelet's device-plugin or pod-resources directory, "
             "such as device plugins and exporters) are exempt: they must see every GPU.",
             "Remove the variable and request nvidia.com/gpu; the device plugin sets it for the GPUs it allocates."},
    RuleInfo{"GPU009", "gpu-job-without-deadline", Severity::kWarning,
             "A GPU Job (or CronJob job template) has neither activeDeadlineSeconds nor ttlSecondsAfterFinished, so "
             "a hung or finished Job can hold GPUs or clutter the cluster indefinitely.",
             "Set spec.activeDeadlineSeconds (hung runs) and/or spec.ttlSecondsAfterFinished (finished Jobs)."},
    RuleInfo{"GPU010", "inference-startup-probe", Severity::kWarning,
             "An inference server has no startupProbe, or its budget (initialDelaySeconds + periodSeconds x "
             "failureThreshold) is shorter than model loading takes.",
             "Add a startupProbe on the health endpoint with periodSeconds: 10 and failureThreshold: 60 (10 "
             "minutes)."},
    RuleInfo{"GPU011", "inference-shm", Severity::kWarning,
             "An inference server has no memory-backed /dev/shm; the container default (64 MiB) breaks NCCL and "
             "tensor parallelism.",
             "Mount an emptyDir {medium: Memory, sizeLimit: 2Gi} at /dev/shm."},
    RuleInfo{"GPU012", "inference-model-cache", Severity::kWarning,
             "An inference server has no persistent volume at its model cache, so every restart downloads the model "
             "again.",
             "Mount a PersistentVolumeClaim at /root/.cache/huggingface (or at $HF_HOME / --download-dir)."},
    RuleInfo{"GPU013", "token-literal", Severity::kError,
             "A token or API key of a GPU workload is written in the manifest as a literal value.",
             "Store it in a Secret and reference it with env[].valueFrom.secretKeyRef."},
    RuleInfo{"GPU014", "image-not-pinned", Severity::kWarning,
             "A GPU workload's image has no tag or uses :latest, so a restart can silently change the server.",
             "Pin a version tag (vllm/vllm-openai:v0.32.0) or a digest (@sha256:...)."},
    RuleInfo{"GPU015", "hpa-cpu-on-llm", Severity::kWarning,
             "A HorizontalPodAutoscaler scales an LLM inference server on CPU or memory (or on the default CPU "
             "metric); CPU does not track GPU inference load.",
             "Scale on queue depth (vllm:num_requests_waiting) with a Pods, Object or External metric (Prometheus "
             "Adapter or KEDA)."},
    RuleInfo{"GPU016", "time-slicing-fail-requests", Severity::kWarning,
             "A device-plugin time-slicing config does not set failRequestsGreaterThanOne: true, so pods asking for "
             "several replicas are admitted without getting more compute.",
             "Set sharing.timeSlicing.failRequestsGreaterThanOne: true."},
    RuleInfo{"GPU017", "dra-api-version", Severity::kWarning,
             "A Dynamic Resource Allocation object uses a beta/alpha API instead of resource.k8s.io/v1 (GA since "
             "Kubernetes 1.34).",
             "Use apiVersion: resource.k8s.io/v1 (and the v1 field layout: requests[].exactly)."},
    RuleInfo{"GPU018", "sticky-xid-alert", Severity::kWarning,
             "An alert compares DCGM_FI_DEV_XID_ERRORS with > 0; the gauge keeps the last XID forever, so the alert "
             "never resolves.",
             "Alert on increase(kgpu_xid_events_total[10m]) > 0, or on dcgm-exporter's windowed "
             "DCGM_EXP_XID_ERRORS_COUNT > 0 (changes() on the gauge misses a new XID: its err_code label starts a new "
             "series)."},
};

}  // namespace

const RuleInfo& rule(std::string_view id) {
  for (const RuleInfo& r : kRules) {
    if (r.id == id) return r;
  }
  std::abort();  // a typo in this file
}

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "error";
}

const char* sarif_level(Severity s) { return s == Severity::kInfo ? "note" : severity_name(s); }

std::span<const RuleInfo> rules() { return kRules; }

const RuleInfo* find_rule(std::string_view id_or_name) {
  const std::string l = ascii_lower(id_or_name);
  for (const RuleInfo& r : kRules) {
    if (ascii_lower(r.id) == l || r.name == l) return &r;
  }
  return nullptr;
}

std::string Finding::to_string() const {
  return fmt::format("{}:{}: {} {} ({}): {} [{}]\n    fix: {}", file, line, severity_name(rule->severity), rule->id,
                     rule->name, message, object, fix);
}

Result<Options> make_options(const std::vector<std::string>& disabled) {
  Options o;
  for (const std::string& item : disabled) {
    std::string_view list = item;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view one = list.substr(0, comma);
      if (!one.empty()) {
        const RuleInfo* r = find_rule(one);
        if (r == nullptr) {
          return fail(ErrorCode::kInvalidArgument, "unknown rule '{}' (kgpu lint --list-rules lists them)", one);
        }
        o.disabled.emplace_back(r->id);
      }
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return o;
}

}  // namespace kgpu::lint
