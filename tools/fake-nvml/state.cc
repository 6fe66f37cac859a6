#include "state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "common/yaml_guard.h"
#include "gpu/nvml/abi.h"

namespace kgpu::fake {

namespace {

// Thrown inside the parser only; parse_node turns it into an Error.
struct ParseError {
  std::string message;
};

struct Ctx {
  std::string source;
  [[noreturn]] void error(const YAML::Node& n, const std::string& path, const std::string& what) const {
    const int line = n.Mark().line >= 0 ? n.Mark().line + 1 : 0;
    throw ParseError{fmt::format("{}:{}: {}: {}", source, line, path, what)};
  }
  void keys(const YAML::Node& n, const std::string& path, std::initializer_list<const char*> allowed) const {
    if (!n.IsMap()) error(n, path, "expected a mapping");
    for (const auto& kv : n) {
      const auto k = kv.first.as<std::string>();
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; })) {
        error(kv.first, path, fmt::format("unknown field '{}' (known: {})", k, fmt::join(allowed, ", ")));
      }
    }
  }
  template <typename T>
  T get(const YAML::Node& n, const std::string& path) const {
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      error(n, path,
            fmt::format("cannot read '{}' as {}", n.IsScalar() ? n.Scalar() : "<non-scalar>",
                        std::is_same_v<T, std::string> ? "a string"
                        : std::is_same_v<T, bool>      ? "true/false"
                                                       : "a number"));
    }
  }
  int error_code(const YAML::Node& n, const std::string& path) const {
    const auto s = get<std::string>(n, path);
    const int code = nvml::return_from_name(s.c_str());
    if (code < 0) error(n, path, fmt::format("unknown NVML error '{}' (e.g. GPU_IS_LOST, DRIVER_NOT_LOADED)", s));
    return code;
  }
  Wave wave(const YAML::Node& n, const std::string& path) const {
    Wave w;
    if (n.IsScalar()) {
      w.min = w.max = get<double>(n, path);
      return w;
    }
    keys(n, path, {"min", "max", "periodSeconds"});
    if (!n["min"] || !n["max"]) error(n, path, "a varying value needs min and max");
    w.min = get<double>(n["min"], path + ".min");
    w.max = get<double>(n["max"], path + ".max");
    w.period_s = n["periodSeconds"] ? get<double>(n["periodSeconds"], path + ".periodSeconds") : 60.0;
    if (w.period_s <= 0) error(n["periodSeconds"], path + ".periodSeconds", "must be positive");
    return w;
  }
  std::vector<unsigned> index_list(const YAML::Node& n, const std::string& path, size_t gpus) const {
    if (!n.IsSequence()) error(n, path, "expected a list of GPU indices");
    std::vector<unsigned> out;
    for (size_t i = 0; i < n.size(); ++i) {
      const auto v = get<unsigned>(n[i], fmt::format("{}[{}]", path, i));
      if (v >= gpus) error(n[i], fmt::format("{}[{}]", path, i), fmt::format("no GPU {} (the node has {})", v, gpus));
      out.push_back(v);
    }
    return out;
  }
  std::vector<std::vector<unsigned>> groups(const YAML::Node& n, const std::string& path, size_t gpus) const {
    if (!n.IsSequence()) error(n, path, "expected a list of lists of GPU indices");
    std::vector<std::vector<unsigned>> out;
    for (size_t i = 0; i < n.size(); ++i) out.push_back(index_list(n[i], fmt::format("{}[{}]", path, i), gpus));
    return out;
  }
};

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string make_uuid(const char* prefix, uint64_t seed) {
  const uint64_t a = splitmix(seed), b = splitmix(seed ^ 0x5555);
  return fmt::format("{}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", prefix, a >> 32, (a >> 16) & 0xffff, a & 0xffff, b >> 48,
                     b & 0xffffffffffffULL);
}

