// libdcgm.so.4 over the fake NVML's simulated node (docs/fake-dcgm.md).
//
// The GPUs, their UUIDs, their activity and lost GPUs come from the node description the fake
// NVML reads ($KGPU_FAKE_NVML_CONFIG, else its embedded default), re-read when it changes; the
// fake's own faults and per-field answers from $KGPU_FAKE_DCGM_CONFIG. A host engine is a real
// peer: dcgmConnect_v2 connects a TCP or unix socket to the address and a handle stays valid
// while that connection is open, so a test plays nv-hostengine with a listening socket.
//
// Every entry point takes one lock; DCGM GPU ids are the node's GPU indices. The GPU instances of a
// MIG-enabled GPU are numbered as DCGM numbers them: GPU id * 8 + position on the GPU, so the ids
// move when the layout changes; their readings are the node's per-instance telemetry.
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <type_traits>
#include <vector>

#include "common/files.h"
#include "config.h"
#include "gpu/dcgm/abi.h"
#include "models.h"
#include "state.h"

#define FAKE_API extern "C" __attribute__((visibility("default")))

using namespace kgpu::dcgm;

namespace {

constexpr Handle kEmbeddedHandle = 1;
constexpr size_t kMaxGroups = 64;
constexpr size_t kMaxFieldGroups = 64;
constexpr unsigned kInstancesPerGpu = 8;

using Entity = std::pair<int, unsigned>;  // (entity group, id)

// A file re-read when its size or modification time changes.
struct Watched {
  std::string path;
  struct timespec mtime {};
  long long size = -1;
  bool changed() {
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0) return false;
    if (st.st_mtim.tv_sec == mtime.tv_sec && st.st_mtim.tv_nsec == mtime.tv_nsec && st.st_size == size) return false;
    mtime = st.st_mtim;
    size = st.st_size;
    return true;
  }
};

struct Session {
  int fd = -1;  // the host engine connection; -1 when embedded
  std::map<GroupId, std::set<Entity>> groups;
  std::map<FieldGroupId, std::vector<unsigned short>> field_groups;
  std::set<std::string> group_names, field_group_names;
  std::set<std::pair<Entity, unsigned short>> watched;
};

struct Fake {
  std::mutex mu;
  bool initialized = false;
  bool node_loaded = false;
  kgpu::fake::Node node;
  kgpu::fake_dcgm::Settings settings;
  Watched node_file, settings_file;
  std::map<Handle, Session> sessions;
  Handle next_handle = 100;
  uintptr_t next_id = 1;
  int64_t last_ts = 0;
  std::chrono::steady_clock::time_point loaded_at = std::chrono::steady_clock::now();

  void complain(const std::string& what) const { std::fprintf(stderr, "fake DCGM: %s\n", what.c_str()); }

  // Re-reads both files when they changed; a file that does not parse keeps the previous state.
  void refresh() {
    if (!node_loaded && node_file.path.empty()) {
      const char* env = std::getenv("KGPU_FAKE_NVML_CONFIG");
      if (env == nullptr || *env == '\0') {
        node = kgpu::fake::default_node();
        node_loaded = true;
      } else {
        node_file.path = env;
      }
      const char* s = std::getenv("KGPU_FAKE_DCGM_CONFIG");
      if (s != nullptr) settings_file.path = s;
    }
    if (node_file.changed()) {
      auto text = kgpu::read_file_limited(node_file.path, kgpu::fake::kMaxNodeFileBytes);
      auto parsed = text ? kgpu::fake::parse_node(*text, node_file.path) : std::unexpected(text.error());
      if (parsed) {
        node = std::move(*parsed);
        node_loaded = true;
      } else {
        complain(parsed.error().message + " (keeping the previous node)");
      }
    }
    if (settings_file.changed()) {
      auto text = kgpu::read_file_limited(settings_file.path, kgpu::fake_dcgm::kMaxSettingsBytes);
      auto parsed = text ? kgpu::fake_dcgm::parse_settings(*text, settings_file.path) : std::unexpected(text.error());
      if (parsed) {
        settings = std::move(*parsed);
      } else {
        complain(parsed.error().message + " (keeping the previous settings)");
      }
    }
  }

