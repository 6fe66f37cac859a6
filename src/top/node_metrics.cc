#include "top/node_metrics.h"

#include <set>

namespace kgpu::top {

namespace {

constexpr std::string_view kUtil = "DCGM_FI_DEV_GPU_UTIL";
constexpr std::string_view kFbUsed = "DCGM_FI_DEV_FB_USED";
constexpr std::string_view kFbFree = "DCGM_FI_DEV_FB_FREE";
constexpr std::string_view kFbReserved = "DCGM_FI_DEV_FB_RESERVED";
constexpr std::string_view kTemp = "DCGM_FI_DEV_GPU_TEMP";
constexpr std::string_view kPower = "DCGM_FI_DEV_POWER_USAGE";
constexpr std::string_view kGr = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
constexpr std::string_view kTensor = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE";
constexpr std::string_view kUp = "kgpu_gpu_up";
constexpr std::string_view kAllocated = "kgpu_device_allocated";
constexpr std::string_view kProcesses = "kgpu_container_gpu_processes";
constexpr std::string_view kLastSample = "kgpu_last_sample_timestamp_seconds";

const std::string* first_label(const Sample& s, std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    if (const std::string* v = s.label(n); v != nullptr && !v->empty()) return v;
  }
  return nullptr;
}

std::string device_key(const Sample& s) {
  const std::string* uuid = first_label(s, {"UUID", "uuid"});
  if (uuid == nullptr) return {};
  const std::string* gi = s.label("GPU_I_ID");
  return gi != nullptr && !gi->empty() ? *uuid + "/gi" + *gi : *uuid;
}

std::optional<ContainerRef> container_of(const Sample& s) {
  const std::string* pod = first_label(s, {"pod", "exported_pod", "pod_name"});
  if (pod == nullptr) return std::nullopt;
  const std::string* ns = first_label(s, {"namespace", "exported_namespace", "pod_namespace"});
  const std::string* c = first_label(s, {"container", "exported_container", "container_name"});
  return ContainerRef{ns != nullptr ? *ns : std::string(), *pod, c != nullptr ? *c : std::string()};
}

}  // namespace

std::optional<double> Device::fb_total_mib() const {
  if (!fb_used_mib || !fb_free_mib) return std::nullopt;
  return *fb_used_mib + *fb_free_mib + fb_reserved_mib.value_or(0);
}

const std::vector<std::string_view>& wanted_metric_names() {
  static const std::vector<std::string_view> names = {kUtil, kFbUsed, kFbFree, kFbReserved, kTemp,      kPower,
                                                      kGr,   kTensor, kUp,     kAllocated,  kProcesses, kLastSample};
  return names;
}

bool wanted_metric(std::string_view name) {
  for (auto n : wanted_metric_names()) {
    if (name == n) return true;
  }
  return false;
}

NodeMetrics node_metrics(const std::vector<Sample>& samples) {
  NodeMetrics out;
  // Containers sharing a GPU, by device: their series are theirs, not the GPU's.
  std::set<std::pair<std::string, ContainerRef>> sharers;
  for (const auto& s : samples) {
    if (s.name == kLastSample) out.last_sample_unix = s.value;
    const std::string key = device_key(s);
    if (key.empty()) continue;
    const auto who = container_of(s);
    if (s.name == kProcesses && who) sharers.insert({key, *who});
  }
  for (const auto& s : samples) {
    const std::string key = device_key(s);
    if (key.empty()) continue;
    const auto who = container_of(s);
    if (s.name == kAllocated) {
      const std::string* id = s.label("device_id");
      const std::string* resource = s.label("resource");
      if (who && id != nullptr) {
        out.allocations.push_back(Allocation{*who, key, resource != nullptr ? *resource : std::string(), *id,
                                             id->find("::") != std::string::npos});
      }
      continue;
    }
    if (s.name == kProcesses || s.name == kLastSample) {
      if (s.name == kProcesses && who) {
        ContainerUse* use = nullptr;
        for (auto& u : out.uses) {
          if (u.device_key == key && u.who == *who) use = &u;
        }
        if (use == nullptr) use = &out.uses.emplace_back(ContainerUse{*who, key, {}, {}, {}});
        use->processes = s.value;
      }
      continue;
    }
    const bool shared_series = who && sharers.contains({key, *who}) && (s.name == kUtil || s.name == kFbUsed);
    if (shared_series) {
      ContainerUse* use = nullptr;
      for (auto& u : out.uses) {
        if (u.device_key == key && u.who == *who) use = &u;
      }
      if (use == nullptr) use = &out.uses.emplace_back(ContainerUse{*who, key, {}, {}, {}});
      (s.name == kUtil ? use->util_pct : use->fb_used_mib) = s.value;
      continue;
    }
    Device& d = out.devices[key];
    if (d.key.empty()) {
      d.key = key;
      if (const auto* u = first_label(s, {"UUID", "uuid"})) d.uuid = *u;
      if (const auto* g = s.label("gpu")) d.index = *g;
      if (const auto* m = s.label("modelName")) d.model = *m;
      if (const auto* p = s.label("GPU_I_PROFILE")) d.mig_profile = *p;
      if (const auto* i = s.label("GPU_I_ID")) d.mig_id = *i;
      if (const auto* dev = s.label("device"); dev != nullptr && dev->starts_with("nvidia")) d.minor = dev->substr(6);
    }
    if (who && !d.owner) d.owner = *who;
    if (s.name == kUp) {
      d.up = s.value != 0;
    } else if (s.name == kUtil) {
      d.util_pct = s.value;
    } else if (s.name == kFbUsed) {
      d.fb_used_mib = s.value;
    } else if (s.name == kFbFree) {
      d.fb_free_mib = s.value;
    } else if (s.name == kFbReserved) {
      d.fb_reserved_mib = s.value;
    } else if (s.name == kTemp) {
      d.temp_c = s.value;
    } else if (s.name == kPower) {
      d.power_w = s.value;
    } else if (s.name == kGr) {
      d.gr_active = s.value;
    } else if (s.name == kTensor) {
      d.tensor_active = s.value;
    }
  }
  return out;
}

}  // namespace kgpu::top
