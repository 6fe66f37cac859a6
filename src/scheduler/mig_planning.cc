#include "scheduler/mig_planning.h"

#include <fmt/format.h>

#include <map>

#include "apiclient/client.h"
#include "apiclient/events.h"
#include "common/log.h"
#include "gpu/mig_plan.h"
#include "k8s/api/json.h"

namespace kgpu::scheduler {


kube::ApiResult<nlohmann::json> ask_mig_config(kube::Client& client, const std::string& node, const std::string& config) {
  return client.patch(
      kube::resources::kNodes, "", node, kube::PatchType::kMerge,
      {{"metadata", {{"labels", {{"nvidia.com/mig.config", config}, {"nvidia.com/mig.config.state", nullptr}}}}}});
}

MigPlanning::MigPlanning(kube::Client& client, kube::EventRecorder* events, std::optional<gpu::mig::ConfigFile> file)
    : client_(client), events_(events), file_(std::move(file)) {}

std::vector<std::string> MigPlanning::round(const std::vector<kube::ObjectRef>& nodes,
                                            const std::vector<kube::ObjectRef>& pods) {
  std::vector<const nlohmann::json*> node_ptrs, pod_ptrs;
  std::map<std::string, const nlohmann::json*> by_name;
  for (const auto& n : nodes) {
    node_ptrs.push_back(n.get());
    by_name[k8s::api::text(*n, {"metadata", "name"})] = n.get();
  }
  for (const auto& p : pods) pod_ptrs.push_back(p.get());
  const auto plan = gpu::mig::plan_cluster(node_ptrs, pod_ptrs, file_ ? &*file_ : nullptr);
  std::vector<std::string> out;
  for (const auto& c : plan.choices) {
    if (!c.change || c.config.empty() || c.served == 0 || c.evictions > 0) continue;
    const auto it = by_name.find(c.node);
    if (it == by_name.end()) continue;
    // Asked already: the label names the config, whatever the state (none yet: the MIG manager
    // has not taken it up; pending; failed: it just failed here).
    if (k8s::api::text(*it->second, {"metadata", "labels", "nvidia.com/mig.config"}) == c.config) continue;
    if (k8s::api::text(*it->second, {"metadata", "labels", "nvidia.com/mig.config.state"}) == "pending") continue;
    auto r = ask_mig_config(client_, c.node, c.config);
    if (!r) {
      ++failures_;
      log::warn("MIG planning: labelling the node failed",
                {log::kv("node", c.node), log::kv("config", c.config), log::kv("error", r.error().text())});
      continue;
    }
    ++labelled_;
    out.push_back(c.node);
    log::info("MIG planning: node labelled", {log::kv("node", c.node), log::kv("config", c.config), log::kv("why", c.why)});
    if (events_ != nullptr) {
      kube::EventTarget t;
      t.kind = "Node";
      t.name = c.node;
      t.uid = k8s::api::text(*it->second, {"metadata", "uid"});
      events_->record(t, "Normal", "MigConfigPlanned", "Label",
                      fmt::format("nvidia.com/mig.config={} for {} pending MIG request(s): {}", c.config, c.served,
                                  c.why));
    }
  }
  return out;
}

}  // namespace kgpu::scheduler
