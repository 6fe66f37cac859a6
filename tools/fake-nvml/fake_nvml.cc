// libnvidia-ml.so.1 for machines without an NVIDIA GPU: the NVML C ABI over a simulated node.
//
// The node comes from the YAML file named by $KGPU_FAKE_NVML_CONFIG (else an embedded 8x H100
// node). The file is re-read whenever it changes, so a test can change telemetry, processes and
// MIG layout, lose a GPU, make a call fail, or append an XID while a program runs. A new file
// that does not parse is reported on stderr and ignored (the last good node stays).
//
// Thread safety: every entry point takes one global lock, as callers may use NVML from any
// thread; nvmlEventSetWait_v2 waits without holding it.
#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include "gpu/nvml/abi.h"
#include "common/files.h"
#include "common/clock.h"
#include "common/log.h"
#include "state.h"

using namespace kgpu::nvml;
using kgpu::fake::Gpu;
using kgpu::fake::MigInstance;
using kgpu::fake::Node;

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr const char* kConfigEnv = "KGPU_FAKE_NVML_CONFIG";

struct Handle {
  unsigned gpu = 0;
  int mig = -1;             // index into Gpu::mig, -1 for the GPU itself
  uint64_t generation = 0;  // MIG handles: layout generation they belong to
};

struct EventSetImpl {
  std::map<unsigned, unsigned long long> registered;  // gpu -> event mask
  std::deque<EventData> queue;
};

struct GpmSampleImpl {
  int gpu = -1;
  double t = 0;
};

class Fake {
 public:
  std::mutex mu;
  std::condition_variable events_cv;
  int init_count = 0;
  bool loaded = false;
  std::string path;
  struct timespec mtime {};
  off_t size = -1;
  std::string last_error;  // why the node could not be loaded (returned by nvmlErrorString(UNKNOWN))
  Node node;
  std::deque<Handle> arena;  // stable addresses for handles
  std::vector<Handle*> gpu_handles;
  std::vector<std::vector<Handle*>> mig_handles;
  std::vector<uint64_t> mig_generation;
  uint64_t generations = 0;  // never reset, so a stale MIG handle never matches
  std::set<unsigned> lost_seen;
  size_t xids_seen = 0;
  std::set<EventSetImpl*> sets;  // owned: freed by nvmlEventSetFree, or here at unload
  // The simulated GPUs run on real time (telemetry curves, energy, event waits), like a driver.
  kgpu::Clock& clock = kgpu::Clock::real();
  kgpu::Clock::SteadyTime t0 = clock.steady_now();

  ~Fake() {
    for (auto* s : sets) delete s;
  }

  // Forgets the node; handles given out before stay valid memory but no longer resolve.
  void reset() {
    loaded = false;
    path.clear();
    mtime = {};
    size = -1;
    last_error.clear();
    node = Node{};
    for (auto* h : gpu_handles) h->gpu = ~0u;
    gpu_handles.clear();
    mig_handles.clear();
    mig_generation.clear();
    lost_seen.clear();
    xids_seen = 0;
  }

  double now() const { return std::chrono::duration<double>(clock.steady_now() - t0).count(); }

  // A node description that cannot be used, on the process's log (the fake's own copy of
  // common/log, configured from KGPU_LOG_LEVEL / KGPU_LOG_FORMAT like the agent's).
  void diagnose(const std::string& message) const {
    kgpu::log::configure_from_environment();
    kgpu::log::error(loaded ? message + " (keeping the previous node)" : message, {kgpu::log::kv("file", path)});
  }