const std::set<std::string> kTelemetryKeys = {"gpuUtil",
                                              "memCopyUtil",
                                              "encUtil",
                                              "decUtil",
                                              "gpuTemp",
                                              "memoryTemp",
                                              "powerW",
                                              "smClock",
                                              "memClock",
                                              "pcieReplay",
                                              "nvlinkTxKiBps",
                                              "nvlinkRxKiBps",
                                              "remappedCorrectable",
                                              "remappedUncorrectable",
                                              "remapPending",
                                              "remapFailure",
                                              "recoveryAction",
                                              "eccSbeVolatile",
                                              "eccDbeVolatile",
                                              "eccSbeAggregate",
                                              "eccDbeAggregate",
                                              "grEngineActive",
                                              "tensorActive",
                                              "dramActive",
                                              "pcieTxMiBps",
                                              "pcieRxMiBps",
                                              "smActive",
                                              "smOccupancy",
                                              "fp64Active",
                                              "fp32Active",
                                              "fp16Active",
                                              "clockEventReasons",
                                              "energyStartMJ"};

Gpu make_gpu(const ModelSpec& m, unsigned index) {
  Gpu g;
  g.model = &m;
  g.uuid = make_uuid("GPU", 0x6b677075ULL * 131 + index);
  g.serial = fmt::format("165{:010}", 2200000000ULL + splitmix(index) % 99999999ULL);
  g.bus = (0x18 + 0x10 * index) & 0xff;  // past 0xff, the next PCI domain
  g.domain = (0x18 + 0x10 * index) >> 8;
  g.minor = index;
  if (!m.mig.empty()) g.mig_pending = false;
  return g;
}

void wire_nvswitch(Node& node) {
  // HGX/DGX: every GPU's links spread over four NVSwitches.
  for (auto& g : node.gpus) {
    g.nvlink_remote.assign(g.model->nvlinks, "");
    for (unsigned l = 0; l < g.model->nvlinks; ++l) {
      g.nvlink_remote[l] = fmt::format("00000000:{:02X}:00.0", 0x05 + (l % 4));
    }
  }
}

void wire_groups(Node& node, const std::vector<std::vector<unsigned>>& groups) {
  for (auto& g : node.gpus) g.nvlink_remote.assign(g.model->nvlinks, "");
  for (const auto& group : groups) {
    for (unsigned a : group) {
      std::vector<unsigned> peers;
      for (unsigned b : group) {
        if (b != a) peers.push_back(b);
      }
      auto& ga = node.gpus[a];
      if (peers.empty()) continue;
      for (unsigned l = 0; l < ga.model->nvlinks; ++l)
        ga.nvlink_remote[l] = node.gpus[peers[l % peers.size()]].bus_id();
    }
  }
}

