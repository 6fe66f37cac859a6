// The node agent's view of the API server: the pods bound to this node, the node's labels (for the
// per-node config choice) and the two writes the assignment contract asks of the agent (a pod's
// `kgpu.io/gpu-allocated`, the node's `kgpu.io/gpus`).
//
// An interface so that the device-plugin manager does not depend on how the pods are read; the
// production implementation (make_kube_cluster_view) keeps a pod informer with fieldSelector
// spec.nodeName=<node>, optionally a node informer with metadata.name=<node>, and sends merge
// patches.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace kgpu::kube {
class Client;
}

namespace kgpu::agent {

class ClusterView {
 public:
  virtual ~ClusterView() = default;
  // The node this agent runs on.
  virtual const std::string& node_name() const = 0;
  // The pods on this node as the informer has them now (it may lag a bind).
  virtual std::vector<nlohmann::json> cached_pods() const = 0;
  // One fresh LIST with the same field selector. Errors name the API call.
  virtual Result<std::vector<nlohmann::json>> list_pods() = 0;
  // Merge-patches one annotation of a pod / of this node.
  virtual Result<void> annotate_pod(const std::string& ns, const std::string& name, const std::string& key,
                                    const std::string& value) = 0;
  virtual Result<void> annotate_node(const std::string& key, const std::string& value) = 0;
  // This node's labels as the node informer has them now; nullopt while the node is not known
  // (no node informer, not synced yet, or no such Node).
  virtual std::optional<std::map<std::string, std::string>> node_labels() const { return std::nullopt; }
};

// Starts a pod informer for `node_name` on `client`, and with `watch_node` a node informer for the
// node's labels (waiting up to `sync_timeout` for their first lists; a view that is not synced yet
// still answers list_pods()). The view owns the client.
std::unique_ptr<ClusterView> make_kube_cluster_view(std::unique_ptr<kube::Client> client, std::string node_name,
                                                    std::chrono::milliseconds sync_timeout, bool watch_node = false);

}  // namespace kgpu::agent