  bool lost(unsigned gpu) const { return std::find(node.lost.begin(), node.lost.end(), gpu) != node.lost.end(); }
  bool supported(unsigned gpu) const {
    return gpu < node.gpus.size() && gpu < kMaxDevices && node.gpus[gpu].model->architecture >= 5;  // Volta+
  }
  const kgpu::fake_dcgm::GpuSettings* gpu_settings(unsigned gpu) const {
    auto it = settings.gpus.find(gpu);
    return it == settings.gpus.end() ? nullptr : &it->second;
  }

  // A MIG GPU instance as DCGM sees it.
  struct GpuInstance {
    unsigned gpu = 0;
    unsigned id = 0;  // DCGM's entity id
    const kgpu::fake::MigInstance* mig = nullptr;
  };
  // The GPU instances of a supported MIG-enabled GPU, in the node's order (one per GPU-instance id).
  std::vector<GpuInstance> instances(unsigned gpu) const {
    std::vector<GpuInstance> out;
    if (!supported(gpu) || !node.gpus[gpu].mig_enabled) return out;
    std::set<unsigned> seen;
    for (const auto& m : node.gpus[gpu].mig) {
      if (out.size() == kInstancesPerGpu) break;
      if (!seen.insert(m.gpu_instance_id).second) continue;
      out.push_back({gpu, gpu * kInstancesPerGpu + static_cast<unsigned>(out.size()), &m});
    }
    return out;
  }
  std::optional<GpuInstance> instance(unsigned id) const {
    const auto list = instances(id / kInstancesPerGpu);
    if (id % kInstancesPerGpu >= list.size()) return std::nullopt;
    return list[id % kInstancesPerGpu];
  }
  // The settings of a GPU or a GPU instance; null when none are given.
  const kgpu::fake_dcgm::EntitySettings* entity_settings(const Entity& e) const {
    if (e.first == kEntityGpu) return gpu_settings(e.second);
    const auto inst = instance(e.second);
    const auto* gs = inst ? gpu_settings(inst->gpu) : nullptr;
    if (gs == nullptr) return nullptr;
    auto it = gs->instances.find(inst->mig->gpu_instance_id);
    return it == gs->instances.end() ? nullptr : &it->second;
  }
  double now_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - loaded_at).count(); }

  // The session of a handle, or the status explaining why there is none.
  Return session(Handle h, Session** out) {
    if (!initialized) return kUninitialized;
    refresh();
    auto it = sessions.find(h);
    if (it == sessions.end()) return kBadParam;
    if (it->second.fd >= 0) {
      // The host engine went away when its end of the connection is closed.
      pollfd p{it->second.fd, POLLIN | POLLRDHUP, 0};
      char c;
      if (::poll(&p, 1, 0) > 0 && ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) ||
                                   ::recv(it->second.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)) {
        return kConnectionNotValid;
      }
    }
    *out = &it->second;
    return kOk;
  }
};

Fake& fake() {
  static Fake f;
  return f;
}

unsigned short field_type(unsigned short id) {
  if (id == kFieldGpuUuid) return kTypeString;
  if (id >= kFieldProfPcieTxBytes && id <= kFieldProfNvlinkRxBytes) return kTypeInt64;
  return kTypeDouble;
}

bool known_field(unsigned short id) { return id == kFieldGpuUuid || profiling_field_name(id) != nullptr; }

