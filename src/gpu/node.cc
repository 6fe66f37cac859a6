#include "gpu/node.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <cctype>
#include <cstdio>
#include <set>

#include "common/clock.h"
#include "gpu/mig.h"

namespace kgpu::gpu {

using namespace kgpu::nvml;

namespace {

std::string buffer_string(const char* buf, size_t cap) { return std::string(buf, strnlen(buf, cap)); }

// Canonical "dddddddd:bb:dd.f" (lower case) so that bus ids from different calls compare equal.
std::string canonical_bus_id(const std::string& id) {
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  if (std::sscanf(id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &function) == 4) {
    return fmt::format("{:08x}:{:02x}:{:02x}.{:x}", domain, bus, dev, function);
  }
  if (std::sscanf(id.c_str(), "%x:%x.%x", &bus, &dev, &function) == 3) {
    return fmt::format("{:08x}:{:02x}:{:02x}.{:x}", 0u, bus, dev, function);
  }
  std::string out = id;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

Link link_from_nvml_level(int level) {
  switch (level) {
    case kTopologyInternal:
      return Link::kSelf;
    case kTopologySingle:
      return Link::kPcieSwitch;
    case kTopologyMultiple:
      return Link::kPcieMulti;
    case kTopologyHostBridge:
      return Link::kHostBridge;
    case kTopologyNode:
      return Link::kNumaNode;
    case kTopologySystem:
      return Link::kSystem;
    default:
      return Link::kUnknown;
  }
}

std::string describe(const Library& lib, Return r) { return lib.error_string(r); }

}  // namespace

const char* link_short_name(Link l) {
  switch (l) {
    case Link::kSelf:
      return "X";
    case Link::kNvLink:
      return "NV";
    case Link::kPcieSwitch:
      return "PIX";
    case Link::kPcieMulti:
      return "PXB";
    case Link::kHostBridge:
      return "PHB";
    case Link::kNumaNode:
      return "NODE";
    case Link::kSystem:
      return "SYS";
    case Link::kUnknown:
      return "?";
  }
  return "?";
}

const char* link_json_name(Link l) {
  switch (l) {
    case Link::kSelf:
      return "self";
    case Link::kNvLink:
      return "nvlink";
    case Link::kPcieSwitch:
      return "pcie-switch";
    case Link::kPcieMulti:
      return "pcie-multi-switch";
    case Link::kHostBridge:
      return "host-bridge";
    case Link::kNumaNode:
      return "numa-node";
    case Link::kSystem:
      return "system";
    case Link::kUnknown:
      return "unknown";
  }
  return "unknown";
}

const char* event_kind_name(EventKind k) {
  switch (k) {
    case EventKind::kXid:
      return "xid";
    case EventKind::kSingleBitEcc:
      return "ecc-single-bit";
    case EventKind::kDoubleBitEcc:
      return "ecc-double-bit";
    case EventKind::kGpuLost:
      return "gpu-lost";
    case EventKind::kError:
      return "error";
  }
  return "error";
}

std::string cuda_version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

const char* architecture_name(unsigned arch) {
  switch (arch) {
    case kArchKepler:
      return "Kepler";
    case kArchMaxwell:
      return "Maxwell";
    case kArchPascal:
      return "Pascal";
    case kArchVolta:
      return "Volta";
    case kArchTuring:
      return "Turing";
    case kArchAmpere:
      return "Ampere";
    case kArchAda:
      return "Ada Lovelace";
    case kArchHopper:
      return "Hopper";
    case kArchBlackwell:
      return "Blackwell";
    case kArchRubin:
      return "Rubin";
    default:
      return "Unknown";
  }
}

const char* brand_name(unsigned brand) {
  // nvmlBrandType_t values 0..16 (11 is both VGAMING and CLOUD_GAMING).
  static constexpr const char* kNames[] = {
      "Unknown",   "Quadro",    "Tesla",     "NVS",       "Grid",      "GeForce",           "Titan",
      "NvidiaVApps", "NvidiaVPC", "NvidiaVCS", "NvidiaVWS", "NvidiaCloudGaming", "QuadroRTX", "NvidiaRTX",
      "Nvidia",    "GeForceRTX", "TitanRTX"};
  return brand < std::size(kNames) ? kNames[brand] : "Unknown";
}

std::string architecture_family(unsigned arch) {
  // GPU Feature Discovery's gpu.family values: lower-case architecture, "ada-lovelace" for Ada.
  std::string s = architecture_name(arch);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return c == ' ' ? '-' : std::tolower(c); });
  return s == "unknown" ? "undefined" : s;
}

Result<std::unique_ptr<NodeGpus>> NodeGpus::open(const std::string& library_path) {
  auto lib = Library::open(library_path);
  if (!lib) return std::unexpected(lib.error());
  if (auto ok = (*lib)->init(); !ok) return std::unexpected(ok.error());
  return std::unique_ptr<NodeGpus>(new NodeGpus(std::move(*lib)));
}

NodeGpus::~NodeGpus() {
  std::lock_guard lock(telemetry_mu_);
  for (auto& [key, state] : gpm_) {
    if (state.sample != nullptr) lib_->call(lib_->symbols().nvmlGpmSampleFree, state.sample);
  }
}

Result<unsigned> NodeGpus::device_count() const {
  unsigned n = 0;
  const Return r = lib_->call(lib_->symbols().nvmlDeviceGetCount_v2, &n);
  if (r != kSuccess) return fail(error_code_for(r), "cannot count GPUs: {}", describe(*lib_, r));
  return n;
}

