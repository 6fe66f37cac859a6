// The device-plugin manager with API access: Allocate honours the scheduler's assignment, the
// allocation table and its checkpoint, and the node report (docs/scheduler.md, "The node honours
// the choice").
#include <fmt/format.h>

#include "agent/device_choice.h"
#include "agent/plugin_manager.h"
#include "agent/plugin_manager_internal.h"
#include "common/log.h"
#include "common/timestamp.h"

namespace kgpu::agent {

namespace {

// Physical GPU UUIDs of device IDs, in order, without repeats (replicas of one GPU name it once).
std::vector<std::string> gpu_uuids(const sharing::PlannedResource& r, const std::vector<std::string>& ids) {
  std::vector<std::string> out;
  for (const auto& id : ids) {
    const auto* d = r.find(id);
    const std::string uuid = d != nullptr ? d->gpu_uuid : sharing::strip_replica(id);
    if (std::ranges::find(out, uuid) == out.end()) out.push_back(uuid);
  }
  return out;
}

}  // namespace

std::string DevicePluginManager::checkpoint_path() const { return opt_.plugin_dir + "/" + kAllocationCheckpointName; }

void DevicePluginManager::load_table() {
  auto loaded = AllocationTable::load(checkpoint_path());
  std::lock_guard lock(table_mu_);
  if (!loaded) {
    // A damaged checkpoint must not stop the node: start empty (PodResources still shows what the
    // kubelet allocated, by its own IDs) and say so.
    log::error("allocation checkpoint ignored: " + loaded.error().message, {log::kv("file", checkpoint_path())});
    table_ = {};
    return;
  }
  table_ = std::move(*loaded);
  if (!table_.entries().empty()) {
    log::info(fmt::format("allocation checkpoint: {} containers", table_.entries().size()),
              {log::kv("file", checkpoint_path())});
  }
}

Result<std::vector<kubelet::ContainerAllocation>> DevicePluginManager::allocate_assigned(
    const std::string& name, const std::vector<std::vector<std::string>>& requests) {
  std::lock_guard serial(assign_mu_);
  sharing::Plan plan;
  sharing::Config config;
  sharing::HostFacts host;
  gpu::Inventory inventory;
  std::map<std::string, bool> health;
  {
    std::lock_guard lock(mu_);
    plan = plan_;
    config = config_;
    host = host_;
    inventory = inventory_;
    health = health_.healthy_map();
  }
  auto refuse = [&](const Error& e) {
    std::lock_guard lock(mu_);
    ++allocation_errors_;
    log::warn("Allocate refused: " + e.message, {log::kv("resource", name)});
    return std::unexpected(e);
  };
  const auto* res = plan.find(name);
  if (res == nullptr) return refuse(Error{ErrorCode::kUnavailable, name + " is no longer advertised by this node"});
  const HealthyFn healthy = [&](const std::string& uuid) {
    auto it = health.find(uuid);
    return it == health.end() || it->second;
  };
  Served served;
  std::vector<AllocationTable::Holding> holdings;  // plus what this call gives, as it goes
  {
    std::lock_guard lock(table_mu_);
    served = table_.served();
    holdings = table_.holdings(listed_);
  }
  served.insert(refused_.begin(), refused_.end());
  std::vector<PodInfo> pods;
  for (const auto& p : opt_.cluster->cached_pods()) pods.push_back(pod_info(p));
  bool listed_fresh = false;

  std::vector<AllocationEntry> entries;
  std::vector<kubelet::ContainerAllocation> out;
  const std::string now = format_rfc3339(clock_.system_now(), 6);
  for (const auto& kubelet_ids : requests) {
    const auto n = static_cast<int64_t>(kubelet_ids.size());
    auto candidate = choose_candidate(pods, name, n, served);
    if (!candidate && !listed_fresh) {
      // The informer may not have seen the bind yet: ask once.
      listed_fresh = true;
      if (auto fresh = opt_.cluster->list_pods()) {
        pods.clear();
        for (const auto& p : *fresh) pods.push_back(pod_info(p));
        candidate = choose_candidate(pods, name, n, served);
      } else {
        log::warn("Allocate: " + fresh.error().message + "; treating the container as unassigned",
                  {log::kv("resource", name)});
      }
    }
    AllocationEntry e;
    e.resource = name;
    e.kubelet_ids = kubelet_ids;
    e.allocated_at = now;
    Result<std::vector<std::string>> ids;
    if (candidate) {
      const PodInfo& pod = *candidate->pod;
      ids = assigned_devices(plan, *res, pod, *candidate->container, n, healthy, in_use(holdings, &pod));
      e.uid = pod.uid;
      e.ns = pod.ns;
      e.pod = pod.name;
      e.container = candidate->container->name;
      e.assigned = true;
      served.emplace(pod.uid, e.container);
    } else {
      InUse used = in_use(holdings);
      reserve_assigned(*res, pods, served, used);
      ids = unassigned_devices(*res, kubelet_ids, inventory.topology, config.shared_policy, healthy, used);
    }
    if (!ids) {
      if (e.assigned) {
        if (refused_.size() >= kMaxCheckpointEntries) refused_.clear();  // a bound, not a history
        refused_.emplace(e.uid, e.container);
      }
      return refuse(ids.error());
    }
    // An assigned container's k replicas are all on the GPU the scheduler chose (its MPS limits
    // below are k/R of it): NVIDIA's one-replica rule does not apply to it.
    auto edits = sharing::allocate(*res, config, host, {*ids}, fmt::format("{:x}", ++unique_), e.assigned);
    if (!edits) return refuse(edits.error());
    if (res->sharing == sharing::SharingKind::kMps && !ids->empty()) {
      // Enforced by the MPS server: this container's share of the GPU, not the per-replica default.
      const auto* d = res->find(ids->front());
      uint64_t memory = 0;
      for (const auto& g : inventory.gpus) {
        if (d != nullptr && g.uuid == d->gpu_uuid) memory = g.memory_total_mib.value_or(0);
      }
      if (d != nullptr && memory > 0) {
        for (auto& [k, v] : mps_client_limits(static_cast<int>(n), d->replicas, memory)) edits->front().envs[k] = v;
      }
    }
    const std::string who = e.pod.empty() ? "an unassigned container" : fmt::format("{}/{} {}", e.ns, e.pod, e.container);
    holdings.push_back({e.uid, e.ns, e.pod, e.container, e.resource, *ids});
    e.actual_ids = std::move(*ids);
    if (e.actual_ids != e.kubelet_ids) {
      log::info(fmt::format("Allocate: {} gets {} (the kubelet passed {})", who, fmt::join(e.actual_ids, ","),
                            fmt::join(e.kubelet_ids, ",")),
                {log::kv("resource", name)});
    }
    auto converted = detail::to_kubelet(*edits);
    out.insert(out.end(), converted.begin(), converted.end());
    entries.push_back(std::move(e));
  }
  {
    std::lock_guard lock(table_mu_);
    for (const auto& e : entries) table_.add(e);
    if (auto ok = table_.save(checkpoint_path()); !ok) log::error("allocation checkpoint: " + ok.error().message);
  }
  {
    std::lock_guard lock(mu_);
    ++allocations_;
  }
  // Record what the assigned containers got (a failed patch is logged: the table still knows).
  for (const auto& e : entries) {
    if (!e.assigned) continue;
    const PodInfo* pod = nullptr;
    for (const auto& p : pods) {
      if (p.uid == e.uid) pod = &p;
    }
    // The informer's copy may not show what an earlier Allocate of this pod patched yet: the table
    // (this call's entries included) is the full record, so a patch never drops a container.
    k8s::Assignment allocated = pod != nullptr ? pod->allocated : k8s::Assignment{};
    {
      std::lock_guard lock(table_mu_);
      for (const auto& other : table_.entries()) {
        if (other.uid == e.uid && other.resource == e.resource &&
            k8s::find_container(allocated, other.container) == nullptr) {
          allocated.push_back({other.container, gpu_uuids(*res, other.actual_ids)});
        }
      }
    }
    if (auto ok = opt_.cluster->annotate_pod(e.ns, e.pod, k8s::kAnnotationGpuAllocated, k8s::format_assignment(allocated));
        !ok) {
      log::warn(ok.error().message, {log::kv("resource", name)});
    }
  }
  request_report();
  return out;
}

void DevicePluginManager::request_report() {
  {
    std::lock_guard lock(stop_mu_);
    report_requested_ = true;
  }
  stop_cv_.notify_all();
}

void DevicePluginManager::report_loop() {
  while (true) {
    {
      std::unique_lock lock(stop_mu_);
      clock_.wait_for(stop_cv_, lock, opt_.report_interval, [&] { return stopping_ || report_requested_; });
      if (stopping_) return;
      report_requested_ = false;
    }
    refresh_allocations();
  }
}

void DevicePluginManager::refresh_allocations() {
  std::optional<std::vector<kubelet::ContainerDevice>> listed;
  if (pod_resources_) {
    auto l = pod_resources_->list(opt_.pod_resources_timeout);
    if (l) {
      listed = std::move(*l);
    } else {
      log::debug("allocation table: " + l.error().message);
    }
  }
  std::vector<AllocationTable::Holding> holdings;
  {
    std::lock_guard lock(table_mu_);
    if (listed) {
      listed_ = *listed;
      if (table_.reconcile(listed_, clock_.system_now(), opt_.allocation_grace)) {
        if (auto ok = table_.save(checkpoint_path()); !ok) log::error("allocation checkpoint: " + ok.error().message);
      }
    }
    holdings = table_.holdings(listed_);
  }
  k8s::NodeGpuReport report;
  {
    std::lock_guard lock(mu_);
    const HealthyFn healthy = [&](const std::string& uuid) { return health_.healthy(uuid); };
    report = node_report(inventory_, plan_, healthy, holdings, "");
  }
  const std::string key = k8s::format_node_report(report);
  if (key == last_report_) return;
  report.observed_at = format_rfc3339(clock_.system_now(), 6);
  if (auto ok = opt_.cluster->annotate_node(k8s::kAnnotationNodeGpus, k8s::format_node_report(report)); !ok) {
    log::warn(ok.error().message);
    return;  // tried again at the next round
  }
  last_report_ = key;
}

std::vector<kubelet::ContainerDevice> DevicePluginManager::translate_devices(
    const std::vector<kubelet::ContainerDevice>& listed) const {
  if (opt_.cluster == nullptr) return listed;
  std::lock_guard lock(table_mu_);
  return table_.translate(listed);
}

}  // namespace kgpu::agent