  // Loads (first time) or reloads (file changed) the node. Returns false if never loaded.
  bool refresh() {
    if (!loaded && path.empty()) {
      const char* env = std::getenv(kConfigEnv);
      path = env != nullptr ? env : "";
      if (path.empty()) {
        apply(kgpu::fake::default_node(), true);
        return true;
      }
    }
    if (path.empty()) return loaded;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (!loaded)
        last_error = fmt::format("fake NVML: cannot read node description {}: {}", path, std::strerror(errno));
      return loaded;
    }
    if (loaded && st.st_mtim.tv_sec == mtime.tv_sec && st.st_mtim.tv_nsec == mtime.tv_nsec && st.st_size == size) {
      return true;
    }
    mtime = st.st_mtim;
    size = st.st_size;
    auto text = kgpu::read_file_limited(path, kgpu::fake::kMaxNodeFileBytes);
    if (!text) {
      last_error = "fake NVML: node description: " + text.error().message;
      diagnose(last_error);
      return loaded;
    }
    auto parsed = kgpu::fake::parse_node(*text, path);
    if (!parsed) {
      last_error = "fake NVML: " + parsed.error().message;
      diagnose(last_error);
      return loaded;
    }
    apply(std::move(*parsed), !loaded);
    return true;
  }

  void apply(Node n, bool first) {
    const size_t old_xids = first ? n.xids.size() : xids_seen;
    std::vector<std::string> old_layout(node.gpus.size());
    for (size_t i = 0; i < node.gpus.size(); ++i) old_layout[i] = layout_key(node.gpus[i]);
    node = std::move(n);
    loaded = true;
    while (gpu_handles.size() < node.gpus.size()) {
      arena.push_back(Handle{static_cast<unsigned>(gpu_handles.size()), -1, 0});
      gpu_handles.push_back(&arena.back());
    }
    mig_handles.resize(node.gpus.size());
    mig_generation.resize(node.gpus.size(), 0);
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      if (i < old_layout.size() && old_layout[i] == layout_key(node.gpus[i]) && !mig_handles[i].empty()) continue;
      mig_generation[i] = ++generations;
      mig_handles[i].clear();
      for (size_t k = 0; k < node.gpus[i].mig.size(); ++k) {
        arena.push_back(Handle{static_cast<unsigned>(i), static_cast<int>(k), mig_generation[i]});
        mig_handles[i].push_back(&arena.back());
      }
    }
    // New XIDs (appended entries) and newly lost GPUs (XID 79, fallen off the bus) become events.
    for (size_t k = old_xids; k < node.xids.size(); ++k) {
      const auto& x = node.xids[k];
      deliver(x.gpu, x.type, x.xid);
    }
    xids_seen = node.xids.size();
    for (unsigned g : node.lost) {
      if (lost_seen.insert(g).second && !first) deliver(g, kEventXidCriticalError, 79);
    }
    std::erase_if(lost_seen,
                  [&](unsigned g) { return std::find(node.lost.begin(), node.lost.end(), g) == node.lost.end(); });
  }

  static std::string layout_key(const Gpu& g) {
    std::string k = g.uuid + (g.mig_enabled ? "+" : "-");
    for (const auto& m : g.mig) k += fmt::format("{}@{}#{};", m.shape->key, m.start, m.gpu_instance_id);
    return k;
  }

  void deliver(unsigned gpu, unsigned long long type, uint64_t data) {
    if (gpu >= gpu_handles.size()) return;
    for (auto* s : sets) {
      auto it = s->registered.find(gpu);
      if (it == s->registered.end() || (it->second & type) == 0) continue;
      EventData e{};
      e.device = reinterpret_cast<Device>(gpu_handles[gpu]);
      e.eventType = type;
      e.eventData = data;
      e.gpuInstanceId = kInstanceIdNone;
      e.computeInstanceId = kInstanceIdNone;
      s->queue.push_back(e);
    }
    events_cv.notify_all();
  }

  bool is_lost(unsigned gpu) const { return std::find(node.lost.begin(), node.lost.end(), gpu) != node.lost.end(); }

  Return fault(const char* fn, std::optional<unsigned> gpu) const {
    for (const auto& f : node.call_faults) {
      if (f.call != fn || (f.gpu && (!gpu || *f.gpu != *gpu))) continue;
      if (f.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(f.delay_ms));
      return f.error;
    }
    return kSuccess;
  }
};

// Destroyed when the library is unloaded (dlclose or exit); callers must have stopped calling.
Fake& fake() {
  static Fake f;
  return f;
}

// Entry of every call: lock, initialized, refreshed, device resolved, faults applied.
struct Call {
  std::unique_lock<std::mutex> lock;
  Return rc = kSuccess;
  Gpu* gpu = nullptr;
  MigInstance* mig = nullptr;
  unsigned index = 0;

  Call(const char* fn, Device d = nullptr, bool needs_device = false, bool allow_mig = true) : lock(fake().mu) {
    Fake& f = fake();
    if (f.init_count == 0) {
      rc = kErrorUninitialized;
      return;
    }
    f.refresh();
    if (needs_device) {
      if (d == nullptr) {
        rc = kErrorInvalidArgument;
        return;
      }
      auto* h = reinterpret_cast<Handle*>(d);
      if (h->gpu >= f.node.gpus.size()) {
        rc = kErrorInvalidArgument;
        return;
      }
      index = h->gpu;
      gpu = &f.node.gpus[h->gpu];
      if (h->mig >= 0) {
        if (h->generation != f.mig_generation[h->gpu] || static_cast<size_t>(h->mig) >= gpu->mig.size()) {
          rc = kErrorInvalidArgument;  // the MIG layout changed since the handle was taken
          return;
        }
        if (!allow_mig) {
          rc = kErrorNotSupported;
          return;
        }
        mig = &gpu->mig[h->mig];
      }
      if (f.is_lost(index)) {
        rc = kErrorGpuIsLost;
        return;
      }
    }
    rc = f.fault(fn, needs_device ? std::optional(index) : std::nullopt);
  }
  double now() const { return fake().now(); }
};

unsigned to_uint(double v) { return v <= 0 ? 0u : v >= 4294967295.0 ? 4294967295u : static_cast<unsigned>(v); }
unsigned long long to_ull(double v) {
  return v <= 0 ? 0ull : v >= 1.8e19 ? 18000000000000000000ull : static_cast<unsigned long long>(v);
}

void copy_string(const std::string& s, char* buf, unsigned length, Return& rc) {
  if (buf == nullptr) {
    rc = kErrorInvalidArgument;
    return;
  }
  if (s.size() + 1 > length) {
    rc = kErrorInsufficientSize;
    return;
  }
  std::memcpy(buf, s.c_str(), s.size() + 1);
}

void fill_pci(const Gpu& g, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  const auto bus = g.bus_id();
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:00.0", g.domain & 0xffff, g.bus);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", bus.c_str());
  pci->domain = g.domain;
  pci->bus = g.bus;
  pci->device = 0;
  pci->pciDeviceId = (g.model->pci_device_id << 16) | 0x10DE;
  pci->pciSubSystemId = g.model->pci_subsystem_id;
}

uint64_t mig_used_mib(const Gpu& g, const MigInstance& m) {
  uint64_t used = 0;
  for (const auto& p : g.processes) {
    if (p.gpu_instance_id == m.gpu_instance_id) used += p.used_memory_mib;
  }
  return used;
}

