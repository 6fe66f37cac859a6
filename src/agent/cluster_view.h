// The node agent's view of the API server: the pods bound to this node and the two writes the
// assignment contract asks of the agent (a pod's `kgpu.io/gpu-allocated`, the node's `kgpu.io/gpus`).
//
// An interface so that the device-plugin manager does not depend on how the pods are read; the
// production implementation (make_kube_cluster_view) keeps a pod informer with fieldSelector
// spec.nodeName=<node> and sends merge patches.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
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
};

// Starts a pod informer for `node_name` on `client` (waiting up to `sync_timeout` for its first
// list; a view that is not synced yet still answers list_pods()). The view owns the client.
std::unique_ptr<ClusterView> make_kube_cluster_view(std::unique_ptr<kube::Client> client, std::string node_name,
                                                    std::chrono::milliseconds sync_timeout);

}  // namespace kgpu::agent
