// `kgpu doctor`'s rules: for each GPU pod that is Pending, failing or not seeing its GPU, walk the
// layers outside in (spec > scheduler > node > plugin > runtime > driver > app) and report the
// first broken one; per GPU node, the node, plugin and driver state; per cluster (or namespace),
// the guide's production-readiness checklist. Every rule is listed in rule_catalog() (catalog.h)
// and in docs/doctor.md.
//
// Fit questions go to the scheduler's filter plugins through sched/k8s_adapter: a Pending pod's
// "0/N nodes are available: ..." is recomputed over the snapshot, node by node, then explained.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "doctor/catalog.h"
#include "doctor/findings.h"
#include "doctor/snapshot.h"

namespace kgpu::doctor {

struct Target {
  enum class Kind { kCluster, kNamespace, kPod, kNode };
  Kind kind = Kind::kCluster;
  std::string ns, name;  // kNamespace: ns; kPod: ns + name; kNode: name
};

struct Options {
  Target target;
  // The readiness checklist: the whole list for a cluster target, the namespaced items for a
  // namespace target; never for a pod or node target.
  bool checklist = true;
  // A GPU holder running this long is reported as a likely idle holder (notebooks, long Jobs).
  int64_t idle_after_s = 24 * 3600;
};

// Findings, sorted (sort_findings). Fails with kNotFound when the target pod, node or namespace
// is not in the snapshot.
Result<std::vector<Finding>> diagnose(const Snapshot& snapshot, const Options& options);

}  // namespace kgpu::doctor