// A reading of a profiling field from a GPU's or GPU instance's telemetry (ratios from percent;
// rates in bytes per second).
double reading(const kgpu::fake::Telemetry& tel, unsigned short id, double t) {
  switch (id) {
    case kFieldProfGrEngineActive:
      return tel.at("grEngineActive", t, tel.at("gpuUtil", t, 0)) / 100.0;
    case kFieldProfSmActive:
      return tel.at("smActive", t, 0) / 100.0;
    case kFieldProfSmOccupancy:
      return tel.at("smOccupancy", t, 0) / 100.0;
    case kFieldProfPipeTensorActive:
      return tel.at("tensorActive", t, 0) / 100.0;
    case kFieldProfDramActive:
      return tel.at("dramActive", t, 0) / 100.0;
    case kFieldProfPipeFp64Active:
      return tel.at("fp64Active", t, 0) / 100.0;
    case kFieldProfPipeFp32Active:
      return tel.at("fp32Active", t, 0) / 100.0;
    case kFieldProfPipeFp16Active:
      return tel.at("fp16Active", t, 0) / 100.0;
    case kFieldProfPcieTxBytes:
      return tel.at("pcieTxMiBps", t, 0) * 1048576.0;
    case kFieldProfPcieRxBytes:
      return tel.at("pcieRxMiBps", t, 0) * 1048576.0;
    case kFieldProfNvlinkTxBytes:
      return tel.at("nvlinkTxKiBps", t, 0) * 1024.0;
    case kFieldProfNvlinkRxBytes:
      return tel.at("nvlinkRxKiBps", t, 0) * 1024.0;
    default:
      return 0;
  }
}

void set_blank(FieldValue& v, long long offset) {
  if (v.fieldType == kTypeInt64) {
    v.value.i64 = kInt64Blank + offset;
  } else if (v.fieldType == kTypeDouble) {
    v.value.dbl = kDoubleBlank + static_cast<double>(offset);
  } else {
    std::snprintf(v.value.str, sizeof v.value.str, "%s", kStringBlank);
  }
}

void set_number(FieldValue& v, double x) {
  if (v.fieldType == kTypeInt64) {
    v.value.i64 = static_cast<int64_t>(x);
  } else {
    v.value.dbl = x;
  }
}

// Connects to a TCP "host:port" ("[v6]:port") or unix socket within timeout_ms; -1 on failure.
int connect_to(const std::string& address, bool unix_socket, unsigned timeout_ms) {
  int fd = -1;
  auto finish = [&](int s, const sockaddr* addr, socklen_t len) {
    ::fcntl(s, F_SETFL, ::fcntl(s, F_GETFL) | O_NONBLOCK);
    if (::connect(s, addr, len) != 0) {
      if (errno != EINPROGRESS) return false;
      pollfd p{s, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(timeout_ms)) != 1) return false;
      int err = 0;
      socklen_t el = sizeof err;
      if (::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) return false;
    }
    return true;
  };
  if (unix_socket) {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (address.size() >= sizeof sa.sun_path) return -1;
    std::memcpy(sa.sun_path, address.c_str(), address.size() + 1);
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (!finish(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa)) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  std::string host = address, port = std::to_string(kDefaultPort);
  if (address.starts_with("[")) {
    const auto close = address.find(']');
    if (close == std::string::npos) return -1;
    host = address.substr(1, close - 1);
    if (close + 1 < address.size() && address[close + 1] == ':') port = address.substr(close + 2);
  } else if (const auto colon = address.rfind(':'); colon != std::string::npos) {
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  for (auto* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) continue;
    if (finish(s, a->ai_addr, a->ai_addrlen)) {
      fd = s;
    } else {
      ::close(s);
    }
  }
  ::freeaddrinfo(res);
  return fd;
}

}  // namespace

FAKE_API Return dcgmInit() {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  // Each initialisation reads the environment again (tests point it at new files).
  if (!f.initialized) {
    f.node_loaded = false;
    f.node_file = Watched{};
    f.settings_file = Watched{};
    f.settings = kgpu::fake_dcgm::Settings{};
  }
  f.refresh();
  if (f.settings.init_error) return *f.settings.init_error;
  f.initialized = true;
  return kOk;
}

FAKE_API Return dcgmShutdown() {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  for (auto& [h, s] : f.sessions) {
    if (s.fd >= 0) ::close(s.fd);
  }
  f.sessions.clear();
  f.initialized = false;
  return kOk;
}

FAKE_API Return dcgmStartEmbedded(int mode, Handle* handle) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  if (!f.initialized) return kUninitialized;
  if (handle == nullptr || (mode != 1 && mode != 2)) return kBadParam;
  f.refresh();
  if (f.settings.embedded_error) return *f.settings.embedded_error;
  f.sessions[kEmbeddedHandle] = Session{};
  *handle = kEmbeddedHandle;
  return kOk;
}