uint64_t gpu_used_mib(const Gpu& g) {
  uint64_t used = g.base_used_mib;
  for (const auto& p : g.processes) used += p.used_memory_mib;
  return used;
}

std::string error_text(Return r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kErrorUninitialized:
      return "Uninitialized";
    case kErrorInvalidArgument:
      return "Invalid Argument";
    case kErrorNotSupported:
      return "Not Supported";
    case kErrorNoPermission:
      return "Insufficient Permissions";
    case kErrorNotFound:
      return "Not Found";
    case kErrorInsufficientSize:
      return "Insufficient Size";
    case kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case kErrorTimeout:
      return "Timeout";
    case kErrorGpuIsLost:
      return "GPU is lost";
    case kErrorLibRmVersionMismatch:
      return "Driver/library version mismatch";
    default:
      return return_name(r);
  }
}

}  // namespace

// ---- init / system ----

FAKE_API Return nvmlInitWithFlags(unsigned int) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  if (f.init_count == 0) f.reset();  // a fresh initialization reads $KGPU_FAKE_NVML_CONFIG again
  if (!f.refresh()) return kErrorUnknown;
  if (f.node.init_error) return *f.node.init_error;
  ++f.init_count;
  return kSuccess;
}

FAKE_API Return nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

FAKE_API Return nvmlShutdown(void) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  if (f.init_count == 0) return kErrorUninitialized;
  --f.init_count;
  return kSuccess;
}

// The returned text stays valid for the process's life, like NVML's static strings: each distinct
// text is kept once (a bounded set: the error names and the load errors seen). No thread_local: a
// library with TLS must not be dlclose'd under LeakSanitizer, and the loader may close us.
FAKE_API const char* nvmlErrorString(Return r) {
  static std::set<std::string> texts;  // guarded by fake().mu
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  return texts.insert((r == kErrorUnknown && !f.last_error.empty()) ? f.last_error : error_text(r)).first->c_str();
}

