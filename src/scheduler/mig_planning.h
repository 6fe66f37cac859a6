// The scheduler's MIG planning mode (`kgpu scheduler --mig-plan-interval-ms N`, docs/mig.md
// "Planning without a person"): every interval the leader plans the cluster's MIG nodes as
// `kgpu mig plan` does (gpu/mig_plan.h plan_cluster, over the scheduler's informers) and writes
// `nvidia.com/mig.config` itself; the MIG manager on the node does the rest.
//
// Unlike `kgpu mig plan --apply` (a person's decision), a round labels a node only when:
//   - the chosen config differs from the node's current one,
//   - it serves at least one pending request,
//   - it evicts no running pod,
//   - no change is under way there (nvidia.com/mig.config.state is not pending), and
//   - the node is not asked for that config already (nvidia.com/mig.config names it: the MIG
//     manager has not taken it up yet, applied it, or it just failed there).
// Each label written is a Normal Event MigConfigPlanned on the Node with the planner's reason.
//
// Thread safety: round() from one thread at a time; labelled() from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apiclient/client.h"
#include "apiclient/informer.h"
#include "gpu/mig_config.h"

namespace kgpu::kube {
class Client;
class EventRecorder;
}  // namespace kgpu::kube

namespace kgpu::scheduler {

// Labels `node` nvidia.com/mig.config=`config` and clears its state label for the MIG manager's
// outcome (NVIDIA's contract).
kube::ApiResult<nlohmann::json> ask_mig_config(kube::Client& client, const std::string& node, const std::string& config);

class MigPlanning {
 public:
  // `client` and `events` (may be null) are not owned and must outlive this. `file` null: NVIDIA's
  // default config names per GPU memory class.
  MigPlanning(kube::Client& client, kube::EventRecorder* events, std::optional<gpu::mig::ConfigFile> file);

  // One round over the nodes and pods now known; returns the nodes labelled.
  std::vector<std::string> round(const std::vector<kube::ObjectRef>& nodes, const std::vector<kube::ObjectRef>& pods);

  uint64_t labelled() const { return labelled_.load(); }
  uint64_t failures() const { return failures_.load(); }

 private:
  kube::Client& client_;
  kube::EventRecorder* events_;
  std::optional<gpu::mig::ConfigFile> file_;
  std::atomic<uint64_t> labelled_{0}, failures_{0};
};

}  // namespace kgpu::scheduler
