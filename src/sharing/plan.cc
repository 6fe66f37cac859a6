#include "sharing/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "gpu/mig.h"

namespace kgpu::sharing {

namespace {

constexpr size_t kMaxDeviceIdLength = 63;


bool mig_mode(const gpu::GpuInfo& g) { return g.mig_enabled.value_or(false); }

PlannedDevice whole_gpu(const gpu::GpuInfo& g) {
  PlannedDevice d;
  d.id = g.uuid;
  d.uuid = g.uuid;
  d.index = std::to_string(g.index);
  d.gpu_index = g.index;
  d.gpu_uuid = g.uuid;
  d.minor = g.minor_number;
  if (g.numa_node) d.numa_node = static_cast<int>(*g.numa_node);
  return d;
}

PlannedDevice mig_device(const gpu::GpuInfo& g, const gpu::MigDevice& m) {
  PlannedDevice d = whole_gpu(g);
  d.id = m.uuid;
  d.uuid = m.uuid;
  d.index = fmt::format("{}:{}", g.index, m.index);
  d.mig_gi = m.gpu_instance_id;
  d.mig_ci = m.compute_instance_id;
  return d;
}

bool selected(const DeviceSelector& sel, const PlannedDevice& d, size_t position) {
  if (sel.all) return true;
  if (sel.count) return static_cast<int>(position) < *sel.count;
  for (const auto& id : sel.ids) {
    if (id == d.index || id == d.uuid || id == d.gpu_uuid || id == std::to_string(d.gpu_index)) return true;
  }
  return false;
}

bool matches_any(const std::string& id, const std::vector<PlannedDevice>& devices) {
  return std::any_of(devices.begin(), devices.end(), [&](const PlannedDevice& d) {
    return id == d.index || id == d.uuid || id == d.gpu_uuid || id == std::to_string(d.gpu_index);
  });
}

}  // namespace

const PlannedDevice* PlannedResource::find(const std::string& id) const {
  for (const auto& d : devices) {
    if (d.id == id) return &d;
  }
  return nullptr;
}

const PlannedResource* Plan::find(const std::string& name) const {
  for (const auto& r : resources) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string socket_name_for(const std::string& resource) {
  const auto slash = resource.find('/');
  return "nvidia-" + (slash == std::string::npos ? resource : resource.substr(slash + 1)) + ".sock";
}

std::string strip_replica(const std::string& id) {
  const auto sep = id.find("::");
  return sep == std::string::npos ? id : id.substr(0, sep);
}

bool same_advertisement(const PlannedResource& a, const PlannedResource& b) {
  if (a.name != b.name || a.sharing != b.sharing || a.devices.size() != b.devices.size() ||
      a.fail_requests_greater_than_one != b.fail_requests_greater_than_one) {
    return false;
  }
  for (size_t i = 0; i < a.devices.size(); ++i) {
    if (a.devices[i].id != b.devices[i].id || a.devices[i].numa_node != b.devices[i].numa_node) return false;
  }
  return true;
}

std::optional<std::string> single_layout_problem(const gpu::Inventory& inv, const Config& config) {
  if (config.mig_strategy != MigStrategy::kSingle) return std::nullopt;
  std::vector<const gpu::GpuInfo*> gpus;
  for (const auto& g : inv.gpus) {
    if (!g.uuid.empty()) gpus.push_back(&g);
  }
  if (std::none_of(gpus.begin(), gpus.end(), [](const gpu::GpuInfo* g) { return mig_mode(*g); })) return std::nullopt;
  std::set<std::string> profiles;
  for (const auto* g : gpus) {
    if (!mig_mode(*g)) {
      return fmt::format("migStrategy single needs every GPU in MIG mode with one profile, but GPU {} ({}) has MIG "
                         "disabled",
                         g->index, g->uuid);
    }
    for (const auto& m : g->mig_devices) profiles.insert(m.profile);
  }
  if (profiles.size() > 1) {
    std::vector<std::string> list(profiles.begin(), profiles.end());
    return fmt::format("migStrategy single needs one MIG profile on every GPU, found {}", fmt::join(list, ", "));
  }
  return std::nullopt;
}

Result<Plan> make_plan(const gpu::Inventory& inv, const Config& config) {
  Plan plan;
  std::map<std::string, std::vector<PlannedDevice>> base;  // resource name -> devices (exclusive)
  std::map<std::string, bool> is_mig;

  std::vector<const gpu::GpuInfo*> gpus;
  for (const auto& g : inv.gpus) {
    if (g.uuid.empty()) {
      plan.warnings.push_back(fmt::format("GPU {}: not advertised: its UUID could not be read ({})", g.index,
                                          g.error.value_or("unknown error")));
      continue;
    }
    gpus.push_back(&g);
  }

  const bool any_mig = std::any_of(gpus.begin(), gpus.end(), [](const gpu::GpuInfo* g) { return mig_mode(*g); });
  MigStrategy strategy = config.mig_strategy;
  if (strategy == MigStrategy::kSingle && any_mig) {
    if (auto problem = single_layout_problem(inv, config)) {
      return fail(ErrorCode::kInvalidArgument, "{}: {}; use migStrategy mixed", config.source, *problem);
    }
    for (const auto* g : gpus) {
      if (g->mig_devices.empty()) {
        plan.warnings.push_back(fmt::format("GPU {}: MIG enabled but no MIG devices are configured", g->index));
      }
      for (const auto& m : g->mig_devices) base["nvidia.com/gpu"].push_back(mig_device(*g, m));
    }
    is_mig["nvidia.com/gpu"] = true;
  } else {
    for (const auto* g : gpus) {
      if (strategy == MigStrategy::kMixed && mig_mode(*g)) {
        if (g->mig_devices.empty()) {
          plan.warnings.push_back(fmt::format("GPU {}: MIG enabled but no MIG devices are configured", g->index));
        }
        for (const auto& m : g->mig_devices) {
          const std::string name = "nvidia.com/mig-" + gpu::mig::resource_profile(m.profile);
          base[name].push_back(mig_device(*g, m));
          is_mig[name] = true;
        }
        continue;
      }
      if (mig_mode(*g)) {
        plan.warnings.push_back(fmt::format(
            "GPU {}: MIG is enabled but migStrategy is {}: the whole GPU is advertised and containers will not be able "
            "to use it; set migStrategy single or mixed",
            g->index, mig_strategy_name(strategy)));
      }
      base["nvidia.com/gpu"].push_back(whole_gpu(*g));
    }
  }

  // Sharing rules move the devices they select into replicated resources.
  struct Target {
    std::vector<PlannedDevice> devices;
    bool replicated = false;
  };
  std::map<std::string, Target> out;
  std::map<std::string, std::string> taken_by;  // physical uuid -> rule position, for overlap errors
  std::map<std::string, std::vector<PlannedDevice>> remaining = base;
  const Sharing& sh = config.sharing;
  std::map<std::string, std::vector<MpsLimit>> mps;
  size_t advertised = 0;  // replicated device IDs so far
  for (const auto& rr : sh.resources) {
    const std::string where = fmt::format("{}:{}", config.source, rr.line);
    auto it = base.find(rr.name);
    if (it == base.end()) {
      plan.warnings.push_back(fmt::format("{}: sharing rule for {}: this node has no such resource (migStrategy {}); "
                                          "rule ignored",
                                          where, rr.name, mig_strategy_name(config.mig_strategy)));
      continue;
    }
    if (sh.kind == SharingKind::kMps && is_mig[rr.name]) {
      return fail(ErrorCode::kInvalidArgument,
                  "{}: sharing.mps: {} is made of MIG devices here (migStrategy single); MPS cannot be used with MIG",
                  where, rr.name);
    }
    for (const auto& id : rr.devices.ids) {
      if (!matches_any(id, it->second)) {
        plan.warnings.push_back(fmt::format("{}: {}: devices entry '{}' matches no device on this node", where,
                                            rr.name, id));
      }
    }
    size_t chosen = 0;
    for (size_t pos = 0; pos < it->second.size(); ++pos) chosen += selected(rr.devices, it->second[pos], pos) ? 1 : 0;
    advertised += chosen * static_cast<size_t>(rr.replicas);
    if (advertised > kMaxAdvertisedDevices) {
      return fail(ErrorCode::kInvalidArgument,
                  "{}: {}: {} replicas of {} devices make more than {} device IDs on this node (the kubelet's "
                  "ListAndWatch message would not fit): lower replicas",
                  where, rr.name, rr.replicas, chosen, kMaxAdvertisedDevices);
    }
    const std::string target = !rr.rename.empty()   ? rr.rename
                               : sh.rename_by_default ? rr.name + ".shared"
                                                      : rr.name;
    auto& rest = remaining[rr.name];
    for (size_t pos = 0; pos < it->second.size(); ++pos) {
      const PlannedDevice& d = it->second[pos];
      if (!selected(rr.devices, d, pos)) continue;
      const std::string rule = fmt::format("{} ({})", where, rr.name);
      if (auto [prev, inserted] = taken_by.emplace(d.uuid, rule); !inserted) {
        return fail(ErrorCode::kInvalidArgument, "{}: device {} (GPU {}) is already shared by the rule at {}", where,
                    d.index, d.uuid, prev->second);
      }
      rest.erase(std::remove_if(rest.begin(), rest.end(), [&](const PlannedDevice& x) { return x.uuid == d.uuid; }),
                 rest.end());
      for (int n = 0; n < rr.replicas; ++n) {
        PlannedDevice r = d;
        r.id = fmt::format("{}::{}", d.id, n);
        r.replica = n;
        r.replicas = rr.replicas;
        out[target].devices.push_back(std::move(r));
      }
      out[target].replicated = true;
      is_mig[target] = is_mig[rr.name];
      if (sh.kind == SharingKind::kMps) {
        const auto* g = &*std::find_if(inv.gpus.begin(), inv.gpus.end(),
                                       [&](const gpu::GpuInfo& x) { return x.index == d.gpu_index; });
        MpsLimit l;
        l.gpu_index = d.gpu_index;
        l.uuid = d.uuid;
        l.pinned_memory_mib = g->memory_total_mib.value_or(0) / static_cast<uint64_t>(rr.replicas);
        l.active_thread_percentage = 100 / rr.replicas;
        mps[target].push_back(l);
      }
    }
  }
  for (auto& [name, devices] : remaining) {
    auto& t = out[name];
    t.devices.insert(t.devices.end(), devices.begin(), devices.end());
  }

  std::set<std::string> sockets;
  auto valid_socket = [](const std::string& name) {
    return name.size() <= 100 && name.find('/') == std::string::npos && name != "kubelet.sock";
  };
  for (auto& [name, t] : out) {
    if (t.devices.empty()) continue;
    std::sort(t.devices.begin(), t.devices.end(), [](const PlannedDevice& a, const PlannedDevice& b) {
      if (a.gpu_index != b.gpu_index) return a.gpu_index < b.gpu_index;
      if (a.index != b.index) return a.index < b.index;
      return a.replica < b.replica;
    });
    PlannedResource r;
    r.name = name;
    r.socket_name = socket_name_for(name);
    r.mig = is_mig[name];
    r.devices = std::move(t.devices);
    if (t.replicated) {
      r.sharing = sh.kind;
      r.fail_requests_greater_than_one = sh.fail_requests_greater_than_one;
      r.mps = std::move(mps[name]);
      if (std::any_of(r.devices.begin(), r.devices.end(), [](const PlannedDevice& d) { return d.replica < 0; })) {
        plan.warnings.push_back(fmt::format(
            "{}: some devices are shared and some are not (a `devices` selection without `rename`); a request "
            "may get either",
            name));
      }
    }
    for (const auto& d : r.devices) {
      if (d.id.size() > kMaxDeviceIdLength) {
        return fail(ErrorCode::kInvalidArgument, "{}: device ID '{}' is longer than the kubelet's {} characters",
                    name, d.id, kMaxDeviceIdLength);
      }
    }
    if (!valid_socket(r.socket_name)) {
      return fail(ErrorCode::kInvalidArgument, "{}: resource {} cannot be served: socket name '{}' is not usable",
                  config.source, name, r.socket_name);
    }
    if (!sockets.insert(r.socket_name).second) {
      return fail(ErrorCode::kInvalidArgument, "{}: two resources would use the socket {}", config.source,
                  r.socket_name);
    }
    plan.resources.push_back(std::move(r));
  }
  return plan;
}

}  // namespace kgpu::sharing
