#include "doctor/catalog.h"

#include <array>
#include <cstddef>

namespace kgpu::doctor {

namespace {

using enum RuleId;
constexpr Layer kSpec = Layer::kSpec, kScheduler = Layer::kScheduler, kNode = Layer::kNode, kPlugin = Layer::kPlugin,
                kRuntime = Layer::kRuntime, kDriver = Layer::kDriver, kApp = Layer::kApp, kCluster = Layer::kCluster;
constexpr Severity kCrit = Severity::kCritical, kWarn = Severity::kWarning;

constexpr std::array<RuleInfo, static_cast<size_t>(kCount)> kRules = {{
    {kInvalidQuantity, "invalid-quantity", kSpec, kWarn,
     "a quantity in the snapshot is not one the API server accepts (object not diagnosed)"},
    {kGpuRequestFractional, "gpu-request-fractional", kSpec, kCrit, "GPU request is not a whole number"},
    {kGpuRequestLimitMismatch, "gpu-request-limit-mismatch", kSpec, kCrit, "GPU request differs from its limit"},
    {kGpuLimitMissing, "gpu-limit-missing", kSpec, kCrit,
     "GPU requested without a limit: Limit must be set for non overcommitable resources"},
    {kQuotaExhausted, "quota-exhausted", kSpec, kCrit, "ResourceQuota on GPUs used up: pods are not created"},
    {kLimitrangeExceeded, "limitrange-exceeded", kSpec, kCrit,
     "a LimitRange forbids the GPU request or limit: pods are not created"},
    {kSelectorNoMatch, "selector-no-match", kScheduler, kCrit, "node selector / affinity matches no node"},
    {kGpuTaintNotTolerated, "gpu-taint-not-tolerated", kScheduler, kCrit, "GPU nodes' taint not tolerated"},
    {kGpuNodeUnavailable, "gpu-node-unavailable", kNode, kCrit, "GPU nodes cordoned or NotReady: no new pods"},
    {kGpuNodeCpuMemoryFull, "gpu-node-cpu-memory-full", kScheduler, kCrit, "GPU free but node CPU/memory full"},
    {kRollingUpdateSecondGpu, "rolling-update-second-gpu", kScheduler, kCrit, "rolling update needs a second GPU"},
    {kInsufficientGpu, "insufficient-gpu", kScheduler, kCrit, "not enough free GPUs (with their holders)"},
    {kDraClaimUnsatisfiable, "dra-claim-unsatisfiable", kScheduler, kCrit, "no device satisfies a DRA claim"},
    {kMigConfigFailed, "mig-config-failed", kNode, kCrit, "MIG configuration state failed"},
    {kMigConfigPending, "mig-config-pending", kNode, kWarn, "MIG configuration still pending/rebooting"},
    {kGpuRemediation, "gpu-remediation", kNode, kCrit,
     "a GPU is out of service for a fault (GpuResetRequired / GpuRebootRequired / GpuNeedsAttention)"},
    {kGpuValidationFailed, "gpu-validation-failed", kNode, kCrit, "kgpu validate failed on the node"},
    {kGpuResourceNameMismatch, "gpu-resource-name-mismatch", kSpec, kCrit,
     "pod asks a GPU resource name the nodes do not advertise (renameByDefault)"},
    {kGpuNotAdvertised, "gpu-not-advertised", kPlugin, kCrit, "node advertises no nvidia.com/gpu"},
    {kAdmissionSharedRequest, "admission-shared-request", kPlugin, kCrit,
     "UnexpectedAdmissionError: shared request > 1"},
    {kAdmissionPluginNotRegistered, "admission-plugin-not-registered", kPlugin, kCrit,
     "UnexpectedAdmissionError: plugin not re-registered after kubelet restart"},
    {kAdmissionDeviceError, "admission-device-error", kPlugin, kCrit,
     "UnexpectedAdmissionError: the device plugin's Allocate failed (lost or faulty GPU)"},
    {kAdmissionOutOfResource, "admission-out-of-resource", kScheduler, kCrit,
     "pod bound with nodeName rejected by the kubelet: OutOf<resource>"},
    {kToolkitInitError, "toolkit-init-error", kRuntime, kCrit, "nvidia-container-cli initialization error"},
    {kDriverVersionMismatch, "driver-version-mismatch", kDriver, kCrit, "NVML driver/library version mismatch"},
    {kDriverKernelCrashloop, "driver-kernel-crashloop", kDriver, kCrit, "driver pod CrashLoopBackOff (kernel)"},
    {kDriverSecureBoot, "driver-secure-boot", kDriver, kCrit, "Secure Boot rejects unsigned modules"},
    {kAppVisibleDevicesByHand, "app-visible-devices-by-hand", kApp, kCrit, "NVIDIA_VISIBLE_DEVICES set by hand"},
    {kAppCudaNewerThanDriver, "app-cuda-newer-than-driver", kApp, kCrit, "image CUDA newer than the driver"},
    {kAppNoGpuRequested, "app-no-gpu-requested", kApp, kWarn, "GPU image without a GPU request"},
    {kProbeKilledModelLoading, "probe-killed-model-loading", kApp, kCrit,
     "liveness/startup probe kills the model server while it loads weights"},
    {kSnapshotNoNodes, "snapshot-no-nodes", kCluster, kWarn, "snapshot has no nodes: scheduling not diagnosed"},
    {kChecklistGpuNodesTainted, "checklist-gpu-nodes-tainted", kCluster, kWarn, "GPU nodes tainted"},
    {kChecklistWorkloadsTolerate, "checklist-workloads-tolerate", kCluster, kWarn,
     "GPU workloads tolerate the GPU taint"},
    {kChecklistGpuQuota, "checklist-gpu-quota", kCluster, kWarn, "requests.nvidia.com/gpu quota per team namespace"},
    {kChecklistPriorityClasses, "checklist-priority-classes", kCluster, kWarn, "PriorityClasses for production vs dev"},
    {kChecklistPdbInference, "checklist-pdb-inference", kCluster, kWarn, "PDBs on inference Deployments"},
    {kChecklistGpuMetricsScraped, "checklist-gpu-metrics-scraped", kCluster, kWarn,
     "GPU metrics scraped by Prometheus"},
    {kChecklistGpuAlerts, "checklist-gpu-alerts", kCluster, kWarn, "alerts: temperature, memory, XID, idle"},
    {kChecklistImagePinned, "checklist-image-pinned", kCluster, kWarn, "images pinned"},
    {kChecklistOneDriverOwner, "checklist-one-driver-owner", kCluster, kCrit, "exactly one driver owner per node"},
    {kChecklistStartupProbe, "checklist-startup-probe", kCluster, kWarn, "startup probes on inference"},
    {kChecklistAutoscaleQueueDepth, "checklist-autoscale-queue-depth", kCluster, kWarn,
     "autoscaling on queue depth, not CPU"},
    {kChecklistCudaValidator, "checklist-cuda-validator", kCluster, kWarn,
     "nvidia-cuda-validator completed on every GPU node"},
}};

// Every RuleId has its entry, at its own index: a rule added to the enum without a catalog entry
// (or out of order) does not compile.
constexpr bool in_order() {
  for (size_t i = 0; i < kRules.size(); ++i) {
    if (static_cast<size_t>(kRules[i].rule) != i || kRules[i].id == nullptr || kRules[i].title == nullptr) return false;
  }
  return true;
}
static_assert(in_order(), "kRules must list every RuleId once, in enum order");

}  // namespace

std::span<const RuleInfo> rule_catalog() { return kRules; }

const RuleInfo& rule_info(RuleId id) { return kRules[static_cast<size_t>(id)]; }

const RuleInfo* find_rule(std::string_view id) {
  for (const auto& r : kRules) {
    if (id == r.id) return &r;
  }
  return nullptr;
}

Finding make_finding(RuleId id, std::string object) {
  Finding f;
  set_rule(f, id);
  f.object = std::move(object);
  return f;
}

void set_rule(Finding& f, RuleId id) {
  const RuleInfo& r = rule_info(id);
  f.rule = r.id;
  f.layer = r.layer;
  f.severity = r.severity;
}

}  // namespace kgpu::doctor
