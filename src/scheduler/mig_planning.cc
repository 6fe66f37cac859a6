#include "scheduler/mig_planning.h"

#include <fmt/format.h>

#include <map>

#include "apiclient/client.h"
#include "apiclient/events.h"
#include "common/log.h"
#include "gpu/mig_plan.h"

namespace kgpu::scheduler {

namespace {

std::string label_of(const nlohmann::json& node, const char* key) {
  const auto it = node.find("metadata");
  if (it == node.end() || !it->contains("labels")) return "";
  const auto& l = (*it)["labels"];
  return l.contains(key) && l[key].is_string() ? l[key].get<std::string>() : "";
}

}  // namespace

MigPlanning::MigPlanning(kube::Client& client, kube::EventRecorder* events, std::optional<gpu::mig::ConfigFile> file)
    : client_(client), events_(events), file_(std::move(file)) {}

std::vector<std::string> MigPlanning::round(const std::vector<kube::ObjectRef>& nodes,
                                            const std::vector<kube::ObjectRef>& pods) {
  std::vector<const nlohmann::json*> node_ptrs, pod_ptrs;
  std::map<std::string, const nlohmann::json*> by_name;
  for (const auto& n : nodes) {
    node_ptrs.push_back(n.get());
    by_name[(*n)["metadata"].value("name", "")] = n.get();
  }
  for (const auto& p : pods) pod_ptrs.push_back(p.get());
  const auto plan = gpu::mig::plan_cluster(node_ptrs, pod_ptrs, file_ ? &*file_ : nullptr);
  std::vector<std::string> out;
  for (const auto& c : plan.choices) {
    if (!c.change || c.config.empty() || c.served == 0 || c.evictions > 0) continue;
    const auto it = by_name.find(c.node);
    if (it == by_name.end()) continue;
    const std::string state = label_of(*it->second, "nvidia.com/mig.config.state");
    if (state == "pending") continue;
    if (state == "failed" && label_of(*it->second, "nvidia.com/mig.config") == c.config) continue;
    auto r = client_.patch(
        kube::resources::kNodes, "", c.node, kube::PatchType::kMerge,
        {{"metadata", {{"labels", {{"nvidia.com/mig.config", c.config}, {"nvidia.com/mig.config.state", nullptr}}}}}});
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
      t.uid = (*it->second)["metadata"].value("uid", "");
      events_->record(t, "Normal", "MigConfigPlanned", "Label",
                      fmt::format("nvidia.com/mig.config={} for {} pending MIG request(s): {}", c.config, c.served,
                                  c.why));
    }
  }
  return out;
}

}  // namespace kgpu::scheduler