Result<Device> NodeGpus::handle(unsigned index) const {
  Device d = nullptr;
  const Return r = lib_->call(lib_->symbols().nvmlDeviceGetHandleByIndex_v2, index, &d);
  if (r != kSuccess) return fail(error_code_for(r), "GPU {}: {}", index, describe(*lib_, r));
  return d;
}

void NodeGpus::note_lost(unsigned index, const char* call) const {
  std::lock_guard lock(lost_mu_);
  lost_seen_.try_emplace(index, call);
}

NodeGpus::Probe NodeGpus::probe(unsigned index) const {
  const auto& s = lib_->symbols();
  Probe p;
  std::optional<std::string> lost_call;
  {
    std::lock_guard lock(lost_mu_);
    if (auto it = lost_seen_.find(index); it != lost_seen_.end()) {
      lost_call = it->second;
      lost_seen_.erase(it);
    }
  }
  Device dev = nullptr;
  Return r = lib_->call(s.nvmlDeviceGetHandleByIndex_v2, index, &dev);
  if (r == kSuccess) {
    char buf[kDeviceUuidBufferSize] = {};
    r = lib_->call(s.nvmlDeviceGetUUID, dev, buf, kDeviceUuidBufferSize);
    if (r == kSuccess) p.uuid = buffer_string(buf, sizeof buf);
  }
  if (r != kSuccess) {
    p.lost = r == kErrorGpuIsLost;
    p.error = describe(*lib_, r);
    return p;
  }
  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  r = lib_->call(s.nvmlDeviceGetRemappedRows, dev, &corr, &unc, &pending, &failure);
  if (r == kSuccess) {
    p.remap_pending = pending != 0;
  } else if (r == kErrorGpuIsLost) {
    p.lost = true;
    p.error = describe(*lib_, r);
  }
  if (lost_call && !p.error) {
    p.lost = true;
    p.error = fmt::format("{} returned GPU_IS_LOST", *lost_call);
  }
  return p;
}

NodeGpus::FaultSignals NodeGpus::fault_signals(unsigned index) const {
  const auto& s = lib_->symbols();
  FaultSignals f;
  auto dev = handle(index);
  if (!dev) {
    f.lost = dev.error().code == ErrorCode::kGpuLost;
    return f;
  }
  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  Return r = lib_->call(s.nvmlDeviceGetRemappedRows, *dev, &corr, &unc, &pending, &failure);
  if (r == kErrorGpuIsLost) {
    f.lost = true;
    return f;
  }
  if (r == kSuccess) {
    f.remap_pending = pending != 0;
    f.remap_failure = failure != 0;
  }
  unsigned long long count = 0;
  if (lib_->call(s.nvmlDeviceGetTotalEccErrors, *dev, kMemoryErrorUncorrected, kVolatileEcc, &count) == kSuccess) {
    f.ecc_volatile_uncorrected = count;
  }
  unsigned long long reasons = 0;
  if (lib_->call(s.nvmlDeviceGetCurrentClocksEventReasons, *dev, &reasons) == kSuccess) {
    f.thermal_slowdown = (reasons & (kClocksEventSwThermal | kClocksEventHwThermal)) != 0;
    f.power_slowdown = (reasons & kClocksEventHwPowerBrake) != 0;
  }
  return f;
}

std::optional<unsigned> NodeGpus::recovery_action(unsigned index) const {
  auto dev = handle(index);
  if (!dev) return std::nullopt;
  FieldValue v{};
  v.fieldId = kFieldGpuRecoveryAction;
  const Return r = lib_->call(lib_->symbols().nvmlDeviceGetFieldValues, *dev, 1, &v);
  if (r != kSuccess || v.nvmlReturn != kSuccess || v.valueType != kValueUInt) return std::nullopt;
  return v.value.uiVal;
}

Result<void> NodeGpus::reset(unsigned index, const std::string& uuid) const {
  const auto& s = lib_->symbols();
  auto dev = handle(index);
  if (!dev) return std::unexpected(dev.error());
  nvml::PciInfo pci{};
  Return r = lib_->call(s.nvmlDeviceGetPciInfo_v3, *dev, &pci);
  if (r != kSuccess) return fail(error_code_for(r), "GPU {}: reading its PCI address: {}", index, describe(*lib_, r));
  int persistence = 0;
  if (lib_->call(s.nvmlDeviceGetPersistenceMode, *dev, &persistence) != kSuccess) persistence = 0;
  auto restore_persistence = [&] {
    if (persistence == 0) return;
    Device again = nullptr;
    if (lib_->call(s.nvmlDeviceGetHandleByUUID, uuid.c_str(), &again) == kSuccess) {
      (void)lib_->call(s.nvmlDeviceSetPersistenceMode, again, kFeatureEnabled);
    }
  };
  if (persistence != 0) {
    r = lib_->call(s.nvmlDeviceSetPersistenceMode, *dev, kFeatureDisabled);
    if (r != kSuccess) {
      return fail(error_code_for(r), "GPU {}: persistence mode is on and could not be turned off for the reset: {}",
                  index, describe(*lib_, r));
    }
  }
  r = lib_->call(s.nvmlDeviceModifyDrainState, &pci, kFeatureEnabled);
  if (r != kSuccess) {
    restore_persistence();
    return fail(error_code_for(r), "GPU {} ({}): drain: {}", index, pci.busId, describe(*lib_, r));
  }
  r = lib_->call(s.nvmlDeviceRemoveGpu_v2, &pci, kDetachGpuRemove, kPcieLinkKeep);
  if (r != kSuccess) {
    (void)lib_->call(s.nvmlDeviceModifyDrainState, &pci, kFeatureDisabled);
    restore_persistence();
    return fail(error_code_for(r), "GPU {} ({}): removing it from the driver: {}{}", index, pci.busId,
                describe(*lib_, r), r == kErrorInUse ? " (a process is still attached)" : "");
  }
  r = lib_->call(s.nvmlDeviceDiscoverGpus, &pci);
  if (r != kSuccess) {
    return fail(error_code_for(r), "GPU {} ({}): rediscovering it after the removal: {} (the GPU stays removed)", index,
                pci.busId, describe(*lib_, r));
  }
  restore_persistence();
  return {};
}