void parse_mig(const Ctx& c, const YAML::Node& n, const std::string& path, Gpu& g) {
  c.keys(n, path, {"enabled", "pendingEnabled", "instances"});
  if (g.model->mig.empty()) c.error(n, path, fmt::format("{} is not MIG capable", g.model->name));
  g.mig_enabled = n["enabled"] ? c.get<bool>(n["enabled"], path + ".enabled") : true;
  g.mig_pending = n["pendingEnabled"] ? c.get<bool>(n["pendingEnabled"], path + ".pendingEnabled") : g.mig_enabled;
  g.mig.clear();
  const auto inst = n["instances"];
  if (!inst) return;
  if (!inst.IsSequence()) c.error(inst, path + ".instances", "expected a list");
  if (!g.mig_enabled && inst.size() > 0) c.error(inst, path + ".instances", "MIG instances need mig.enabled: true");
  std::vector<std::pair<const gpu::mig::Shape*, std::optional<unsigned>>> requests;
  std::vector<const MigProfileSpec*> profiles;
  std::vector<std::optional<unsigned>> gi_ids;
  std::vector<Telemetry> telemetries;
  for (size_t i = 0; i < inst.size(); ++i) {
    const auto p = fmt::format("{}.instances[{}]", path, i);
    const auto& e = inst[i];
    c.keys(e, p, {"profile", "start", "gpuInstanceId", "telemetry"});
    if (!e["profile"]) c.error(e, p, "missing profile (e.g. 3g.40gb)");
    const auto name = c.get<std::string>(e["profile"], p + ".profile");
    const MigProfileSpec* found = nullptr;
    const gpu::mig::Shape* shape = nullptr;
    std::vector<std::string> known;
    for (const auto& prof : g.model->mig) {
      const auto* s = [&]() -> const gpu::mig::Shape* {
        for (const auto& sh : gpu::mig::shapes()) {
          if (std::string(sh.key) == prof.shape) return &sh;
        }
        return nullptr;
      }();
      const auto full = gpu::mig::profile_name(s->compute_slices, prof.memory_mib, s->media_engines);
      known.push_back(full);
      if (name == full) {
        found = &prof;
        shape = s;
      }
    }
    if (found == nullptr) {
      c.error(e["profile"], p + ".profile",
              fmt::format("no MIG profile '{}' on {} (profiles: {})", name, g.model->name, fmt::join(known, ", ")));
    }
    profiles.push_back(found);
    std::optional<unsigned> start;
    if (e["start"]) start = c.get<unsigned>(e["start"], p + ".start");
    requests.emplace_back(shape, start);
    gi_ids.push_back(e["gpuInstanceId"] ? std::optional(c.get<unsigned>(e["gpuInstanceId"], p + ".gpuInstanceId"))
                                        : std::nullopt);
    Telemetry t;
    if (const auto tel = e["telemetry"]) {
      // GPM's readings, and those only DCGM serves (per GPU instance too).
      static const std::set<std::string> kInstanceKeys = {
          "grEngineActive", "tensorActive", "dramActive", "pcieTxMiBps", "pcieRxMiBps",
          "smActive",       "smOccupancy",  "fp64Active", "fp32Active",  "fp16Active"};
      if (!tel.IsMap()) c.error(tel, p + ".telemetry", "expected a mapping");
      for (const auto& kv : tel) {
        const auto k = kv.first.as<std::string>();
        if (!kInstanceKeys.contains(k)) {
          c.error(kv.first, p + ".telemetry",
                  fmt::format("unknown instance reading '{}' (grEngineActive, tensorActive, dramActive, pcieTxMiBps, "
                              "pcieRxMiBps, smActive, smOccupancy, fp64Active, fp32Active, fp16Active)",
                              k));
        }
        t.values[k] = c.wave(kv.second, p + ".telemetry." + k);
      }
    }
    telemetries.push_back(std::move(t));
  }
  auto placed = gpu::mig::place(requests);
  if (!placed) c.error(inst, path + ".instances", "impossible MIG layout: " + placed.error().message);
  std::set<unsigned> used_ids;
  for (const auto& id : gi_ids) {
    if (id && !used_ids.insert(*id).second)
      c.error(inst, path + ".instances", fmt::format("duplicate gpuInstanceId {}", *id));
  }
  unsigned next_id = 1;
  for (size_t i = 0; i < placed->size(); ++i) {
    MigInstance m;
    m.shape = (*placed)[i].shape;
    m.profile = profiles[i];
    m.start = (*placed)[i].start;
    m.telemetry = std::move(telemetries[i]);
    if (gi_ids[i]) {
      m.gpu_instance_id = *gi_ids[i];
    } else if (m.shape->compute_slices == 7) {
      m.gpu_instance_id = 0;
    } else {
      while (used_ids.contains(next_id)) ++next_id;
      m.gpu_instance_id = next_id;
      used_ids.insert(next_id);
    }
    m.uuid = mig_uuid(g.uuid, m.gpu_instance_id);
    g.mig.push_back(std::move(m));
  }
}