FAKE_API Return dcgmStopEmbedded(Handle handle) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  if (!f.initialized) return kUninitialized;
  if (handle != kEmbeddedHandle || f.sessions.erase(handle) == 0) return kBadParam;
  return kOk;
}

FAKE_API Return dcgmConnect_v2(const char* address, ConnectParams* params, Handle* handle) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  if (!f.initialized) return kUninitialized;
  if (address == nullptr || params == nullptr || handle == nullptr) return kBadParam;
  if (params->version != kConnectParamsVersion) return kVersionMismatch;
  const int fd =
      connect_to(address, params->addressIsUnixSocket != 0, params->timeoutMs == 0 ? 5000 : params->timeoutMs);
  if (fd < 0) return kConnectionNotValid;
  const Handle h = f.next_handle++;
  f.sessions[h].fd = fd;
  *handle = h;
  return kOk;
}

FAKE_API Return dcgmDisconnect(Handle handle) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  if (!f.initialized) return kUninitialized;
  auto it = f.sessions.find(handle);
  if (it == f.sessions.end() || it->second.fd < 0) return kBadParam;
  ::close(it->second.fd);
  f.sessions.erase(it);  // the host engine drops this connection's groups and watches
  return kOk;
}

FAKE_API Return dcgmGetAllSupportedDevices(Handle handle, unsigned* ids, int* count) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  if (ids == nullptr || count == nullptr) return kBadParam;
  int n = 0;
  for (unsigned i = 0; i < f.node.gpus.size() && i < kMaxDevices; ++i) {
    if (f.supported(i)) ids[n++] = i;
  }
  *count = n;
  return kOk;
}

FAKE_API Return dcgmGroupCreate(Handle handle, int type, const char* name, GroupId* group) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  if (name == nullptr || group == nullptr || (type != 0 && type != kGroupEmpty)) return kBadParam;
  if (s->groups.size() >= kMaxGroups) return kMaxLimit;
  if (!s->group_names.insert(name).second) return kBadParam;
  const GroupId id = f.next_id++;
  auto& members = s->groups[id];
  if (type == 0) {
    for (unsigned i = 0; i < f.node.gpus.size(); ++i) members.insert({kEntityGpu, i});
  }
  *group = id;
  return kOk;
}

FAKE_API Return dcgmGroupDestroy(Handle handle, GroupId group) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  return s->groups.erase(group) == 1 ? kOk : kNotConfigured;
}

FAKE_API Return dcgmGroupAddEntity(Handle handle, GroupId group, int entity_group, unsigned entity_id) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  auto it = s->groups.find(group);
  if (it == s->groups.end()) return kNotConfigured;
  const bool exists = entity_group == kEntityGpu           ? entity_id < f.node.gpus.size()
                      : entity_group == kEntityGpuInstance ? f.instance(entity_id).has_value()
                                                           : false;
  if (!exists) return kBadParam;
  if (!it->second.insert({entity_group, entity_id}).second) return kBadParam;
  return kOk;
}

FAKE_API Return dcgmFieldGroupCreate(Handle handle, int count, const unsigned short* ids, const char* name,
                                     FieldGroupId* field_group) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  if (ids == nullptr || name == nullptr || field_group == nullptr || count < 1 ||
      count > static_cast<int>(kMaxFieldsPerGroup)) {
    return kBadParam;
  }
  if (s->field_groups.size() >= kMaxFieldGroups) return kMaxLimit;
  for (int i = 0; i < count; ++i) {
    if (!known_field(ids[i])) return kUnknownField;
  }
  if (!s->field_group_names.insert(name).second) return kBadParam;
  const FieldGroupId id = f.next_id++;
  s->field_groups[id] = std::vector<unsigned short>(ids, ids + count);
  *field_group = id;
  return kOk;
}

FAKE_API Return dcgmFieldGroupDestroy(Handle handle, FieldGroupId field_group) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  return s->field_groups.erase(field_group) == 1 ? kOk : kBadParam;
}