GpuInfo NodeGpus::read_gpu(unsigned index) const {
  const auto& s = lib_->symbols();
  GpuInfo g;
  g.index = index;
  Device dev = nullptr;
  Return r = lib_->call(s.nvmlDeviceGetHandleByIndex_v2, index, &dev);
  if (r != kSuccess) {
    g.error = describe(*lib_, r);
    g.lost = r == kErrorGpuIsLost;
    return g;
  }
  // Records the first hard failure; a lost GPU stops further calls.
  auto check = [&](Return rc, const char* what) {
    if (rc == kSuccess) return true;
    if (rc == kErrorGpuIsLost) g.lost = true;
    if (rc != kErrorNotSupported && !g.error) g.error = fmt::format("{}: {}", what, describe(*lib_, rc));
    return false;
  };
  char buf[kDeviceUuidBufferSize] = {};
  if (check(lib_->call(s.nvmlDeviceGetUUID, dev, buf, kDeviceUuidBufferSize), "uuid")) {
    g.uuid = buffer_string(buf, sizeof buf);
  }
  if (g.lost) return g;
  char name[kDeviceNameBufferSize] = {};
  if (check(lib_->call(s.nvmlDeviceGetName, dev, name, kDeviceNameBufferSize), "name")) {
    g.name = buffer_string(name, sizeof name);
  }
  unsigned u = 0;
  if (check(lib_->call(s.nvmlDeviceGetMinorNumber, dev, &u), "minor number")) g.minor_number = u;
  char serial[kDeviceSerialBufferSize] = {};
  if (lib_->call(s.nvmlDeviceGetSerial, dev, serial, kDeviceSerialBufferSize) == kSuccess) {
    g.serial = buffer_string(serial, sizeof serial);
  }
  nvml::PciInfo pci{};
  if (check(lib_->call(s.nvmlDeviceGetPciInfo_v3, dev, &pci), "PCI info")) {
    g.pci.bus_id = canonical_bus_id(buffer_string(pci.busId, sizeof pci.busId));
    // NVML prints bus ids in upper case hex (00000000:18:00.0 / 00000000:B9:00.0).
    std::transform(g.pci.bus_id.begin(), g.pci.bus_id.end(), g.pci.bus_id.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    g.pci.domain = pci.domain;
    g.pci.bus = pci.bus;
    g.pci.device = pci.device;
    g.pci.device_id = pci.pciDeviceId >> 16;
    g.pci.vendor_id = pci.pciDeviceId & 0xffff;
    g.pci.subsystem_id = pci.pciSubSystemId;
  }
  if (g.lost) return g;
  Memory mem{};
  if (check(lib_->call(s.nvmlDeviceGetMemoryInfo, dev, &mem), "memory")) g.memory_total_mib = mem.total >> 20;
  if (check(lib_->call(s.nvmlDeviceGetArchitecture, dev, &u), "architecture")) {
    g.architecture = u;
    g.architecture_name = architecture_name(u);
    g.family = architecture_family(u);
  }
  if (lib_->call(s.nvmlDeviceGetBrand, dev, &u) == kSuccess) g.brand = u;
  int major = 0, minor = 0;
  if (check(lib_->call(s.nvmlDeviceGetCudaComputeCapability, dev, &major, &minor), "compute capability")) {
    g.cc_major = major;
    g.cc_minor = minor;
  }
  if (lib_->call(s.nvmlDeviceGetNumaNodeId, dev, &u) == kSuccess) g.numa_node = u;
  // nvmlDeviceGetAttributes_v2 answers only for MIG handles on real drivers; a whole MIG-capable
  // GPU's SM count is that of its 7-slice GPU-instance profile.
  GpuInstanceProfileInfo full{};
  if (lib_->call(s.nvmlDeviceGetGpuInstanceProfileInfo, dev, kGpuInstanceProfile7Slice, &full) == kSuccess) {
    g.sm_count = full.multiprocessorCount;
  }
  if (lib_->call(s.nvmlDeviceGetMaxClockInfo, dev, kClockSm, &u) == kSuccess) g.max_sm_clock_mhz = u;
  if (lib_->call(s.nvmlDeviceGetMaxClockInfo, dev, kClockMem, &u) == kSuccess) g.max_mem_clock_mhz = u;
  if (lib_->call(s.nvmlDeviceGetPowerManagementLimit, dev, &u) == kSuccess) g.power_limit_mw = u;
  int i = 0;
  if (lib_->call(s.nvmlDeviceGetComputeMode, dev, &i) == kSuccess) g.compute_mode = i;
  if (lib_->call(s.nvmlDeviceGetPersistenceMode, dev, &i) == kSuccess) g.persistence_mode = i != 0;
  if (lib_->call(s.nvmlDeviceGetVirtualizationMode, dev, &i) == kSuccess) g.virtualization_mode = i;
  if (GpuFabricInfo fi{}; lib_->call(s.nvmlDeviceGetGpuFabricInfo, dev, &fi) == kSuccess &&
                          fi.state != kGpuFabricStateNotSupported) {
    // go-nvlib's IsFabricAttached: registration completed, successfully, with a cluster UUID.
    static constexpr unsigned char kZero[kGpuFabricUuidLen] = {};
    GpuFabric f;
    f.clique_id = fi.cliqueId;
    f.attached = fi.state == kGpuFabricStateCompleted && fi.status == kSuccess &&
                 std::memcmp(fi.clusterUuid, kZero, sizeof kZero) != 0;
    const unsigned char* id = fi.clusterUuid;
    f.cluster_uuid = fmt::format("{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                                 id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7], id[8], id[9], id[10], id[11],
                                 id[12], id[13], id[14], id[15]);
    g.fabric = std::move(f);
  }
  if (g.lost) return g;

  read_mig(dev, g);

  for (unsigned link = 0; link < kNvLinkMaxLinks; ++link) {
    int active = 0;
    r = lib_->call(s.nvmlDeviceGetNvLinkState, dev, link, &active);
    if (r == kErrorInvalidArgument || r == kErrorNotSupported) break;  // past the last link / no NVLink
    if (r != kSuccess) {
      check(r, "NVLink state");
      break;
    }
    if (!active) continue;
    nvml::PciInfo remote{};
    NvLinkInfo l;
    l.link = link;
    if (lib_->call(s.nvmlDeviceGetNvLinkRemotePciInfo_v2, dev, link, &remote) == kSuccess) {
      l.remote_bus_id = canonical_bus_id(buffer_string(remote.busId, sizeof remote.busId));
    }
    g.nvlinks.push_back(std::move(l));
  }

  GpmSupport gpm{kGpmSupportVersion, 0};
  if (lib_->call(s.nvmlGpmQueryDeviceSupport, dev, &gpm) == kSuccess) g.gpm_supported = gpm.isSupportedDevice != 0;
  return g;
}

void NodeGpus::read_mig(Device dev, GpuInfo& g) const {
  const auto& s = lib_->symbols();
  unsigned current = 0, pending = 0;
  const Return r = lib_->call(s.nvmlDeviceGetMigMode, dev, &current, &pending);
  if (r != kSuccess) return;  // not MIG capable (or the driver predates MIG)
  g.mig_capable = true;
  g.mig_enabled = current == kMigEnable;
  g.mig_pending_enabled = pending == kMigEnable;
  if (current != kMigEnable) return;

  // GPU-instance id -> (profile id, placement), from the GPU-instance lists of every profile.
  struct GiInfo {
    unsigned profile_id;
    GpuInstancePlacement placement;
    MigDevice::Engines engines;
  };
  std::map<unsigned, GiInfo> instances;
  for (unsigned p = 0; p < kGpuInstanceProfileCount; ++p) {
    GpuInstanceProfileInfo info{};
    if (lib_->call(s.nvmlDeviceGetGpuInstanceProfileInfo, dev, p, &info) != kSuccess) continue;
    std::vector<GpuInstance> list(std::max(info.instanceCount, 1u));  // NVML fills up to instanceCount
    unsigned count = 0;
    if (lib_->call(s.nvmlDeviceGetGpuInstances, dev, info.id, list.data(), &count) != kSuccess) continue;
    for (unsigned k = 0; k < count && k < list.size(); ++k) {
      GpuInstanceInfo gi{};
      if (lib_->call(s.nvmlGpuInstanceGetInfo, list[k], &gi) == kSuccess) {
        instances[gi.id] = {gi.profileId, gi.placement,
                            MigDevice::Engines{info.copyEngineCount, info.decoderCount, info.encoderCount,
                                               info.jpegCount, info.ofaCount, info.memorySizeMB}};
      }
    }
  }

  unsigned max = 0;
  if (lib_->call(s.nvmlDeviceGetMaxMigDeviceCount, dev, &max) != kSuccess) return;
  for (unsigned k = 0; k < max; ++k) {
    Device m = nullptr;
    if (lib_->call(s.nvmlDeviceGetMigDeviceHandleByIndex, dev, k, &m) != kSuccess) continue;  // empty slot
    MigDevice md;
    md.index = k;
    char buf[kDeviceUuidBufferSize] = {};
    if (lib_->call(s.nvmlDeviceGetUUID, m, buf, kDeviceUuidBufferSize) == kSuccess) {
      md.uuid = buffer_string(buf, sizeof buf);
    }
    unsigned id = 0;
    if (lib_->call(s.nvmlDeviceGetGpuInstanceId, m, &id) == kSuccess) md.gpu_instance_id = id;
    if (lib_->call(s.nvmlDeviceGetComputeInstanceId, m, &id) == kSuccess) md.compute_instance_id = id;
    DeviceAttributes attr{};
    if (lib_->call(s.nvmlDeviceGetAttributes_v2, m, &attr) == kSuccess) {
      md.sm_count = attr.multiprocessorCount;
      md.gpu_slices = attr.gpuInstanceSliceCount;
      md.compute_slices = attr.computeInstanceSliceCount;
      md.memory_mib = attr.memorySizeMB;
    }
    bool media = false;
    if (auto it = instances.find(md.gpu_instance_id); it != instances.end()) {
      md.profile_id = it->second.profile_id;
      md.placement_start = it->second.placement.start;
      md.placement_size = it->second.placement.size;
      md.engines = it->second.engines;
      if (const auto* shape = mig::shape_by_profile_id(it->second.profile_id)) media = shape->media_engines;
    }
    md.profile = mig::profile_name(md.gpu_slices, md.memory_mib, media);
    if (md.compute_slices != 0 && md.compute_slices < md.gpu_slices) {
      md.profile = fmt::format("{}c.{}", md.compute_slices, md.profile);  // a compute instance of a larger GI
    }
    g.mig_devices.push_back(std::move(md));
  }
}

Result<Inventory> NodeGpus::inventory() const {
  const auto& s = lib_->symbols();
  Inventory inv;
  char buf[kSystemDriverVersionBufferSize] = {};
  if (lib_->call(s.nvmlSystemGetDriverVersion, buf, kSystemDriverVersionBufferSize) == kSuccess) {
    inv.driver_version = buffer_string(buf, sizeof buf);
  }
  char nv[kSystemNvmlVersionBufferSize] = {};
  if (lib_->call(s.nvmlSystemGetNVMLVersion, nv, kSystemNvmlVersionBufferSize) == kSuccess) {
    inv.nvml_version = buffer_string(nv, sizeof nv);
  }
  int cuda = 0;
  if (lib_->call(s.nvmlSystemGetCudaDriverVersion_v2, &cuda) == kSuccess) inv.cuda_driver_version = cuda;

  auto count = device_count();
  if (!count) return std::unexpected(count.error());
  for (unsigned i = 0; i < *count; ++i) {
    inv.gpus.push_back(read_gpu(i));
    if (const auto& g = inv.gpus.back(); g.error) inv.errors.push_back(fmt::format("GPU {}: {}", i, *g.error));
  }

  // Topology. NVLink: a direct link to the peer's bus id, or links into the same NVSwitch.
  std::map<std::string, unsigned> gpu_by_bus;
  for (const auto& g : inv.gpus) {
    if (!g.pci.bus_id.empty()) gpu_by_bus[canonical_bus_id(g.pci.bus_id)] = g.index;
  }
  std::vector<std::set<std::string>> switches(inv.gpus.size());
  for (auto& g : inv.gpus) {
    for (auto& l : g.nvlinks) {
      if (auto it = gpu_by_bus.find(l.remote_bus_id); it != gpu_by_bus.end()) {
        l.remote_gpu = it->second;
      } else if (!l.remote_bus_id.empty()) {
        switches[g.index].insert(l.remote_bus_id);
      }
    }
  }
  const size_t n = inv.gpus.size();
  inv.topology.assign(n, std::vector<Link>(n, Link::kUnknown));
  std::vector<std::optional<Device>> handles(n);  // looked up once, not once per pair
  for (size_t i = 0; i < n; ++i) {
    if (auto h = handle(static_cast<unsigned>(i)); h && !inv.gpus[i].lost) handles[i] = *h;
  }
  for (size_t a = 0; a < n; ++a) {
    inv.topology[a][a] = Link::kSelf;
    for (size_t b = a + 1; b < n; ++b) {
      const auto& ga = inv.gpus[a];
      const auto& gb = inv.gpus[b];
      bool nvlink = std::any_of(ga.nvlinks.begin(), ga.nvlinks.end(),
                                [&](const NvLinkInfo& l) { return l.remote_gpu == gb.index; });
      for (const auto& sw : switches[a]) nvlink = nvlink || switches[b].contains(sw);
      Link link = Link::kUnknown;
      if (nvlink) {
        link = Link::kNvLink;
      } else if (handles[a] && handles[b]) {
        int level = 0;
        if (lib_->call(s.nvmlDeviceGetTopologyCommonAncestor, *handles[a], *handles[b], &level) == kSuccess) {
          link = link_from_nvml_level(level);
        }
      }
      inv.topology[a][b] = inv.topology[b][a] = link;
    }
  }
  return inv;
}

std::vector<Telemetry> NodeGpus::telemetry(std::vector<CallError>* node_errors) {
  std::lock_guard lock(telemetry_mu_);
  const auto& s = lib_->symbols();
  std::vector<Telemetry> out;
  std::vector<Telemetry> mig_out;
  unsigned n = 0;
  if (const Return r = lib_->call(s.nvmlDeviceGetCount_v2, &n); r != kSuccess) {
    if (node_errors != nullptr) node_errors->push_back({"nvmlDeviceGetCount_v2", r});
    return out;
  }
  const std::optional<unsigned> count = n;
  for (unsigned i = 0; i < *count; ++i) {
    Telemetry t;
    t.gpu_index = i;
    Device dev = nullptr;
    Return r = lib_->call(s.nvmlDeviceGetHandleByIndex_v2, i, &dev);
    if (r != kSuccess) {
      t.lost = r == kErrorGpuIsLost;
      if (t.lost) note_lost(i, "nvmlDeviceGetHandleByIndex_v2");
      t.errors.push_back({"nvmlDeviceGetHandleByIndex_v2", r});
      out.push_back(std::move(t));
      continue;
    }
    // Returns true on success; records failures other than NOT_SUPPORTED; stops on a lost GPU.
    auto ok = [&](const char* call, Return rc) {
      if (rc == kSuccess) return true;
      if (rc == kErrorGpuIsLost) {
        t.lost = true;
        note_lost(i, call);
      }
      if (rc != kErrorNotSupported) t.errors.push_back({call, rc});
      return false;
    };
#define KGPU_CALL(fn, ...) (!t.lost && ok(#fn, lib_->call(s.fn, __VA_ARGS__)))
    char id[kDeviceUuidBufferSize] = {};
    if (KGPU_CALL(nvmlDeviceGetUUID, dev, id, kDeviceUuidBufferSize)) t.uuid = buffer_string(id, sizeof id);
    unsigned u = 0, v = 0, w = 0, x = 0;
    if (KGPU_CALL(nvmlDeviceGetClockInfo, dev, kClockSm, &u)) t.sm_clock_mhz = u;
    if (KGPU_CALL(nvmlDeviceGetClockInfo, dev, kClockMem, &u)) t.mem_clock_mhz = u;
    if (KGPU_CALL(nvmlDeviceGetTemperature, dev, kTemperatureGpu, &u) && u <= 200) t.gpu_temp_c = u;
    if (KGPU_CALL(nvmlDeviceGetPowerUsage, dev, &u)) t.power_w = u / 1000.0;
    if (KGPU_CALL(nvmlDeviceGetPowerManagementLimit, dev, &u)) t.power_limit_mw = u;
    unsigned long long ull = 0;
    if (KGPU_CALL(nvmlDeviceGetTotalEnergyConsumption, dev, &ull)) t.energy_mj = ull;
    if (KGPU_CALL(nvmlDeviceGetPcieReplayCounter, dev, &u)) t.pcie_replay = u;
    Utilization util{};
    if (KGPU_CALL(nvmlDeviceGetUtilizationRates, dev, &util)) {
      t.gpu_util_pct = util.gpu;
      t.mem_copy_util_pct = util.memory;
    }
    if (KGPU_CALL(nvmlDeviceGetEncoderUtilization, dev, &u, &v)) t.enc_util_pct = u;
    if (KGPU_CALL(nvmlDeviceGetDecoderUtilization, dev, &u, &v)) t.dec_util_pct = u;
    MemoryV2 mem{};
    mem.version = kMemoryV2Version;
    if (KGPU_CALL(nvmlDeviceGetMemoryInfo_v2, dev, &mem)) {
      t.fb_total_mib = mem.total >> 20;
      t.fb_free_mib = mem.free >> 20;
      t.fb_used_mib = mem.used >> 20;
      t.fb_reserved_mib = mem.reserved >> 20;
    } else if (Memory m1{}; KGPU_CALL(nvmlDeviceGetMemoryInfo, dev, &m1)) {
      t.fb_total_mib = m1.total >> 20;
      t.fb_free_mib = m1.free >> 20;
      t.fb_used_mib = m1.used >> 20;
    }
    if (KGPU_CALL(nvmlDeviceGetRemappedRows, dev, &u, &v, &w, &x)) {
      t.remapped_rows_correctable = u;
      t.remapped_rows_uncorrectable = v;
      t.remap_pending = w != 0;
      t.remap_failure = x != 0;
    }
    if (KGPU_CALL(nvmlDeviceGetTotalEccErrors, dev, kMemoryErrorCorrected, kVolatileEcc, &ull))
      t.ecc_sbe_volatile = ull;
    if (KGPU_CALL(nvmlDeviceGetTotalEccErrors, dev, kMemoryErrorUncorrected, kVolatileEcc, &ull))
      t.ecc_dbe_volatile = ull;
    if (KGPU_CALL(nvmlDeviceGetTotalEccErrors, dev, kMemoryErrorCorrected, kAggregateEcc, &ull))
      t.ecc_sbe_aggregate = ull;
    if (KGPU_CALL(nvmlDeviceGetTotalEccErrors, dev, kMemoryErrorUncorrected, kAggregateEcc, &ull))
      t.ecc_dbe_aggregate = ull;
    if (KGPU_CALL(nvmlDeviceGetCurrentClocksEventReasons, dev, &ull)) t.clock_event_reasons = ull;
    FieldValue fv[3] = {};
    fv[0].fieldId = kFieldMemoryTemp;
    fv[1].fieldId = kFieldNvLinkThroughputDataTx;
    fv[1].scopeId = kFieldScopeAllLinks;
    fv[2].fieldId = kFieldNvLinkThroughputDataRx;
    fv[2].scopeId = kFieldScopeAllLinks;
    if (KGPU_CALL(nvmlDeviceGetFieldValues, dev, 3, fv)) {
      auto as_u64 = [](const FieldValue& f) -> uint64_t {
        switch (f.valueType) {
          case kValueDouble:
            return static_cast<uint64_t>(f.value.dVal);
          case kValueUInt:
            return f.value.uiVal;
          case kValueULong:
            return f.value.ulVal;
          case kValueSLongLong:
            return static_cast<uint64_t>(f.value.sllVal);
          case kValueSInt:
            return static_cast<uint64_t>(f.value.siVal);
          case kValueUShort:
            return f.value.usVal;
          default:
            return f.value.ullVal;
        }
      };
      if (fv[0].nvmlReturn == kSuccess && as_u64(fv[0]) <= 200) t.memory_temp_c = static_cast<unsigned>(as_u64(fv[0]));
      if (fv[1].nvmlReturn == kSuccess) t.nvlink_tx_kib = as_u64(fv[1]);
      if (fv[2].nvmlReturn == kSuccess) t.nvlink_rx_kib = as_u64(fv[2]);
    }
    if (!t.lost) read_gpm(i, dev, std::nullopt, t);

    // MIG devices: framebuffer and GPM ratios per instance (utilization rates are not available per
    // instance in NVML).
    unsigned cur = 0, pend = 0;
    if (!t.lost && lib_->call(s.nvmlDeviceGetMigMode, dev, &cur, &pend) == kSuccess && cur == kMigEnable) {
      unsigned max = 0;
      if (KGPU_CALL(nvmlDeviceGetMaxMigDeviceCount, dev, &max)) {
        std::set<unsigned> seen;  // compute instances of one GPU instance share its memory: one entry
        for (unsigned k = 0; k < max; ++k) {
          Device m = nullptr;
          if (lib_->call(s.nvmlDeviceGetMigDeviceHandleByIndex, dev, k, &m) != kSuccess) continue;
          Telemetry mt;
          mt.gpu_index = i;
          unsigned gi = 0;
          if (lib_->call(s.nvmlDeviceGetGpuInstanceId, m, &gi) != kSuccess || !seen.insert(gi).second) continue;
          mt.gpu_instance_id = gi;
          char mid[kDeviceUuidBufferSize] = {};
          if (lib_->call(s.nvmlDeviceGetUUID, m, mid, kDeviceUuidBufferSize) == kSuccess) {
            mt.uuid = buffer_string(mid, sizeof mid);
          }
          MemoryV2 mm{};
          mm.version = kMemoryV2Version;
          if (const Return mr = lib_->call(s.nvmlDeviceGetMemoryInfo_v2, m, &mm); mr == kSuccess) {
            mt.fb_total_mib = mm.total >> 20;
            mt.fb_free_mib = mm.free >> 20;
            mt.fb_used_mib = mm.used >> 20;
            mt.fb_reserved_mib = mm.reserved >> 20;
          } else if (mr != kErrorNotSupported) {
            mt.errors.push_back({"nvmlDeviceGetMemoryInfo_v2", mr});
          }
          read_gpm(i, dev, gi, mt);  // profiling ratios of this instance (Hopper and later)
          mig_out.push_back(std::move(mt));
        }
      }
    }
#undef KGPU_CALL
    out.push_back(std::move(t));
  }
  for (auto& m : mig_out) out.push_back(std::move(m));
  return out;
}

void NodeGpus::read_gpm(unsigned index, Device dev, std::optional<unsigned> gi, Telemetry& t) {
  const auto& s = lib_->symbols();
  GpmSupport support{kGpmSupportVersion, 0};
  if (lib_->call(s.nvmlGpmQueryDeviceSupport, dev, &support) != kSuccess || !support.isSupportedDevice) return;
  GpmState& st = gpm_[{index, gi.value_or(kWholeGpu)}];
  // GPM samples are taken by the GPU in real time: their spacing is real time too.
  const auto now = kgpu::Clock::real().steady_now();
  if (st.sample != nullptr && now - st.taken < std::chrono::milliseconds(100)) return;  // too soon: keep the old one
  GpmSample sample = nullptr;
  if (Return r = lib_->call(s.nvmlGpmSampleAlloc, &sample); r != kSuccess) {
    t.errors.push_back({"nvmlGpmSampleAlloc", r});
    return;
  }
  const Return got = gi ? lib_->call(s.nvmlGpmMigSampleGet, dev, *gi, sample) : lib_->call(s.nvmlGpmSampleGet, dev, sample);
  if (got != kSuccess) {
    if (got == kErrorGpuIsLost) t.lost = true;
    if (got != kErrorNotSupported) t.errors.push_back({gi ? "nvmlGpmMigSampleGet" : "nvmlGpmSampleGet", got});
    lib_->call(s.nvmlGpmSampleFree, sample);
    return;
  }
  if (st.sample != nullptr) {
    GpmMetricsGet get{};
    get.version = kGpmMetricsGetVersion;
    get.numMetrics = 5;
    get.sample1 = st.sample;
    get.sample2 = sample;
    const unsigned ids[5] = {kGpmGraphicsUtil, kGpmAnyTensorUtil, kGpmDramBwUtil, kGpmPcieTxPerSec, kGpmPcieRxPerSec};
    for (unsigned k = 0; k < 5; ++k) get.metrics[k].metricId = ids[k];
    if (Return r = lib_->call(s.nvmlGpmMetricsGet, &get); r == kSuccess) {
      auto value = [&](unsigned k) -> std::optional<double> {
        if (get.metrics[k].nvmlReturn != kSuccess) return std::nullopt;
        return get.metrics[k].value;
      };
      if (auto x = value(0)) t.gr_engine_active = *x / 100.0;
      if (auto x = value(1)) t.tensor_active = *x / 100.0;
      if (auto x = value(2)) t.dram_active = *x / 100.0;
      if (auto x = value(3)) t.pcie_tx_bytes_per_s = *x * 1048576.0;
      if (auto x = value(4)) t.pcie_rx_bytes_per_s = *x * 1048576.0;
    } else {
      t.errors.push_back({"nvmlGpmMetricsGet", r});
    }
    lib_->call(s.nvmlGpmSampleFree, st.sample);
  }
  st.sample = sample;
  st.taken = now;
}

Result<std::vector<ProcessInfo>> NodeGpus::processes(unsigned gpu_index) const {
  auto dev = handle(gpu_index);
  if (!dev) return std::unexpected(dev.error());
  const auto& s = lib_->symbols();
  std::vector<nvml::ProcessInfo> raw;
  unsigned count = 0;
  Return r = lib_->call(s.nvmlDeviceGetComputeRunningProcesses_v3, *dev, &count, nullptr);
  // The list can grow between the size query and the read; retry a few times.
  for (int attempt = 0; r == kErrorInsufficientSize && attempt < 4; ++attempt) {
    raw.resize(count + 8);
    count = static_cast<unsigned>(raw.size());
    r = lib_->call(s.nvmlDeviceGetComputeRunningProcesses_v3, *dev, &count, raw.data());
  }
  if (r != kSuccess) {
    return fail(error_code_for(r), "GPU {}: running processes: {}", gpu_index, describe(*lib_, r));
  }
  raw.resize(std::min<size_t>(count, raw.size()));
  std::vector<ProcessInfo> out;
  for (const auto& p : raw) {
    ProcessInfo pi;
    pi.pid = p.pid;
    if (p.usedGpuMemory != kValueNotAvailableULL) pi.used_memory_bytes = p.usedGpuMemory;
    if (p.gpuInstanceId != kInstanceIdNone) pi.gpu_instance_id = p.gpuInstanceId;
    if (p.computeInstanceId != kInstanceIdNone) pi.compute_instance_id = p.computeInstanceId;
    out.push_back(pi);
  }
  return out;
}

Result<std::vector<ProcessUtilization>> NodeGpus::process_utilization(unsigned gpu_index, uint64_t since_us) const {
  auto dev = handle(gpu_index);
  if (!dev) return std::unexpected(dev.error());
  const auto& s = lib_->symbols();
  unsigned count = 0;
  Return r = lib_->call(s.nvmlDeviceGetProcessUtilization, *dev, nullptr, &count, since_us);
  std::vector<ProcessUtilizationSample> raw;
  for (int attempt = 0; (r == kErrorInsufficientSize || (r == kSuccess && count > 0 && raw.empty())) && attempt < 4;
       ++attempt) {
    raw.resize(count + 8);
    count = static_cast<unsigned>(raw.size());
    r = lib_->call(s.nvmlDeviceGetProcessUtilization, *dev, raw.data(), &count, since_us);
  }
  if (r == kErrorNotFound) return std::vector<ProcessUtilization>{};  // no samples newer than since_us
  if (r != kSuccess) {
    return fail(error_code_for(r), "GPU {}: process utilization: {}", gpu_index, describe(*lib_, r));
  }
  raw.resize(std::min<size_t>(count, raw.size()));
  std::vector<ProcessUtilization> out;
  for (const auto& p : raw) out.push_back({p.pid, p.timeStamp, p.smUtil, p.memUtil, p.encUtil, p.decUtil});
  return out;
}

// ---- events ----

Result<std::unique_ptr<EventWatcher>> EventWatcher::start(const NodeGpus& node, Callback callback,
                                                          std::chrono::milliseconds wait_timeout) {
  const auto& lib = node.library();
  const auto& s = lib.symbols();
  std::unique_ptr<EventWatcher> w(new EventWatcher(node, std::move(callback), wait_timeout));
  if (Return r = lib.call(s.nvmlEventSetCreate, &w->set_); r != kSuccess) {
    return fail(error_code_for(r), "cannot create an NVML event set: {}", lib.error_string(r));
  }
  auto count = node.device_count();
  if (!count) return std::unexpected(count.error());
  for (unsigned i = 0; i < *count; ++i) {
    auto dev = node.handle(i);
    if (!dev) {
      w->registration_errors_.push_back(dev.error().message);
      continue;
    }
    unsigned long long supported = 0;
    if (Return r = lib.call(s.nvmlDeviceGetSupportedEventTypes, *dev, &supported); r != kSuccess) {
      w->registration_errors_.push_back(fmt::format("GPU {}: supported event types: {}", i, lib.error_string(r)));
      continue;
    }
    const unsigned long long wanted =
        supported & (kEventXidCriticalError | kEventSingleBitEccError | kEventDoubleBitEccError);
    if (wanted == 0) continue;
    if (Return r = lib.call(s.nvmlDeviceRegisterEvents, *dev, wanted, w->set_); r != kSuccess) {
      w->registration_errors_.push_back(fmt::format("GPU {}: register events: {}", i, lib.error_string(r)));
      continue;
    }
    w->index_of_[*dev] = i;
    char buf[kDeviceUuidBufferSize] = {};
    if (lib.call(s.nvmlDeviceGetUUID, *dev, buf, kDeviceUuidBufferSize) == kSuccess) {
      w->uuid_of_[*dev] = buffer_string(buf, sizeof buf);
    }
  }
  w->thread_ = std::thread([raw = w.get()] { raw->run(); });
  return w;
}

void EventWatcher::run() {
  const auto& lib = node_.library();
  const auto& s = lib.symbols();
  while (!stopping_.load()) {
    EventData data{};
    const Return r = lib.call(s.nvmlEventSetWait_v2, set_, &data, static_cast<unsigned>(timeout_.count()));
    if (r == kErrorTimeout) continue;
    Event e;
    if (r != kSuccess) {
      e.kind = r == kErrorGpuIsLost ? EventKind::kGpuLost : EventKind::kError;
      e.message = fmt::format("waiting for NVML events: {}", lib.error_string(r));
      if (data.device != nullptr) {
        if (auto it = index_of_.find(data.device); it != index_of_.end()) e.gpu_index = it->second;
      }
      callback_(e);
      // Do not spin on a persistent failure.
      for (int k = 0; k < 10 && !stopping_.load(); ++k) std::this_thread::sleep_for(timeout_ / 10);
      continue;
    }
    if (auto it = index_of_.find(data.device); it != index_of_.end()) {
      e.gpu_index = it->second;
      e.uuid = uuid_of_[data.device];
    }
    if (data.eventType & kEventXidCriticalError) {
      e.kind = EventKind::kXid;
      e.xid = data.eventData;
    } else if (data.eventType & kEventDoubleBitEccError) {
      e.kind = EventKind::kDoubleBitEcc;
    } else {
      e.kind = EventKind::kSingleBitEcc;
    }
    if (data.gpuInstanceId != kInstanceIdNone) e.gpu_instance_id = data.gpuInstanceId;
    if (data.computeInstanceId != kInstanceIdNone) e.compute_instance_id = data.computeInstanceId;
    callback_(e);
  }
}

void EventWatcher::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
}

EventWatcher::~EventWatcher() {
  stop();
  if (set_ != nullptr) node_.library().call(node_.library().symbols().nvmlEventSetFree, set_);
}

}  // namespace kgpu::gpu
