// The simulated node the fake serves: read from $KGPU_FAKE_NVML_CONFIG (else an embedded 8x H100
// node) and re-read whenever the file changes, so a test can change telemetry, processes and MIG
// layout, lose a GPU, make a call fail, or append an XID while a program runs. A new file that
// does not parse is reported on stderr and ignored (the last good node stays). Handles given out
// stay stable across reloads.
#include <fmt/format.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/files.h"
#include "common/log.h"
#include "common/yaml_load.h"
#include "fake_nvml.h"

namespace kgpu::fake_nvml {

namespace {

constexpr const char* kConfigEnv = "KGPU_FAKE_NVML_CONFIG";
constexpr const char* kStateEnv = "KGPU_FAKE_NVML_STATE";

}  // namespace

Fake::~Fake() {
  for (auto* s : sets) delete s;
}

void Fake::reset() {
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
  mig_overrides.clear();
  fault_hits.clear();
  drained.clear();
  removed.clear();
  persistence.clear();
  resets.clear();
}

void Fake::diagnose(const std::string& message) const {
  kgpu::log::configure_from_environment();
  kgpu::log::error(loaded ? message + " (keeping the previous node)" : message, {kgpu::log::kv("file", path)});
}

bool Fake::refresh() {
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

void Fake::load_mig_state() {
  const char* env = std::getenv(kStateEnv);
  state_path = env != nullptr ? env : "";
  if (state_path.empty()) return;
  auto text = kgpu::read_file_limited(state_path, 1 << 20);
  if (!text) return;  // none yet
  auto loaded = kgpu::load_yaml(*text, state_path, {1 << 20, 10'000, 8});
  if (!loaded) {
    diagnose(fmt::format("fake NVML: MIG state: {} (ignored)", loaded.error().message));
    return;
  }
  try {
    const YAML::Node root = *loaded;
    for (const auto& g : root["gpus"]) {
      const auto index = g["index"].as<unsigned>();
      if (index >= node.gpus.size()) continue;
      MigOverride o;
      o.enabled = g["enabled"].as<bool>();
      o.pending = g["pending"].as<bool>();
      for (const auto& i : g["instances"]) {
        MigInstance m;
        const auto key = i["shape"].as<std::string>();
        for (const auto& s : kgpu::gpu::mig::shapes()) {
          if (key == s.key) m.shape = &s;
        }
        for (const auto& p : node.gpus[index].model->mig) {
          if (m.shape != nullptr && key == p.shape) m.profile = &p;
        }
        if (m.shape == nullptr || m.profile == nullptr) throw std::runtime_error("unknown shape " + key);
        m.start = i["start"].as<unsigned>();
        m.gpu_instance_id = i["gpuInstanceId"].as<unsigned>();
        m.has_ci = i["computeInstance"].as<bool>();
        m.uuid = mig_uuid(node.gpus[index].uuid, m.gpu_instance_id);
        o.instances.push_back(std::move(m));
      }
      mig_overrides[index] = std::move(o);
    }
  } catch (const std::exception& e) {
    diagnose(fmt::format("fake NVML: MIG state {}: {} (ignored)", state_path, e.what()));
    mig_overrides.clear();
  }
}

void Fake::save_mig_state() const {
  if (state_path.empty()) return;
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "gpus" << YAML::Value << YAML::BeginSeq;
  for (const auto& [index, o] : mig_overrides) {
    out << YAML::BeginMap << YAML::Key << "index" << YAML::Value << index << YAML::Key << "enabled" << YAML::Value
        << o.enabled << YAML::Key << "pending" << YAML::Value << o.pending << YAML::Key << "instances" << YAML::Value
        << YAML::BeginSeq;
    for (const auto& m : o.instances) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "shape" << YAML::Value << m.shape->key << YAML::Key << "start"
          << YAML::Value << m.start << YAML::Key << "gpuInstanceId" << YAML::Value << m.gpu_instance_id << YAML::Key
          << "computeInstance" << YAML::Value << m.has_ci << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  (void)kgpu::write_file_atomically(state_path, std::string(out.c_str()) + "\n");
}

void Fake::apply(Node n, bool first) {
  const size_t old_xids = first ? n.xids.size() : xids_seen;
  std::vector<std::string> old_layout(node.gpus.size());
  for (size_t i = 0; i < node.gpus.size(); ++i) old_layout[i] = layout_key(node.gpus[i]);
  node = std::move(n);
  loaded = true;
  fault_hits.clear();
  if (first) load_mig_state();
  for (const auto& [i, o] : mig_overrides) {
    if (i >= node.gpus.size()) continue;
    node.gpus[i].mig_enabled = o.enabled;
    node.gpus[i].mig_pending = o.pending;
    node.gpus[i].mig = o.instances;
  }
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
      arena.push_back(Handle{static_cast<unsigned>(i), static_cast<int>(k), mig_generation[i],
                             node.gpus[i].mig[k].gpu_instance_id});
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

void Fake::mig_changed(unsigned gpu) {
  const auto& g = node.gpus[gpu];
  mig_overrides[gpu] = MigOverride{g.mig_enabled, g.mig_pending, g.mig};
  save_mig_state();
  std::vector<Handle*> handles;
  for (size_t k = 0; k < g.mig.size(); ++k) {
    Handle* h = nullptr;
    for (auto* old : mig_handles[gpu]) {
      if (old->gpu_instance_id == g.mig[k].gpu_instance_id) h = old;
    }
    if (h == nullptr) {
      arena.push_back(Handle{gpu, static_cast<int>(k), mig_generation[gpu], g.mig[k].gpu_instance_id});
      h = &arena.back();
    }
    h->mig = static_cast<int>(k);
    handles.push_back(h);
  }
  // Handles of destroyed instances stay in the arena but find no instance of their id.
  mig_handles[gpu] = std::move(handles);
}

std::string Fake::layout_key(const Gpu& g) {
  std::string k = g.uuid + (g.mig_enabled ? "+" : "-");
  for (const auto& m : g.mig) k += fmt::format("{}@{}#{}{};", m.shape->key, m.start, m.gpu_instance_id, m.has_ci ? "" : "-ci");
  return k;
}

Fake& fake() {
  static Fake f;
  return f;
}

}  // namespace kgpu::fake_nvml