FAKE_API Return dcgmWatchFields(Handle handle, GroupId group, FieldGroupId field_group, long long update_us,
                                double keep_s, int keep_samples) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  auto g = s->groups.find(group);
  auto fg = s->field_groups.find(field_group);
  if (g == s->groups.end() || fg == s->field_groups.end() || update_us <= 0 || keep_s < 0 || keep_samples < 0) {
    return kBadParam;
  }
  if (g->second.empty()) return kGroupIsEmpty;
  // The profiling module watches all or nothing.
  for (const Entity& e : g->second) {
    const auto* es = f.entity_settings(e);
    for (auto id : fg->second) {
      if (profiling_field_name(id) != nullptr && es != nullptr && !es->profiling) return kProfilingNotSupported;
    }
  }
  for (const Entity& e : g->second) {
    for (auto id : fg->second) s->watched.insert({e, id});
  }
  return kOk;
}

FAKE_API Return dcgmUnwatchFields(Handle handle, GroupId group, FieldGroupId field_group) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  auto g = s->groups.find(group);
  auto fg = s->field_groups.find(field_group);
  if (g == s->groups.end() || fg == s->field_groups.end()) return kBadParam;
  for (const Entity& e : g->second) {
    for (auto id : fg->second) s->watched.erase({e, id});
  }
  return kOk;
}

FAKE_API Return dcgmUpdateAllFields(Handle handle, int wait) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  return wait == 0 || wait == 1 ? kOk : kBadParam;
}

FAKE_API Return dcgmEntitiesGetLatestValues(Handle handle, EntityPair* entities, unsigned entity_count,
                                            unsigned short* fields, unsigned field_count, unsigned flags,
                                            FieldValue* values) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  if (entities == nullptr || fields == nullptr || values == nullptr || entity_count == 0 || field_count == 0) {
    return kBadParam;
  }
  if (f.settings.read_error) return *f.settings.read_error;
  const double t = f.now_s();
  // Each update cycle has a newer timestamp than the last, as DCGM's watches do.
  const int64_t now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const int64_t ts = f.last_ts = std::max<int64_t>(f.last_ts + 1, now_us);
  for (unsigned e = 0; e < entity_count; ++e) {
    for (unsigned k = 0; k < field_count; ++k) {
      FieldValue& v = values[e * field_count + k];
      std::memset(&v, 0, sizeof v);
      v.version = kFieldValueVersion;
      v.entityGroupId = entities[e].entityGroupId;
      v.entityId = entities[e].entityId;
      v.fieldId = fields[k];
      v.fieldType = field_type(fields[k]);
      v.ts = ts;
      const Entity entity{entities[e].entityGroupId, entities[e].entityId};
      // The GPU the entity is or is on, and the telemetry it reads.
      std::optional<unsigned> gpu;
      const kgpu::fake::Telemetry* telemetry = nullptr;
      std::string uuid;
      if (entity.first == kEntityGpu && entity.second < f.node.gpus.size()) {
        gpu = entity.second;
        telemetry = &f.node.gpus[*gpu].telemetry;
        uuid = f.node.gpus[*gpu].uuid;
      } else if (const auto inst = entity.first == kEntityGpuInstance ? f.instance(entity.second) : std::nullopt) {
        gpu = inst->gpu;
        telemetry = &inst->mig->telemetry;
        uuid = inst->mig->uuid;
      }
      const auto* es = f.entity_settings(entity);
      if (es != nullptr && es->frozen) v.ts = 1'700'000'000'000'000LL;
      if (!gpu || !known_field(fields[k])) {
        v.status = kBadParam;
        set_blank(v, 0);
        continue;
      }
      if (f.lost(*gpu)) {
        v.status = kGpuIsLost;
        set_blank(v, 0);
        continue;
      }
      if (fields[k] == kFieldGpuUuid) {
        std::snprintf(v.value.str, sizeof v.value.str, "%s", uuid.c_str());
        continue;
      }
      if (!(flags & kLiveData) && !s->watched.contains({entity, fields[k]})) {
        v.status = kNotWatched;
        set_blank(v, 0);
        continue;
      }
      if (es != nullptr && es->status) {
        v.status = *es->status;
        set_blank(v, 0);
        continue;
      }
      const kgpu::fake_dcgm::Answer* answer = nullptr;
      if (es != nullptr) {
        if (auto a = es->answers.find(fields[k]); a != es->answers.end()) answer = &a->second;
      }
      if (answer != nullptr) {
        using A = kgpu::fake_dcgm::Answer;
        switch (answer->kind) {
          case A::kNumber:
            set_number(v, answer->number);
            break;
          case A::kBlank:
            set_blank(v, 0);
            break;
          case A::kNotFound:
            set_blank(v, 1);
            break;
          case A::kNotSupported:
            set_blank(v, 2);
            break;
          case A::kNotPermissioned:
            set_blank(v, 3);
            break;
          case A::kStatus:
            v.status = answer->status;
            set_blank(v, 0);
            break;
        }
        continue;
      }
      set_number(v, reading(*telemetry, fields[k], t));
    }
  }
  return kOk;
}

