// On SIGTERM/SIGINT: is the agent being uninstalled (its node labels should go) or restarted,
// upgraded or moved (they should stay)? Decided from the API: the agent's Pod, its controller
// ownerReference, and that DaemonSet.
//
// An uninstall: the pod has no controller owner (nothing starts it again); the owner DaemonSet is
// gone (404), has a deletionTimestamp, or is another object than the owner (a different uid).
// Also an uninstall: reading the pod or the DaemonSet is refused (401, 403) although it was allowed
// when the agent started (`access_was_allowed`): its ServiceAccount or RBAC was deleted, which is
// what `helm uninstall` does right after deleting the DaemonSet, before the pod gets SIGTERM.
// Anything else keeps the labels: a DaemonSet that is there (a restart, a rolling upgrade), an
// owner of another kind, the pod not found, a refusal that was there from the start (RBAC without
// the rule), or no answer (the API unreachable, slow): a stale label is less harmful than labels
// lost on every restart.
//
// Thread safety: the functions may run on any thread; they only use `client`, whose requests the
// caller bounds (RestConfig::timeout, ClientOptions::max_retries) to fit the shutdown grace.
#pragma once

#include <string>

namespace kgpu::kube {
class Client;
}

namespace kgpu::agent {

struct UninstallVerdict {
  bool uninstall = false;
  std::string reason;  // for the log: what was found, or why the labels are kept
};

UninstallVerdict uninstall_verdict(kube::Client& client, const std::string& ns, const std::string& pod,
                                   bool access_was_allowed = false);

// Whether the agent may read its pod and that pod's controller DaemonSet now (both answered 200):
// asked at start, so that a refusal at shutdown can be told from RBAC that never allowed it.
bool owner_readable(kube::Client& client, const std::string& ns, const std::string& pod);

// Removes one annotation of node `node` (a merge patch with null). Errors are logged, not returned.
void remove_node_annotation(kube::Client& client, const std::string& node, const std::string& key);

}  // namespace kgpu::agent