FAKE_API Return nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  Call c("nvmlSystemGetDriverVersion");
  if (c.rc == kSuccess) copy_string(fake().node.driver_version, version, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  Call c("nvmlSystemGetNVMLVersion");
  if (c.rc == kSuccess) copy_string(fake().node.nvml_version, version, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlSystemGetCudaDriverVersion_v2(int* v) {
  Call c("nvmlSystemGetCudaDriverVersion_v2");
  if (c.rc != kSuccess) return c.rc;
  if (v == nullptr) return kErrorInvalidArgument;
  *v = fake().node.cuda_driver_version;
  return kSuccess;
}

// ---- devices ----

FAKE_API Return nvmlDeviceGetCount_v2(unsigned int* count) {
  Call c("nvmlDeviceGetCount_v2");
  if (c.rc != kSuccess) return c.rc;
  if (count == nullptr) return kErrorInvalidArgument;
  *count = static_cast<unsigned>(fake().node.gpus.size());
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, Device* device) {
  Call c("nvmlDeviceGetHandleByIndex_v2");
  if (c.rc != kSuccess) return c.rc;
  Fake& f = fake();
  if (device == nullptr || index >= f.node.gpus.size()) return kErrorInvalidArgument;
  if (auto r = f.fault("nvmlDeviceGetHandleByIndex_v2", index); r != kSuccess) return r;
  if (f.is_lost(index)) return kErrorGpuIsLost;
  *device = reinterpret_cast<Device>(f.gpu_handles[index]);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetHandleByUUID(const char* uuid, Device* device) {
  Call c("nvmlDeviceGetHandleByUUID");
  if (c.rc != kSuccess) return c.rc;
  if (uuid == nullptr || device == nullptr) return kErrorInvalidArgument;
  Fake& f = fake();
  for (size_t i = 0; i < f.node.gpus.size(); ++i) {
    if (f.node.gpus[i].uuid == uuid) {
      *device = reinterpret_cast<Device>(f.gpu_handles[i]);
      return f.is_lost(static_cast<unsigned>(i)) ? kErrorGpuIsLost : kSuccess;
    }
    for (size_t k = 0; k < f.node.gpus[i].mig.size(); ++k) {
      if (f.node.gpus[i].mig[k].uuid == uuid) {
        *device = reinterpret_cast<Device>(f.mig_handles[i][k]);
        return kSuccess;
      }
    }
  }
  return kErrorNotFound;
}

FAKE_API Return nvmlDeviceGetIndex(Device d, unsigned int* index) {
  Call c("nvmlDeviceGetIndex", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (index == nullptr) return kErrorInvalidArgument;
  *index = c.index;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetName(Device d, char* name, unsigned int length) {
  Call c("nvmlDeviceGetName", d, true);
  if (c.rc != kSuccess) return c.rc;
  std::string n = c.gpu->model->name;
  if (c.mig != nullptr) {
    n += " MIG " + kgpu::gpu::mig::profile_name(c.mig->shape->compute_slices, c.mig->profile->memory_mib,
                                                c.mig->shape->media_engines);
  }
  copy_string(n, name, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlDeviceGetUUID(Device d, char* uuid, unsigned int length) {
  Call c("nvmlDeviceGetUUID", d, true);
  if (c.rc != kSuccess) return c.rc;
  copy_string(c.mig != nullptr ? c.mig->uuid : c.gpu->uuid, uuid, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlDeviceGetSerial(Device d, char* serial, unsigned int length) {
  Call c("nvmlDeviceGetSerial", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  copy_string(c.gpu->serial, serial, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlDeviceGetPciInfo_v3(Device d, PciInfo* pci) {
  Call c("nvmlDeviceGetPciInfo_v3", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (pci == nullptr) return kErrorInvalidArgument;
  fill_pci(*c.gpu, pci);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetMinorNumber(Device d, unsigned int* minor) {
  Call c("nvmlDeviceGetMinorNumber", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (minor == nullptr) return kErrorInvalidArgument;
  *minor = c.gpu->minor;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetArchitecture(Device d, unsigned int* arch) {
  Call c("nvmlDeviceGetArchitecture", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (arch == nullptr) return kErrorInvalidArgument;
  *arch = c.gpu->model->architecture;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetCudaComputeCapability(Device d, int* major, int* minor) {
  Call c("nvmlDeviceGetCudaComputeCapability", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (major == nullptr || minor == nullptr) return kErrorInvalidArgument;
  *major = c.gpu->model->cc_major;
  *minor = c.gpu->model->cc_minor;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetNumaNodeId(Device d, unsigned int* node) {
  Call c("nvmlDeviceGetNumaNodeId", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (node == nullptr) return kErrorInvalidArgument;
  *node = c.gpu->numa;
  return kSuccess;
}

// Framebuffer of a GPU or MIG instance, in MiB: total, reserved, used.
struct Framebuffer {
  uint64_t total, reserved, used;
};
Framebuffer framebuffer(const Call& c) {
  uint64_t total, reserved, used;
  if (c.mig != nullptr) {
    total = c.mig->profile->memory_mib;
    reserved = 0;
    used = mig_used_mib(*c.gpu, *c.mig);
  } else {
    total = c.gpu->model->memory_mib;
    reserved = c.gpu->model->reserved_mib;
    used = gpu_used_mib(*c.gpu);
  }
  return {total, reserved, std::min(used, total - reserved)};
}

FAKE_API Return nvmlDeviceGetMemoryInfo_v2(Device d, MemoryV2* memory) {
  Call c("nvmlDeviceGetMemoryInfo_v2", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (memory == nullptr) return kErrorInvalidArgument;
  if (memory->version != kMemoryV2Version) return kErrorArgumentVersionMismatch;
  const Framebuffer fb = framebuffer(c);
  memory->total = fb.total << 20;
  memory->reserved = fb.reserved << 20;
  memory->used = fb.used << 20;
  memory->free = (fb.total - fb.reserved - fb.used) << 20;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetMemoryInfo(Device d, Memory* memory) {
  Call c("nvmlDeviceGetMemoryInfo", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (memory == nullptr) return kErrorInvalidArgument;
  const Framebuffer fb = framebuffer(c);
  memory->total = fb.total << 20;
  memory->free = (fb.total - fb.reserved - fb.used) << 20;
  memory->used = (fb.used + fb.reserved) << 20;  // v1 counts the driver's reservation as used
  return kSuccess;
}

// Device-level readings; MIG handles and MIG-enabled GPUs answer NOT_SUPPORTED where NVML does.
FAKE_API Return nvmlDeviceGetUtilizationRates(Device d, Utilization* u) {
  Call c("nvmlDeviceGetUtilizationRates", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->mig_enabled) return kErrorNotSupported;
  if (u == nullptr) return kErrorInvalidArgument;
  u->gpu = to_uint(c.gpu->telemetry.at("gpuUtil", c.now(), 0));
  u->memory = to_uint(c.gpu->telemetry.at("memCopyUtil", c.now(), 0));
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetEncoderUtilization(Device d, unsigned int* util, unsigned int* period) {
  Call c("nvmlDeviceGetEncoderUtilization", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (util == nullptr || period == nullptr) return kErrorInvalidArgument;
  *util = to_uint(c.gpu->telemetry.at("encUtil", c.now(), 0));
  *period = 167000;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetDecoderUtilization(Device d, unsigned int* util, unsigned int* period) {
  Call c("nvmlDeviceGetDecoderUtilization", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (util == nullptr || period == nullptr) return kErrorInvalidArgument;
  *util = to_uint(c.gpu->telemetry.at("decUtil", c.now(), 0));
  *period = 167000;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetTemperature(Device d, int sensor, unsigned int* temp) {
  Call c("nvmlDeviceGetTemperature", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (sensor != kTemperatureGpu || temp == nullptr) return kErrorInvalidArgument;
  *temp = to_uint(c.gpu->telemetry.at("gpuTemp", c.now(), 34));
  return kSuccess;
}

double power_w(const Call& c) { return c.gpu->telemetry.at("powerW", c.now(), c.gpu->model->idle_power_w); }

// Energy since load: the starting value plus the integral of the power reading.
unsigned long long energy_mj(const Gpu& g, double t) {
  return to_ull(g.telemetry.at("energyStartMJ", 0, 1.0e9) +
                1000.0 * g.telemetry.integral("powerW", t, g.model->idle_power_w));
}

FAKE_API Return nvmlDeviceGetPowerUsage(Device d, unsigned int* mw) {
  Call c("nvmlDeviceGetPowerUsage", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mw == nullptr) return kErrorInvalidArgument;
  *mw = to_uint(power_w(c) * 1000.0);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetPowerManagementLimit(Device d, unsigned int* mw) {
  Call c("nvmlDeviceGetPowerManagementLimit", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mw == nullptr) return kErrorInvalidArgument;
  *mw = c.gpu->model->power_limit_w * 1000;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetTotalEnergyConsumption(Device d, unsigned long long* mj) {
  Call c("nvmlDeviceGetTotalEnergyConsumption", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mj == nullptr) return kErrorInvalidArgument;
  // Energy since load at the current power draw, on top of a starting value.
  *mj = energy_mj(*c.gpu, c.now());
  return kSuccess;
}

// Current (telemetry, defaulting to idle) or maximum clock of a clock domain.
Return clock_mhz(const char* fn, Device d, int type, unsigned int* mhz, bool current) {
  Call c(fn, d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mhz == nullptr) return kErrorInvalidArgument;
  const auto& m = *c.gpu->model;
  switch (type) {
    case kClockGraphics:
    case kClockSm:
      *mhz = current ? to_uint(c.gpu->telemetry.at("smClock", c.now(), m.max_sm_clock_mhz / 6)) : m.max_sm_clock_mhz;
      return kSuccess;
    case kClockMem:
      *mhz = current ? to_uint(c.gpu->telemetry.at("memClock", c.now(), m.max_mem_clock_mhz)) : m.max_mem_clock_mhz;
      return kSuccess;
    case kClockVideo:
      *mhz = m.max_sm_clock_mhz * 3 / 4;
      return kSuccess;
    default:
      return kErrorInvalidArgument;
  }
}

FAKE_API Return nvmlDeviceGetClockInfo(Device d, int type, unsigned int* mhz) {
  return clock_mhz("nvmlDeviceGetClockInfo", d, type, mhz, true);
}

FAKE_API Return nvmlDeviceGetMaxClockInfo(Device d, int type, unsigned int* mhz) {
  return clock_mhz("nvmlDeviceGetMaxClockInfo", d, type, mhz, false);
}

FAKE_API Return nvmlDeviceGetPcieReplayCounter(Device d, unsigned int* value) {
  Call c("nvmlDeviceGetPcieReplayCounter", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (value == nullptr) return kErrorInvalidArgument;
  *value = to_uint(c.gpu->telemetry.at("pcieReplay", c.now(), 0));
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetRemappedRows(Device d, unsigned int* corr, unsigned int* unc, unsigned int* pending,
                                          unsigned int* failure) {
  Call c("nvmlDeviceGetRemappedRows", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (!c.gpu->model->row_remapping || c.gpu->mig_enabled) return kErrorNotSupported;
  if (!corr || !unc || !pending || !failure) return kErrorInvalidArgument;
  const auto& t = c.gpu->telemetry;
  *corr = to_uint(t.at("remappedCorrectable", c.now(), 0));
  *unc = to_uint(t.at("remappedUncorrectable", c.now(), 0));
  *pending = t.at("remapPending", c.now(), 0) != 0 ? 1 : 0;
  *failure = t.at("remapFailure", c.now(), 0) != 0 ? 1 : 0;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetTotalEccErrors(Device d, int error_type, int counter_type, unsigned long long* count) {
  Call c("nvmlDeviceGetTotalEccErrors", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (count == nullptr || error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1) {
    return kErrorInvalidArgument;
  }
  static const char* keys[2][2] = {{"eccSbeVolatile", "eccSbeAggregate"}, {"eccDbeVolatile", "eccDbeAggregate"}};
  *count = to_ull(c.gpu->telemetry.at(keys[error_type][counter_type], c.now(), 0));
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetFieldValues(Device d, int count, FieldValue* values) {
  Call c("nvmlDeviceGetFieldValues", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (values == nullptr || count < 0) return kErrorInvalidArgument;
  const double t = c.now();
  const auto& tel = c.gpu->telemetry;
  const auto& m = *c.gpu->model;
  for (int i = 0; i < count; ++i) {
    FieldValue& v = values[i];
    v.timestamp = static_cast<long long>(t * 1e6);
    v.latencyUsec = 0;
    v.nvmlReturn = kSuccess;
    switch (v.fieldId) {
      case kFieldMemoryTemp:
        if (!m.hbm) {
          v.nvmlReturn = kErrorNotSupported;
          break;
        }
        v.valueType = kValueUInt;
        v.value.uiVal = to_uint(tel.at("memoryTemp", t, 38));
        break;
      case kFieldNvLinkThroughputDataTx:
      case kFieldNvLinkThroughputDataRx: {
        if (m.nvlinks == 0) {
          v.nvmlReturn = kErrorNotSupported;
          break;
        }
        const char* key = v.fieldId == kFieldNvLinkThroughputDataTx ? "nvlinkTxKiBps" : "nvlinkRxKiBps";
        v.valueType = kValueULongLong;
        v.value.ullVal = to_ull(tel.integral(key, t, 0));
        break;
      }
      case kFieldTotalEnergyConsumption:
        v.valueType = kValueULongLong;
        v.value.ullVal = energy_mj(*c.gpu, t);
        break;
      case kFieldPowerInstant:
        v.valueType = kValueUInt;
        v.value.uiVal = to_uint(power_w(c) * 1000.0);
        break;
      case kFieldPcieReplayCounter:
        v.valueType = kValueULongLong;
        v.value.ullVal = to_ull(tel.at("pcieReplay", t, 0));
        break;
      default:
        v.nvmlReturn = kErrorNotSupported;
    }
  }
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetComputeMode(Device d, int* mode) {
  Call c("nvmlDeviceGetComputeMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mode == nullptr) return kErrorInvalidArgument;
  *mode = kComputeModeDefault;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetPersistenceMode(Device d, int* enabled) {
  Call c("nvmlDeviceGetPersistenceMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (enabled == nullptr) return kErrorInvalidArgument;
  *enabled = 1;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetCurrentClocksEventReasons(Device d, unsigned long long* reasons) {
  Call c("nvmlDeviceGetCurrentClocksEventReasons", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (reasons == nullptr) return kErrorInvalidArgument;
  *reasons = to_ull(c.gpu->telemetry.at("clockEventReasons", c.now(), 1));
  return kSuccess;
}

// ---- processes ----

FAKE_API Return nvmlDeviceGetComputeRunningProcesses_v3(Device d, unsigned int* count, ProcessInfo* infos) {
  Call c("nvmlDeviceGetComputeRunningProcesses_v3", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (count == nullptr) return kErrorInvalidArgument;
  std::vector<ProcessInfo> list;
  for (const auto& p : c.gpu->processes) {
    if (c.mig != nullptr && p.gpu_instance_id != c.mig->gpu_instance_id) continue;
    ProcessInfo pi{};
    pi.pid = p.pid;
    pi.usedGpuMemory = p.used_memory_mib << 20;
    pi.gpuInstanceId = p.gpu_instance_id ? *p.gpu_instance_id : kInstanceIdNone;
    pi.computeInstanceId = p.gpu_instance_id ? p.compute_instance_id : kInstanceIdNone;
    list.push_back(pi);
  }
  if (*count < list.size()) {
    *count = static_cast<unsigned>(list.size());
    return kErrorInsufficientSize;
  }
  if (!list.empty() && infos == nullptr) return kErrorInvalidArgument;
  std::copy(list.begin(), list.end(), infos);
  *count = static_cast<unsigned>(list.size());
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetProcessUtilization(Device d, ProcessUtilizationSample* samples, unsigned int* count,
                                                unsigned long long last_seen_us) {
  Call c("nvmlDeviceGetProcessUtilization", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->mig_enabled) return kErrorNotSupported;
  if (count == nullptr) return kErrorInvalidArgument;
  // One sample per process per whole second, stamped with that second.
  const double t = c.now();
  const unsigned long long stamp = static_cast<unsigned long long>(t) * 1000000ULL + 1;
  std::vector<ProcessUtilizationSample> list;
  if (stamp > last_seen_us) {
    for (const auto& p : c.gpu->processes) {
      list.push_back({p.pid, stamp, to_uint(p.sm_util.at(t)), to_uint(p.mem_util.at(t)), to_uint(p.enc_util.at(t)),
                      to_uint(p.dec_util.at(t))});
    }
  }
  if (list.empty()) return kErrorNotFound;
  if (samples == nullptr || *count < list.size()) {
    *count = static_cast<unsigned>(list.size());
    return kErrorInsufficientSize;
  }
  std::copy(list.begin(), list.end(), samples);
  *count = static_cast<unsigned>(list.size());
  return kSuccess;
}

// ---- events ----

FAKE_API Return nvmlEventSetCreate(EventSet* set) {
  Call c("nvmlEventSetCreate");
  if (c.rc != kSuccess) return c.rc;
  if (set == nullptr) return kErrorInvalidArgument;
  auto* s = new EventSetImpl();
  fake().sets.insert(s);
  *set = reinterpret_cast<EventSet>(s);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetSupportedEventTypes(Device d, unsigned long long* types) {
  Call c("nvmlDeviceGetSupportedEventTypes", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (types == nullptr) return kErrorInvalidArgument;
  *types = kEventXidCriticalError | (c.gpu->model->hbm ? kEventSingleBitEccError | kEventDoubleBitEccError : 0);
  return kSuccess;
}

FAKE_API Return nvmlDeviceRegisterEvents(Device d, unsigned long long types, EventSet set) {
  Call c("nvmlDeviceRegisterEvents", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  auto* s = reinterpret_cast<EventSetImpl*>(set);
  if (s == nullptr || !fake().sets.contains(s)) return kErrorInvalidArgument;
  s->registered[c.index] |= types;
  return kSuccess;
}

FAKE_API Return nvmlEventSetWait_v2(EventSet set, EventData* data, unsigned int timeout_ms) {
  Call c("nvmlEventSetWait_v2");
  if (c.rc != kSuccess) return c.rc;
  Fake& f = fake();
  auto* s = reinterpret_cast<EventSetImpl*>(set);
  if (s == nullptr || data == nullptr || !f.sets.contains(s)) return kErrorInvalidArgument;
  const auto deadline = f.clock.steady_now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (!s->queue.empty()) {
      *data = s->queue.front();
      s->queue.pop_front();
      return kSuccess;
    }
    if (f.clock.steady_now() >= deadline) return kErrorTimeout;
    // Wake at least every 20 ms to notice a rewritten node description.
    f.events_cv.wait_until(c.lock, std::min(deadline, f.clock.steady_now() + std::chrono::milliseconds(20)));
    f.refresh();
  }
}

FAKE_API Return nvmlEventSetFree(EventSet set) {
  Call c("nvmlEventSetFree");
  if (c.rc != kSuccess) return c.rc;
  auto* s = reinterpret_cast<EventSetImpl*>(set);
  if (s == nullptr || fake().sets.erase(s) == 0) return kErrorInvalidArgument;
  delete s;
  return kSuccess;
}

// ---- MIG ----

FAKE_API Return nvmlDeviceGetMigMode(Device d, unsigned int* current, unsigned int* pending) {
  Call c("nvmlDeviceGetMigMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (current == nullptr || pending == nullptr) return kErrorInvalidArgument;
  *current = c.gpu->mig_enabled ? kMigEnable : kMigDisable;
  *pending = c.gpu->mig_pending ? kMigEnable : kMigDisable;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetMaxMigDeviceCount(Device d, unsigned int* count) {
  Call c("nvmlDeviceGetMaxMigDeviceCount", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (count == nullptr) return kErrorInvalidArgument;
  *count = kgpu::gpu::mig::kComputeSlices;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetMigDeviceHandleByIndex(Device d, unsigned int index, Device* mig) {
  Call c("nvmlDeviceGetMigDeviceHandleByIndex", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (mig == nullptr || index >= kgpu::gpu::mig::kComputeSlices) return kErrorInvalidArgument;
  if (!c.gpu->mig_enabled || index >= c.gpu->mig.size()) return kErrorNotFound;
  *mig = reinterpret_cast<Device>(fake().mig_handles[c.index][index]);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetDeviceHandleFromMigDeviceHandle(Device d, Device* parent) {
  Call c("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr || parent == nullptr) return kErrorInvalidArgument;
  *parent = reinterpret_cast<Device>(fake().gpu_handles[c.index]);
  return kSuccess;
}

FAKE_API Return nvmlDeviceIsMigDeviceHandle(Device d, unsigned int* is_mig) {
  Call c("nvmlDeviceIsMigDeviceHandle", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (is_mig == nullptr) return kErrorInvalidArgument;
  *is_mig = c.mig != nullptr ? 1 : 0;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetGpuInstanceId(Device d, unsigned int* id) {
  Call c("nvmlDeviceGetGpuInstanceId", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr) return kErrorNotSupported;
  if (id == nullptr) return kErrorInvalidArgument;
  *id = c.mig->gpu_instance_id;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetComputeInstanceId(Device d, unsigned int* id) {
  Call c("nvmlDeviceGetComputeInstanceId", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr) return kErrorNotSupported;
  if (id == nullptr) return kErrorInvalidArgument;
  *id = c.mig->compute_instance_id;
  return kSuccess;
}

namespace {
const kgpu::fake::MigProfileSpec* model_profile(const Gpu& g, const kgpu::gpu::mig::Shape& shape) {
  for (const auto& p : g.model->mig) {
    if (std::string(p.shape) == shape.key) return &p;
  }
  return nullptr;
}
}  // namespace

FAKE_API Return nvmlDeviceGetGpuInstanceProfileInfo(Device d, unsigned int profile, GpuInstanceProfileInfo* info) {
  Call c("nvmlDeviceGetGpuInstanceProfileInfo", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (info == nullptr || profile >= kGpuInstanceProfileCount) return kErrorInvalidArgument;
  const auto* shape = kgpu::gpu::mig::shape_by_index(profile);
  const auto* p = shape != nullptr ? model_profile(*c.gpu, *shape) : nullptr;
  if (p == nullptr) return kErrorNotSupported;
  *info = GpuInstanceProfileInfo{shape->profile_id,
                                 0,
                                 shape->compute_slices,
                                 shape->max_instances,
                                 p->sm_count,
                                 p->copy_engines,
                                 p->decoders,
                                 p->encoders,
                                 p->jpegs,
                                 p->ofas,
                                 p->memory_mib};
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetGpuInstances(Device d, unsigned int profile_id, GpuInstance* instances,
                                          unsigned int* count) {
  Call c("nvmlDeviceGetGpuInstances", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (!c.gpu->mig_enabled) return kErrorInvalidState;
  if (instances == nullptr || count == nullptr) return kErrorInvalidArgument;
  unsigned n = 0;
  for (size_t k = 0; k < c.gpu->mig.size(); ++k) {
    if (c.gpu->mig[k].shape->profile_id != profile_id) continue;
    instances[n++] = reinterpret_cast<GpuInstance>(fake().mig_handles[c.index][k]);
  }
  *count = n;
  return kSuccess;
}

FAKE_API Return nvmlGpuInstanceGetInfo(GpuInstance gi, GpuInstanceInfo* info) {
  Call c("nvmlGpuInstanceGetInfo", reinterpret_cast<Device>(gi), true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr || info == nullptr) return kErrorInvalidArgument;
  info->device = reinterpret_cast<Device>(fake().gpu_handles[c.index]);
  info->id = c.mig->gpu_instance_id;
  info->profileId = c.mig->shape->profile_id;
  info->placement = {c.mig->start, c.mig->shape->memory_slices};
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetAttributes_v2(Device d, DeviceAttributes* a) {
  Call c("nvmlDeviceGetAttributes_v2", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (a == nullptr) return kErrorInvalidArgument;
  std::memset(a, 0, sizeof *a);
  if (c.mig != nullptr) {
    const auto& p = *c.mig->profile;
    *a = DeviceAttributes{p.sm_count,
                          p.copy_engines,
                          p.decoders,
                          p.encoders,
                          p.jpegs,
                          p.ofas,
                          c.mig->shape->compute_slices,
                          c.mig->shape->compute_slices,
                          p.memory_mib};
    return kSuccess;
  }
  return kErrorNotSupported;  // real drivers answer only for MIG device handles
}

// ---- topology ----

FAKE_API Return nvmlDeviceGetTopologyCommonAncestor(Device a, Device b, int* level) {
  Call ca("nvmlDeviceGetTopologyCommonAncestor", a, true, false);
  if (ca.rc != kSuccess) return ca.rc;
  if (b == nullptr || level == nullptr) return kErrorInvalidArgument;
  auto* hb = reinterpret_cast<Handle*>(b);
  Fake& f = fake();
  if (hb->gpu >= f.node.gpus.size() || hb->mig >= 0) return kErrorInvalidArgument;
  if (f.is_lost(hb->gpu)) return kErrorGpuIsLost;
  *level = f.node.topology_level(ca.index, hb->gpu);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetNvLinkState(Device d, unsigned int link, int* active) {
  Call c("nvmlDeviceGetNvLinkState", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->nvlinks == 0) return kErrorNotSupported;
  if (active == nullptr || link >= c.gpu->nvlink_remote.size()) return kErrorInvalidArgument;
  *active = c.gpu->nvlink_remote[link].empty() ? 0 : 1;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetNvLinkRemotePciInfo_v2(Device d, unsigned int link, PciInfo* pci) {
  Call c("nvmlDeviceGetNvLinkRemotePciInfo_v2", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->nvlinks == 0) return kErrorNotSupported;
  if (pci == nullptr || link >= c.gpu->nvlink_remote.size()) return kErrorInvalidArgument;
  const auto& remote = c.gpu->nvlink_remote[link];
  if (remote.empty()) return kErrorNotFound;
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", remote.c_str());
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  std::sscanf(remote.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
  pci->domain = dom;
  pci->bus = bus;
  pci->device = dev;
  return kSuccess;
}

// ---- GPM ----

FAKE_API Return nvmlGpmQueryDeviceSupport(Device d, GpmSupport* support) {
  Call c("nvmlGpmQueryDeviceSupport", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (support == nullptr) return kErrorInvalidArgument;
  if (support->version != kGpmSupportVersion) return kErrorArgumentVersionMismatch;
  support->isSupportedDevice = c.gpu->model->gpm ? 1 : 0;
  return kSuccess;
}

FAKE_API Return nvmlGpmSampleAlloc(GpmSample* sample) {
  Call c("nvmlGpmSampleAlloc");
  if (c.rc != kSuccess) return c.rc;
  if (sample == nullptr) return kErrorInvalidArgument;
  *sample = reinterpret_cast<GpmSample>(new GpmSampleImpl());
  return kSuccess;
}

FAKE_API Return nvmlGpmSampleFree(GpmSample sample) {
  delete reinterpret_cast<GpmSampleImpl*>(sample);
  return kSuccess;
}

FAKE_API Return nvmlGpmSampleGet(Device d, GpmSample sample) {
  Call c("nvmlGpmSampleGet", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (!c.gpu->model->gpm) return kErrorNotSupported;
  auto* s = reinterpret_cast<GpmSampleImpl*>(sample);
  if (s == nullptr) return kErrorInvalidArgument;
  s->gpu = static_cast<int>(c.index);
  s->t = c.now();
  return kSuccess;
}

FAKE_API Return nvmlGpmMetricsGet(GpmMetricsGet* get) {
  Call c("nvmlGpmMetricsGet");
  if (c.rc != kSuccess) return c.rc;
  if (get == nullptr || get->version != kGpmMetricsGetVersion || get->numMetrics > kGpmMetricsMax) {
    return kErrorInvalidArgument;
  }
  auto* s1 = reinterpret_cast<GpmSampleImpl*>(get->sample1);
  auto* s2 = reinterpret_cast<GpmSampleImpl*>(get->sample2);
  if (s1 == nullptr || s2 == nullptr || s1->gpu < 0 || s1->gpu != s2->gpu || s2->t <= s1->t)
    return kErrorInvalidArgument;
  Fake& f = fake();
  if (static_cast<size_t>(s1->gpu) >= f.node.gpus.size()) return kErrorInvalidArgument;
  const auto& tel = f.node.gpus[s1->gpu].telemetry;
  for (unsigned i = 0; i < get->numMetrics; ++i) {
    auto& m = get->metrics[i];
    m.nvmlReturn = kSuccess;
    switch (m.metricId) {
      case kGpmGraphicsUtil:
        m.value = tel.at("grEngineActive", s2->t, tel.at("gpuUtil", s2->t, 0));
        break;
      case kGpmAnyTensorUtil:
        m.value = tel.at("tensorActive", s2->t, 0);
        break;
      case kGpmDramBwUtil:
        m.value = tel.at("dramActive", s2->t, 0);
        break;
      case kGpmPcieTxPerSec:
        m.value = tel.at("pcieTxMiBps", s2->t, 0);
        break;
      case kGpmPcieRxPerSec:
        m.value = tel.at("pcieRxMiBps", s2->t, 0);
        break;
      default:
        m.nvmlReturn = kErrorNotSupported;
        m.value = 0;
    }
  }
  return kSuccess;
}

// Every function of the ABI table is defined here with exactly its declared type.
#define KGPU_FAKE_CHECK(name, params) \
  static_assert(std::is_same_v<decltype(&::name), kgpu::nvml::fn::name>, #name " does not match abi.h");
KGPU_NVML_FUNCTIONS(KGPU_FAKE_CHECK)
#undef KGPU_FAKE_CHECK
static_assert(std::is_same_v<decltype(&::nvmlErrorString), kgpu::nvml::fn::nvmlErrorString>);