FAKE_API Return dcgmGetGpuInstanceHierarchy(Handle handle, MigHierarchy* hierarchy) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  Session* s = nullptr;
  if (Return r = f.session(handle, &s); r != kOk) return r;
  if (hierarchy == nullptr) return kBadParam;
  if (hierarchy->version != kMigHierarchyVersion) return kVersionMismatch;
  if (f.settings.hierarchy_error) return *f.settings.hierarchy_error;
  hierarchy->count = 0;
  auto add = [&](const MigHierarchyEntry& e) {
    if (hierarchy->count < kMaxHierarchyEntries) hierarchy->entityList[hierarchy->count++] = e;
  };
  for (unsigned gpu = 0; gpu < f.node.gpus.size(); ++gpu) {
    for (const auto& inst : f.instances(gpu)) {
      MigHierarchyEntry e{};
      e.entity = {kEntityGpuInstance, inst.id};
      e.parent = {kEntityGpu, gpu};
      std::snprintf(e.info.gpuUuid, sizeof e.info.gpuUuid, "%s", f.node.gpus[gpu].uuid.c_str());
      e.info.nvmlGpuIndex = gpu;
      e.info.nvmlInstanceId = inst.mig->gpu_instance_id;
      e.info.nvmlComputeInstanceId = kNoMigId;
      e.info.nvmlMigProfileId = inst.mig->shape->profile_id;
      e.info.nvmlProfileSlices = inst.mig->shape->compute_slices;
      add(e);
      // Its compute instances follow it, as in DCGM's answer.
      for (const auto& m : f.node.gpus[gpu].mig) {
        if (m.gpu_instance_id != inst.mig->gpu_instance_id) continue;
        MigHierarchyEntry c = e;
        c.entity = {kEntityComputeInstance, inst.id * kInstancesPerGpu + m.compute_instance_id};
        c.parent = {kEntityGpuInstance, inst.id};
        c.info.nvmlComputeInstanceId = m.compute_instance_id;
        add(c);
      }
    }
  }
  return kOk;
}

FAKE_API const char* errorString(Return r) {
  switch (r) {
    case kOk:
      return "Success";
    case kConnectionNotValid:
      return "The connection to the host engine is not valid any longer";
    case kGpuIsLost:
      return "GPU is lost";
    case kProfilingNotSupported:
      return "Profiling is not supported for this group of GPUs or GPU";
    case kInitError:
      return "DCGM initialization error";
    case kModuleNotLoaded:
      return "This request is serviced by a module of DCGM that is not currently loaded";
    default:
      return return_name(r);
  }
}

// Every entry point of the ABI table is defined here with exactly its declared type, and
// referenced (a missing one fails the link).
#define KGPU_FAKE_CHECK(name, ret, params) \
  static_assert(std::is_same_v<decltype(&::name), kgpu::dcgm::fn::name>, #name " does not match abi.h");
KGPU_DCGM_FUNCTIONS(KGPU_FAKE_CHECK)
#undef KGPU_FAKE_CHECK
static_assert(std::is_same_v<decltype(&::errorString), kgpu::dcgm::fn::errorString>);