void parse_processes(const Ctx& c, const YAML::Node& n, const std::string& path, Gpu& g) {
  if (!n.IsSequence()) c.error(n, path, "expected a list");
  g.processes.clear();
  for (size_t i = 0; i < n.size(); ++i) {
    const auto p = fmt::format("{}[{}]", path, i);
    const auto& e = n[i];
    c.keys(e, p,
           {"pid", "usedMemoryMiB", "gpuInstanceId", "computeInstanceId", "smUtil", "memUtil", "encUtil", "decUtil"});
    if (!e["pid"]) c.error(e, p, "missing pid");
    Process proc;
    proc.pid = c.get<unsigned>(e["pid"], p + ".pid");
    if (e["usedMemoryMiB"]) proc.used_memory_mib = c.get<uint64_t>(e["usedMemoryMiB"], p + ".usedMemoryMiB");
    if (e["gpuInstanceId"]) {
      const auto gi = c.get<unsigned>(e["gpuInstanceId"], p + ".gpuInstanceId");
      if (std::none_of(g.mig.begin(), g.mig.end(), [&](const MigInstance& m) { return m.gpu_instance_id == gi; })) {
        c.error(e["gpuInstanceId"], p + ".gpuInstanceId", fmt::format("no MIG GPU instance {} on this GPU", gi));
      }
      proc.gpu_instance_id = gi;
    } else if (g.mig_enabled && !g.mig.empty()) {
      c.error(e, p, "a process on a MIG-enabled GPU needs gpuInstanceId");
    }
    if (e["computeInstanceId"])
      proc.compute_instance_id = c.get<unsigned>(e["computeInstanceId"], p + ".computeInstanceId");
    if (e["smUtil"]) proc.sm_util = c.wave(e["smUtil"], p + ".smUtil");
    if (e["memUtil"]) proc.mem_util = c.wave(e["memUtil"], p + ".memUtil");
    if (e["encUtil"]) proc.enc_util = c.wave(e["encUtil"], p + ".encUtil");
    if (e["decUtil"]) proc.dec_util = c.wave(e["decUtil"], p + ".decUtil");
    g.processes.push_back(proc);
  }
}

