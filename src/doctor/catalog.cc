// The catalog of every rule kgpu doctor reports (docs/doctor.md lists the same).
#include "doctor/diagnose.h"

namespace kgpu::doctor {

const std::vector<RuleInfo>& rule_catalog() {
  static const std::vector<RuleInfo> kRules = {
      {"invalid-quantity", Layer::kSpec, Severity::kWarning,
       "a quantity in the snapshot is not one the API server accepts (object not diagnosed)"},
      {"gpu-request-fractional", Layer::kSpec, Severity::kCritical, "GPU request is not a whole number"},
      {"gpu-request-limit-mismatch", Layer::kSpec, Severity::kCritical, "GPU request differs from its limit"},
      {"quota-exhausted", Layer::kSpec, Severity::kCritical, "ResourceQuota on GPUs used up: pods are not created"},
      {"selector-no-match", Layer::kScheduler, Severity::kCritical, "node selector / affinity matches no node"},
      {"gpu-taint-not-tolerated", Layer::kScheduler, Severity::kCritical, "GPU nodes' taint not tolerated"},
      {"gpu-node-unavailable", Layer::kNode, Severity::kCritical, "GPU nodes cordoned or NotReady: no new pods"},
      {"gpu-node-cpu-memory-full", Layer::kScheduler, Severity::kCritical, "GPU free but node CPU/memory full"},
      {"rolling-update-second-gpu", Layer::kScheduler, Severity::kCritical, "rolling update needs a second GPU"},
      {"insufficient-gpu", Layer::kScheduler, Severity::kCritical, "not enough free GPUs (with their holders)"},
      {"dra-claim-unsatisfiable", Layer::kScheduler, Severity::kCritical, "no device satisfies a DRA claim"},
      {"mig-config-failed", Layer::kNode, Severity::kCritical, "MIG configuration state failed"},
      {"mig-config-pending", Layer::kNode, Severity::kWarning, "MIG configuration still pending/rebooting"},
      {"gpu-resource-name-mismatch", Layer::kSpec, Severity::kCritical,
       "pod asks a GPU resource name the nodes do not advertise (renameByDefault)"},
      {"gpu-not-advertised", Layer::kPlugin, Severity::kCritical, "node advertises no nvidia.com/gpu"},
      {"admission-shared-request", Layer::kPlugin, Severity::kCritical, "UnexpectedAdmissionError: shared request > 1"},
      {"admission-plugin-not-registered", Layer::kPlugin, Severity::kCritical,
       "UnexpectedAdmissionError: plugin not re-registered after kubelet restart"},
      {"admission-out-of-resource", Layer::kScheduler, Severity::kCritical,
       "pod bound with nodeName rejected by the kubelet: OutOf<resource>"},
      {"toolkit-init-error", Layer::kRuntime, Severity::kCritical, "nvidia-container-cli initialization error"},
      {"driver-version-mismatch", Layer::kDriver, Severity::kCritical, "NVML driver/library version mismatch"},
      {"driver-kernel-crashloop", Layer::kDriver, Severity::kCritical, "driver pod CrashLoopBackOff (kernel)"},
      {"driver-secure-boot", Layer::kDriver, Severity::kCritical, "Secure Boot rejects unsigned modules"},
      {"app-visible-devices-by-hand", Layer::kApp, Severity::kCritical, "NVIDIA_VISIBLE_DEVICES set by hand"},
      {"app-cuda-newer-than-driver", Layer::kApp, Severity::kCritical, "image CUDA newer than the driver"},
      {"app-no-gpu-requested", Layer::kApp, Severity::kWarning, "GPU image without a GPU request"},
      {"snapshot-no-nodes", Layer::kCluster, Severity::kWarning, "snapshot has no nodes: scheduling not diagnosed"},
      {"checklist-gpu-nodes-tainted", Layer::kCluster, Severity::kWarning, "GPU nodes tainted"},
      {"checklist-workloads-tolerate", Layer::kCluster, Severity::kWarning, "GPU workloads tolerate the GPU taint"},
      {"checklist-gpu-quota", Layer::kCluster, Severity::kWarning, "requests.nvidia.com/gpu quota per team namespace"},
      {"checklist-priority-classes", Layer::kCluster, Severity::kWarning, "PriorityClasses for production vs dev"},
      {"checklist-pdb-inference", Layer::kCluster, Severity::kWarning, "PDBs on inference Deployments"},
      {"checklist-gpu-metrics-scraped", Layer::kCluster, Severity::kWarning, "GPU metrics scraped by Prometheus"},
      {"checklist-gpu-alerts", Layer::kCluster, Severity::kWarning, "alerts: temperature, memory, XID, idle"},
      {"checklist-image-pinned", Layer::kCluster, Severity::kWarning, "images pinned"},
      {"checklist-one-driver-owner", Layer::kCluster, Severity::kCritical, "exactly one driver owner per node"},
      {"checklist-startup-probe", Layer::kCluster, Severity::kWarning, "startup probes on inference"},
      {"checklist-autoscale-queue-depth", Layer::kCluster, Severity::kWarning, "autoscaling on queue depth, not CPU"},
      {"checklist-cuda-validator", Layer::kCluster, Severity::kWarning,
       "nvidia-cuda-validator completed on every GPU node"},
  };
  return kRules;
}

}  // namespace kgpu::doctor
