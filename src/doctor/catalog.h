// The catalog of every rule kgpu doctor reports: stable id, layer, severity and title. A finding is
// made from its RuleId only (make_finding, set_rule), so its id, layer and severity are always the
// catalog's; docs/doctor.md lists the same rules (doctor_test checks both).
//
// Threads: the catalog is immutable; every function here is safe to call concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "doctor/findings.h"

namespace kgpu::doctor {

// In catalog order (rule_catalog()[static_cast<size_t>(id)] is the rule's entry).
enum class RuleId : uint8_t {
  // spec: what the API server rejects
  kInvalidQuantity,
  kGpuRequestFractional,
  kGpuRequestLimitMismatch,
  kGpuLimitMissing,
  kQuotaExhausted,
  kLimitrangeExceeded,
  // scheduler
  kSelectorNoMatch,
  kGpuTaintNotTolerated,
  kGpuNodeUnavailable,
  kGpuNodeCpuMemoryFull,
  kRollingUpdateSecondGpu,
  kInsufficientGpu,
  kDraClaimUnsatisfiable,
  // node
  kMigConfigFailed,
  kMigConfigPending,
  kGpuRemediation,
  kGpuValidationFailed,
  // spec / plugin: resource names and registration
  kGpuResourceNameMismatch,
  kGpuNotAdvertised,
  // kubelet admission
  kAdmissionSharedRequest,
  kAdmissionPluginNotRegistered,
  kAdmissionDeviceError,
  kAdmissionOutOfResource,
  // runtime, driver
  kToolkitInitError,
  kDriverVersionMismatch,
  kDriverKernelCrashloop,
  kDriverSecureBoot,
  // app
  kAppVisibleDevicesByHand,
  kAppCudaNewerThanDriver,
  kAppNoGpuRequested,
  kProbeKilledModelLoading,
  // cluster
  kSnapshotNoNodes,
  kChecklistGpuNodesTainted,
  kChecklistWorkloadsTolerate,
  kChecklistGpuQuota,
  kChecklistPriorityClasses,
  kChecklistPdbInference,
  kChecklistGpuMetricsScraped,
  kChecklistGpuAlerts,
  kChecklistImagePinned,
  kChecklistOneDriverOwner,
  kChecklistStartupProbe,
  kChecklistAutoscaleQueueDepth,
  kChecklistCudaValidator,
  kCount
};

struct RuleInfo {
  RuleId rule;
  const char* id;  // stable, e.g. "insufficient-gpu"
  Layer layer;
  Severity severity;
  const char* title;
};

// Every rule, in RuleId order.
std::span<const RuleInfo> rule_catalog();
const RuleInfo& rule_info(RuleId id);
// The rule with this id string, or nullptr.
const RuleInfo* find_rule(std::string_view id);

// A finding of rule `id` about `object`, with the catalog's id, layer and severity.
Finding make_finding(RuleId id, std::string object = {});
// Makes `f` a finding of rule `id` (for rules that gather evidence before they know which rule
// it supports): sets its id, layer and severity from the catalog.
void set_rule(Finding& f, RuleId id);

}  // namespace kgpu::doctor