void parse_gpu(const Ctx& c, const YAML::Node& n, const std::string& path, Gpu& g) {
  if (n["uuid"]) {
    g.uuid = c.get<std::string>(n["uuid"], path + ".uuid");
    g.uuid_given = true;
    if (!g.uuid.starts_with("GPU-")) c.error(n["uuid"], path + ".uuid", "a GPU UUID starts with 'GPU-'");
  }
  if (n["serial"]) g.serial = c.get<std::string>(n["serial"], path + ".serial");
  if (n["busId"]) {
    const auto s = c.get<std::string>(n["busId"], path + ".busId");
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (std::sscanf(s.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || bus > 0xff) {
      c.error(n["busId"], path + ".busId", fmt::format("'{}' is not a PCI bus id like 00000000:18:00.0", s));
    }
    g.domain = dom;
    g.bus = bus;
  }
  if (n["numaNode"]) g.numa = c.get<unsigned>(n["numaNode"], path + ".numaNode");
  if (n["minorNumber"]) g.minor = c.get<unsigned>(n["minorNumber"], path + ".minorNumber");
  if (n["usedMiB"]) g.base_used_mib = c.get<uint64_t>(n["usedMiB"], path + ".usedMiB");
  if (n["mig"]) parse_mig(c, n["mig"], path + ".mig", g);
  if (n["persistenceMode"]) g.persistence_mode = c.get<bool>(n["persistenceMode"], path + ".persistenceMode");
  if (const auto v = n["virtualizationMode"]) {
    static const std::map<std::string, int> kModes = {
        {"none", 0}, {"passthrough", 1}, {"vgpu", 2}, {"host-vgpu", 3}, {"host-vsga", 4}};
    const auto m = c.get<std::string>(v, path + ".virtualizationMode");
    auto it = kModes.find(m);
    if (it == kModes.end()) {
      c.error(v, path + ".virtualizationMode", fmt::format("'{}': none, passthrough, vgpu, host-vgpu or host-vsga", m));
    }
    g.virtualization_mode = it->second;
  }
  if (const auto f = n["fabric"]) {
    const std::string fp = path + ".fabric";
    if (!f.IsMap()) c.error(f, fp, "expected a mapping with clusterUuid, cliqueId, state, status");
    c.keys(f, fp, {"clusterUuid", "cliqueId", "state", "status"});
    Fabric fab;
    if (f["clusterUuid"]) {
      const auto u = c.get<std::string>(f["clusterUuid"], fp + ".clusterUuid");
      std::string hex;
      for (char ch : u) {
        if (ch != '-') hex.push_back(ch);
      }
      if (hex.size() != 32 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
        c.error(f["clusterUuid"], fp + ".clusterUuid", fmt::format("'{}' is not a UUID", u));
      }
      for (size_t i = 0; i < 16; ++i) fab.cluster_uuid[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
    }
    if (f["cliqueId"]) fab.clique_id = c.get<unsigned>(f["cliqueId"], fp + ".cliqueId");
    if (f["state"]) {
      static const std::map<std::string, unsigned char> kStates = {
          {"not-supported", 0}, {"not-started", 1}, {"in-progress", 2}, {"completed", 3}};
      const auto st = c.get<std::string>(f["state"], fp + ".state");
      auto it = kStates.find(st);
      if (it == kStates.end()) {
        c.error(f["state"], fp + ".state", fmt::format("'{}': not-supported, not-started, in-progress or completed", st));
      }
      fab.state = it->second;
    }
    if (f["status"]) {
      const auto st = c.get<std::string>(f["status"], fp + ".status");
      const int rc = nvml::return_from_name(st.c_str());
      if (rc < 0) c.error(f["status"], fp + ".status", fmt::format("'{}' is not an NVML return code name", st));
      fab.status = rc;
    }
    g.fabric = fab;
  }
  if (n["telemetry"]) {
    const auto t = n["telemetry"];
    if (!t.IsMap()) c.error(t, path + ".telemetry", "expected a mapping");
    for (const auto& kv : t) {
      const auto k = kv.first.as<std::string>();
      if (!kTelemetryKeys.contains(k)) c.error(kv.first, path + ".telemetry", fmt::format("unknown reading '{}'", k));
      g.telemetry.values[k] = c.wave(kv.second, path + ".telemetry." + k);
    }
  }
  if (n["processes"]) parse_processes(c, n["processes"], path + ".processes", g);
}

void parse_faults(const Ctx& c, const YAML::Node& n, Node& node) {
  c.keys(n, "faults", {"init", "lost", "calls", "xids"});
  if (n["init"]) node.init_error = c.error_code(n["init"], "faults.init");
  if (n["lost"]) node.lost = c.index_list(n["lost"], "faults.lost", node.gpus.size());
  if (n["calls"]) {
    const auto calls = n["calls"];
    if (!calls.IsSequence()) c.error(calls, "faults.calls", "expected a list");
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto p = fmt::format("faults.calls[{}]", i);
      c.keys(calls[i], p, {"call", "gpu", "error", "delayMs", "after", "times"});
      if (!calls[i]["call"] || (!calls[i]["error"] && !calls[i]["delayMs"])) {
        c.error(calls[i], p, "needs call and error and/or delayMs");
      }
      CallFault f;
      f.call = c.get<std::string>(calls[i]["call"], p + ".call");
      if (!f.call.starts_with("nvml")) c.error(calls[i]["call"], p + ".call", "expected an NVML symbol name");
      if (calls[i]["gpu"]) f.gpu = c.get<unsigned>(calls[i]["gpu"], p + ".gpu");
      if (calls[i]["after"]) f.after = c.get<unsigned>(calls[i]["after"], p + ".after");
      if (calls[i]["times"]) f.times = c.get<unsigned>(calls[i]["times"], p + ".times");
      if (calls[i]["error"]) f.error = c.error_code(calls[i]["error"], p + ".error");
      if (calls[i]["delayMs"]) {
        f.delay_ms = c.get<unsigned>(calls[i]["delayMs"], p + ".delayMs");
        if (f.delay_ms > 600'000) c.error(calls[i]["delayMs"], p + ".delayMs", "at most 600000 (10 minutes)");
      }
      node.call_faults.push_back(f);
    }
  }
  if (n["xids"]) {
    const auto xs = n["xids"];
    if (!xs.IsSequence()) c.error(xs, "faults.xids", "expected a list");
    for (size_t i = 0; i < xs.size(); ++i) {
      const auto p = fmt::format("faults.xids[{}]", i);
      c.keys(xs[i], p, {"gpu", "xid", "type"});
      if (!xs[i]["gpu"]) c.error(xs[i], p, "missing gpu");
      XidInjection x;
      x.gpu = c.get<unsigned>(xs[i]["gpu"], p + ".gpu");
      if (x.gpu >= node.gpus.size()) c.error(xs[i]["gpu"], p + ".gpu", fmt::format("no GPU {}", x.gpu));
      const auto type = xs[i]["type"] ? c.get<std::string>(xs[i]["type"], p + ".type") : std::string("xid");
      if (type == "xid") {
        x.type = nvml::kEventXidCriticalError;
        if (!xs[i]["xid"]) c.error(xs[i], p, "missing xid");
        x.xid = c.get<uint64_t>(xs[i]["xid"], p + ".xid");
      } else if (type == "sbe") {
        x.type = nvml::kEventSingleBitEccError;
      } else if (type == "dbe") {
        x.type = nvml::kEventDoubleBitEccError;
      } else {
        c.error(xs[i]["type"], p + ".type", "expected xid, sbe or dbe");
      }
      node.xids.push_back(x);
    }
  }
}

Node parse(const Ctx& c, const YAML::Node& root) {
  Node node;
  c.keys(root, "node", {"preset", "driverVersion", "nvmlVersion", "cudaDriverVersion", "gpus", "topology", "faults"});
  std::string nvlink = "none";
  std::optional<std::vector<std::vector<unsigned>>> nvlink_groups;
  const NodePreset* preset = nullptr;
  if (root["preset"]) {
    const auto key = c.get<std::string>(root["preset"], "preset");
    preset = find_node_preset(key);
    if (preset == nullptr) {
      std::vector<std::string> known;
      for (const auto& p : node_presets()) known.emplace_back(p.key);
      c.error(root["preset"], "preset",
              fmt::format("unknown node preset '{}' (known: {})", key, fmt::join(known, ", ")));
    }
    const ModelSpec* m = find_model(preset->model);
    for (unsigned i = 0; i < preset->gpus; ++i) {
      Gpu g = make_gpu(*m, i);
      g.bus = preset->bus[i];
      g.numa = preset->numa[i];
      node.gpus.push_back(std::move(g));
    }
    node.pcie_switches = preset->pcie_switches;
    node.host_bridges = preset->host_bridges;
    nvlink = preset->nvlink;
  }
  if (root["driverVersion"]) node.driver_version = c.get<std::string>(root["driverVersion"], "driverVersion");
  if (root["nvmlVersion"]) node.nvml_version = c.get<std::string>(root["nvmlVersion"], "nvmlVersion");
  if (root["cudaDriverVersion"]) node.cuda_driver_version = c.get<int>(root["cudaDriverVersion"], "cudaDriverVersion");

  if (const auto gpus = root["gpus"]) {
    if (!gpus.IsSequence()) c.error(gpus, "gpus", "expected a list");
    size_t position = 0;
    for (size_t i = 0; i < gpus.size(); ++i) {
      const auto path = fmt::format("gpus[{}]", i);
      const auto& e = gpus[i];
      c.keys(e, path,
             {"model", "count", "index", "uuid", "serial", "busId", "numaNode", "minorNumber", "usedMiB", "mig",
              "telemetry", "processes", "fabric", "virtualizationMode", "persistenceMode"});
      if (preset != nullptr) {
        // With a preset, entries modify the preset's GPUs (by index, else in order).
        if (e["model"] || e["count"]) c.error(e, path, "model/count come from the preset; remove them or the preset");
        const size_t idx = e["index"] ? c.get<size_t>(e["index"], path + ".index") : position;
        if (idx >= node.gpus.size()) c.error(e, path, fmt::format("the preset has no GPU {}", idx));
        parse_gpu(c, e, path, node.gpus[idx]);
        position = idx + 1;
        continue;
      }
      if (e["index"]) c.error(e["index"], path + ".index", "index is only used with a preset");
      if (!e["model"]) c.error(e, path, "missing model (e.g. H100-SXM-80GB)");
      const auto key = c.get<std::string>(e["model"], path + ".model");
      const ModelSpec* m = find_model(key);
      if (m == nullptr) {
        std::vector<std::string> known;
        for (const auto& mm : models()) known.emplace_back(mm.key);
        c.error(e["model"], path + ".model",
                fmt::format("unknown GPU model '{}' (known: {})", key, fmt::join(known, ", ")));
      }
      const unsigned count = e["count"] ? c.get<unsigned>(e["count"], path + ".count") : 1;
      if (count == 0 || count > 64) c.error(e["count"], path + ".count", "must be 1..64");
      if (count > 1 && (e["uuid"] || e["busId"] || e["serial"])) {
        c.error(e, path, "uuid/busId/serial name one GPU; they cannot be used with count > 1");
      }
      for (unsigned k = 0; k < count; ++k) {
        Gpu g = make_gpu(*m, static_cast<unsigned>(node.gpus.size()));
        parse_gpu(c, e, path, g);
        node.gpus.push_back(std::move(g));
      }
    }
  }
  if (node.gpus.empty() && !root["gpus"] && preset == nullptr) {
    c.error(root, "node", "describe the GPUs with 'preset' or 'gpus'");
  }

  if (const auto topo = root["topology"]) {
    c.keys(topo, "topology", {"nvlink", "pcieSwitches", "hostBridges"});
    if (topo["nvlink"]) {
      if (topo["nvlink"].IsSequence()) {
        nvlink_groups = c.groups(topo["nvlink"], "topology.nvlink", node.gpus.size());
      } else {
        nvlink = c.get<std::string>(topo["nvlink"], "topology.nvlink");
        if (nvlink != "nvswitch" && nvlink != "none") {
          c.error(topo["nvlink"], "topology.nvlink", "expected nvswitch, none, or a list of GPU groups");
        }
      }
    }
    if (topo["pcieSwitches"])
      node.pcie_switches = c.groups(topo["pcieSwitches"], "topology.pcieSwitches", node.gpus.size());
    if (topo["hostBridges"])
      node.host_bridges = c.groups(topo["hostBridges"], "topology.hostBridges", node.gpus.size());
  }
  // Unique identities; derived UUIDs differ between models and bus positions, like real ones.
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    auto& g = node.gpus[i];
    if (!g.uuid_given)
      g.uuid = make_uuid("GPU", std::hash<std::string>{}(g.model->key) * 1000003ULL + g.bus * 257ULL + i);
    // A new instance (other profile or place) gets a new UUID, as on real GPUs.
    for (auto& m : g.mig) {
      m.uuid = make_uuid("MIG", std::hash<std::string>{}(g.uuid) ^ (m.gpu_instance_id * 7919ULL) ^
                                    (m.shape->profile_id * 104729ULL) ^ (m.start * 131ULL));
    }
  }
  std::set<std::string> uuids, buses;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (!uuids.insert(node.gpus[i].uuid).second)
      c.error(root["gpus"], "gpus", fmt::format("GPU {} repeats UUID {}", i, node.gpus[i].uuid));
    if (!buses.insert(node.gpus[i].bus_id()).second)
      c.error(root["gpus"], "gpus", fmt::format("GPU {} repeats bus id {}", i, node.gpus[i].bus_id()));
  }
  if (nvlink_groups) {
    for (const auto& grp : *nvlink_groups) {
      for (unsigned i : grp) {
        if (node.gpus[i].model->nvlinks == 0) {
          c.error(root["topology"]["nvlink"], "topology.nvlink",
                  fmt::format("GPU {} ({}) has no NVLink", i, node.gpus[i].model->name));
        }
      }
    }
    wire_groups(node, *nvlink_groups);
  } else if (nvlink == "nvswitch") {
    wire_nvswitch(node);
  } else {
    for (auto& g : node.gpus) g.nvlink_remote.assign(g.model->nvlinks, "");
  }
  if (const auto f = root["faults"]) parse_faults(c, f, node);
  return node;
}

