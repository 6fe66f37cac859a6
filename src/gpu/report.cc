#include "gpu/report.h"

#include <fmt/format.h>

namespace kgpu::gpu {

using nlohmann::json;

namespace {

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string hex4(uint32_t v) { return fmt::format("0x{:04x}", v); }

template <typename T>
std::string cell(const std::optional<T>& v, const char* fmtstr = "{}") {
  return v ? fmt::format(fmt::runtime(fmtstr), *v) : std::string("-");
}

}  // namespace

json to_json(const Inventory& inv) {
  json j;
  j["driverVersion"] = inv.driver_version;
  j["nvmlVersion"] = inv.nvml_version;
  j["cudaDriverVersion"] =
      inv.cuda_driver_version ? json(cuda_version_string(*inv.cuda_driver_version)) : json(nullptr);
  j["gpus"] = json::array();
  for (const auto& g : inv.gpus) {
    json gj;
    gj["index"] = g.index;
    gj["uuid"] = g.uuid;
    gj["name"] = g.name;
    gj["minorNumber"] = opt(g.minor_number);
    gj["serial"] = opt(g.serial);
    gj["pci"] = {{"busId", g.pci.bus_id},
                 {"deviceId", hex4(g.pci.device_id)},
                 {"vendorId", hex4(g.pci.vendor_id)},
                 {"subsystemId", fmt::format("0x{:08x}", g.pci.subsystem_id)}};
    gj["memoryTotalMiB"] = opt(g.memory_total_mib);
    gj["architecture"] = g.architecture ? json(g.architecture_name) : json(nullptr);
    gj["family"] = g.architecture ? json(g.family) : json(nullptr);
    gj["computeCapability"] =
        g.cc_major && g.cc_minor ? json(fmt::format("{}.{}", *g.cc_major, *g.cc_minor)) : json(nullptr);
    gj["numaNode"] = opt(g.numa_node);
    gj["smCount"] = opt(g.sm_count);
    gj["maxClocksMHz"] = {{"sm", opt(g.max_sm_clock_mhz)}, {"memory", opt(g.max_mem_clock_mhz)}};
    gj["powerLimitW"] = g.power_limit_mw ? json(*g.power_limit_mw / 1000.0) : json(nullptr);
    const char* modes[] = {"Default", "ExclusiveThread", "Prohibited", "ExclusiveProcess"};
    gj["computeMode"] =
        g.compute_mode && *g.compute_mode >= 0 && *g.compute_mode < 4 ? json(modes[*g.compute_mode]) : json(nullptr);
    gj["persistenceMode"] = opt(g.persistence_mode);
    json mig;
    mig["capable"] = g.mig_capable;
    mig["enabled"] = opt(g.mig_enabled);
    mig["pendingEnabled"] = opt(g.mig_pending_enabled);
    mig["devices"] = json::array();
    for (const auto& m : g.mig_devices) {
      json mj = {{"index", m.index},
                 {"uuid", m.uuid},
                 {"gpuInstanceId", m.gpu_instance_id},
                 {"computeInstanceId", m.compute_instance_id},
                 {"profile", m.profile},
                 {"profileId", opt(m.profile_id)},
                 {"gpuSlices", m.gpu_slices},
                 {"computeSlices", m.compute_slices},
                 {"memoryMiB", m.memory_mib},
                 {"smCount", m.sm_count}};
      mj["placement"] =
          m.placement_start ? json{{"start", *m.placement_start}, {"size", opt(m.placement_size)}} : json(nullptr);
      mig["devices"].push_back(std::move(mj));
    }
    gj["mig"] = std::move(mig);
    gj["nvlinks"] = json::array();
    for (const auto& l : g.nvlinks) {
      gj["nvlinks"].push_back({{"link", l.link}, {"remoteBusId", l.remote_bus_id}, {"remoteGpu", opt(l.remote_gpu)}});
    }
    gj["gpm"] = g.gpm_supported;
    gj["lost"] = g.lost;
    gj["error"] = opt(g.error);
    j["gpus"].push_back(std::move(gj));
  }
  json matrix = json::array();
  for (const auto& row : inv.topology) {
    json r = json::array();
    for (Link l : row) r.push_back(link_json_name(l));
    matrix.push_back(std::move(r));
  }
  j["topology"] = std::move(matrix);
  j["errors"] = inv.errors;
  return j;
}

json to_json(const Telemetry& t) {
  json j;
  j["gpu"] = t.gpu_index;
  j["gpuInstanceId"] = opt(t.gpu_instance_id);
  j["lost"] = t.lost;
  j["smClockMHz"] = opt(t.sm_clock_mhz);
  j["memClockMHz"] = opt(t.mem_clock_mhz);
  j["gpuTempC"] = opt(t.gpu_temp_c);
  j["memoryTempC"] = opt(t.memory_temp_c);
  j["powerW"] = opt(t.power_w);
  j["powerLimitW"] = t.power_limit_mw ? json(*t.power_limit_mw / 1000.0) : json(nullptr);
  j["energyMJ"] = opt(t.energy_mj);
  j["pcieReplayCounter"] = opt(t.pcie_replay);
  j["gpuUtilPct"] = opt(t.gpu_util_pct);
  j["memCopyUtilPct"] = opt(t.mem_copy_util_pct);
  j["encUtilPct"] = opt(t.enc_util_pct);
  j["decUtilPct"] = opt(t.dec_util_pct);
  j["fbTotalMiB"] = opt(t.fb_total_mib);
  j["fbFreeMiB"] = opt(t.fb_free_mib);
  j["fbUsedMiB"] = opt(t.fb_used_mib);
  j["fbReservedMiB"] = opt(t.fb_reserved_mib);
  j["nvlinkTxKiB"] = opt(t.nvlink_tx_kib);
  j["nvlinkRxKiB"] = opt(t.nvlink_rx_kib);
  j["remappedRowsCorrectable"] = opt(t.remapped_rows_correctable);
  j["remappedRowsUncorrectable"] = opt(t.remapped_rows_uncorrectable);
  j["remapPending"] = opt(t.remap_pending);
  j["remapFailure"] = opt(t.remap_failure);
  j["eccSbeVolatile"] = opt(t.ecc_sbe_volatile);
  j["eccDbeVolatile"] = opt(t.ecc_dbe_volatile);
  j["eccSbeAggregate"] = opt(t.ecc_sbe_aggregate);
  j["eccDbeAggregate"] = opt(t.ecc_dbe_aggregate);
  j["clockEventReasons"] = opt(t.clock_event_reasons);
  j["grEngineActive"] = opt(t.gr_engine_active);
  j["tensorActive"] = opt(t.tensor_active);
  j["dramActive"] = opt(t.dram_active);
  j["pcieTxBytesPerSec"] = opt(t.pcie_tx_bytes_per_s);
  j["pcieRxBytesPerSec"] = opt(t.pcie_rx_bytes_per_s);
  j["errors"] = json::array();
  for (const auto& e : t.errors) j["errors"].push_back({{"call", e.call}, {"code", e.code}});
  return j;
}

json to_json(const ProcessInfo& p) {
  return {{"pid", p.pid},
          {"usedMemoryBytes", opt(p.used_memory_bytes)},
          {"gpuInstanceId", opt(p.gpu_instance_id)},
          {"computeInstanceId", opt(p.compute_instance_id)}};
}

json to_json(const Event& e) {
  return {{"kind", event_kind_name(e.kind)},
          {"gpu", opt(e.gpu_index)},
          {"uuid", e.uuid},
          {"xid", e.xid},
          {"gpuInstanceId", opt(e.gpu_instance_id)},
          {"computeInstanceId", opt(e.compute_instance_id)},
          {"message", e.message}};
}

std::string inventory_table(const Inventory& inv) {
  std::string out =
      fmt::format("Driver {}  CUDA {}  NVML {}  ({} GPU{})\n", inv.driver_version.empty() ? "?" : inv.driver_version,
                  inv.cuda_driver_version ? cuda_version_string(*inv.cuda_driver_version) : "?",
                  inv.nvml_version.empty() ? "?" : inv.nvml_version, inv.gpus.size(), inv.gpus.size() == 1 ? "" : "s");
  for (const auto& g : inv.gpus) {
    if (g.lost || (g.error && g.uuid.empty())) {
      out += fmt::format("GPU {}: UNAVAILABLE ({})\n", g.index, g.error.value_or("lost"));
      continue;
    }
    out += fmt::format("GPU {}: {} (UUID: {})\n", g.index, g.name, g.uuid);
    std::string mig = !g.mig_capable ? "n/a" : g.mig_enabled.value_or(false) ? "enabled" : "disabled";
    if (g.mig_capable && g.mig_pending_enabled && g.mig_enabled && *g.mig_pending_enabled != *g.mig_enabled) {
      mig += fmt::format(" (pending: {})", *g.mig_pending_enabled ? "enabled" : "disabled");
    }
    out += fmt::format("    {} MiB  {}  {} {}  SMs {}  NUMA {}  PCI {} [{}]  MIG {}\n", cell(g.memory_total_mib),
                       g.architecture_name.empty() ? "?" : g.architecture_name, "CC",
                       g.cc_major ? fmt::format("{}.{}", *g.cc_major, g.cc_minor.value_or(0)) : "-", cell(g.sm_count),
                       cell(g.numa_node), g.pci.bus_id, hex4(g.pci.device_id), mig);
    if (g.error) out += fmt::format("    warning: {}\n", *g.error);
    for (const auto& m : g.mig_devices) {
      out += fmt::format("  MIG {:<12} Device {:2}: (UUID: {})  GI {} CI {}  {} MiB  {} SMs", m.profile, m.index,
                         m.uuid, m.gpu_instance_id, m.compute_instance_id, m.memory_mib, m.sm_count);
      if (m.placement_start) {
        out += fmt::format("  slices {}-{}", *m.placement_start, *m.placement_start + m.placement_size.value_or(1) - 1);
      }
      out += "\n";
    }
  }
  if (inv.gpus.size() > 1) {
    out += "\nTopology:\n      ";
    for (const auto& g : inv.gpus) out += fmt::format("{:<6}", fmt::format("GPU{}", g.index));
    out += "NUMA\n";
    for (size_t a = 0; a < inv.gpus.size(); ++a) {
      out += fmt::format("{:<6}", fmt::format("GPU{}", a));
      for (size_t b = 0; b < inv.gpus.size(); ++b) {
        std::string c = link_short_name(inv.topology[a][b]);
        if (inv.topology[a][b] == Link::kNvLink) {
          const auto& links = inv.gpus[a].nvlinks;
          size_t direct = 0;
          for (const auto& l : links) direct += l.remote_gpu == inv.gpus[b].index ? 1 : 0;
          c = fmt::format("NV{}", direct != 0 ? direct : links.size());
        }
        out += fmt::format("{:<6}", c);
      }
      out += cell(inv.gpus[a].numa_node) + "\n";
    }
    out +=
        "Legend: X self, NV# NVLink (# links), PIX one PCIe switch, PXB several PCIe switches, "
        "PHB PCIe host bridge, NODE same NUMA node, SYS across sockets\n";
  }
  for (const auto& e : inv.errors) out += fmt::format("error: {}\n", e);
  return out;
}

std::string telemetry_table(const std::vector<Telemetry>& ts) {
  std::string out = fmt::format("{:<8}{:>6}{:>6}{:>9}{:>6}{:>6}{:>10}{:>10}{:>8}{:>8}{:>8}\n", "DEVICE", "TEMP",
                                "MTEMP", "POWER", "UTIL", "MEMU", "FB_USED", "FB_FREE", "SMCLK", "GRACT", "TENSOR");
  for (const auto& t : ts) {
    std::string dev =
        t.gpu_instance_id ? fmt::format("{}/gi{}", t.gpu_index, *t.gpu_instance_id) : fmt::format("{}", t.gpu_index);
    if (t.lost) {
      out += fmt::format("{:<8}LOST\n", dev);
      continue;
    }
    out += fmt::format("{:<8}{:>6}{:>6}{:>9}{:>6}{:>6}{:>10}{:>10}{:>8}{:>8}{:>8}\n", dev, cell(t.gpu_temp_c),
                       cell(t.memory_temp_c), cell(t.power_w, "{:.1f}"), cell(t.gpu_util_pct),
                       cell(t.mem_copy_util_pct), cell(t.fb_used_mib), cell(t.fb_free_mib), cell(t.sm_clock_mhz),
                       cell(t.gr_engine_active, "{:.2f}"), cell(t.tensor_active, "{:.2f}"));
  }
  return out;
}

}  // namespace kgpu::gpu