bool same_group(const std::vector<std::vector<unsigned>>& groups, unsigned a, unsigned b) {
  for (const auto& g : groups) {
    if (std::find(g.begin(), g.end(), a) != g.end() && std::find(g.begin(), g.end(), b) != g.end()) return true;
  }
  return false;
}

}  // namespace

std::string mig_uuid(const std::string& gpu_uuid, unsigned gpu_instance_id) {
  return make_uuid("MIG", std::hash<std::string>{}(gpu_uuid) ^ (gpu_instance_id * 7919ULL));
}

double Wave::at(double t) const {
  if (period_s <= 0) return min;
  return min + (max - min) * 0.5 * (1.0 - std::cos(2.0 * std::numbers::pi * t / period_s));
}

double Wave::integral(double t) const {
  if (period_s <= 0) return min * t;
  const double w = 2.0 * std::numbers::pi / period_s;
  return min * t + (max - min) * 0.5 * (t - std::sin(w * t) / w);
}

std::string Gpu::bus_id() const { return fmt::format("{:08X}:{:02X}:00.0", domain, bus); }

int Node::topology_level(unsigned a, unsigned b) const {
  if (a == b) return nvml::kTopologyInternal;
  if (same_group(pcie_switches, a, b)) return nvml::kTopologySingle;
  if (same_group(host_bridges, a, b)) return nvml::kTopologyHostBridge;
  if (gpus[a].numa == gpus[b].numa) return nvml::kTopologyNode;
  return nvml::kTopologySystem;
}

Result<Node> parse_node(const std::string& yaml_text, const std::string& source) {
  Ctx c{source};
  if (auto ok = check_yaml(yaml_text, source, {kMaxNodeFileBytes, 200'000, 32}); !ok) return std::unexpected(ok.error());
  try {
    const YAML::Node root = YAML::Load(yaml_text);
    if (!root || root.IsNull()) {
      return fail(ErrorCode::kInvalidArgument,
                  "{}: the node description is empty (for the built-in node write `preset: hgx-h100-8`, or unset "
                  "KGPU_FAKE_NVML_CONFIG)",
                  source);
    }
    return parse(c, root);
  } catch (const ParseError& e) {
    return std::unexpected(Error{ErrorCode::kInvalidArgument, e.message});
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, "{}:{}: {}", source, e.mark.line + 1, e.msg);
  }
}

Node default_node() {
  auto n = parse_node(
      "preset: hgx-h100-8\n"
      "gpus:\n"
      "  - telemetry: {gpuUtil: {min: 20, max: 90, periodSeconds: 120}, powerW: {min: 180, max: 610, periodSeconds: "
      "120}}\n"
      "    processes: [{pid: 4101, usedMemoryMiB: 61440, smUtil: 70}]\n",
      "<embedded default>");
  return std::move(*n);
}

}  // namespace kgpu::fake
