#include "agent/mig_manager.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>

#include "agent/node_pods.h"
#include "agent/plugin_manager.h"
#include "common/json_guard.h"
#include "common/log.h"
#include "gpu/mig_config.h"
#include "k8s/api/json.h"

namespace kgpu::agent {

namespace {

namespace mig = gpu::mig;

// The operand gates NVIDIA's manager pauses, less the three operands this agent is itself
// (device-plugin, gpu-feature-discovery, dcgm-exporter): its DaemonSet's affinity leaves a node
// whose gate reads paused-for-mig-change, so pausing them would stop the agent mid-change; it
// withholds the GPUs it changes instead, and its labels and metrics follow the new layout.
constexpr const char* kOperands[] = {"nvidia.com/gpu.deploy.dcgm", "nvidia.com/gpu.deploy.nvsm",
                                     "nvidia.com/gpu.deploy.client"};

// An exclusive flock held while it lives; not held when the file cannot be opened or is locked.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    held_ = fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) == 0;
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

std::string label_of(const nlohmann::json& node, const std::string& key) {
  return k8s::api::text(node, {"metadata", "labels", key.c_str()});
}

// The change-in-progress annotation: small and shallow (it lists label names).
constexpr size_t kMaxMigAnnotationBytes = 64 * 1024;
constexpr int kMaxAnnotationDepth = 8;

}  // namespace

MigManager::MigManager(gpu::NodeGpus& node, DevicePluginManager& plugins, kube::Client& client, ClusterView& view,
                       MigManagerOptions options)
    : node_(node), plugins_(plugins), client_(client), view_(view), opt_(std::move(options)), clock_(*opt_.clock) {
  kube::EventRecorderOptions eo;
  eo.reporting_controller = "kgpu.io/agent";
  eo.reporting_instance = view_.node_name();
  eo.clock = &clock_;
  events_ = std::make_unique<kube::EventRecorder>(client_, eo);
}

MigManager::~MigManager() { stop(); }

void MigManager::start() {
  log::info("MIG manager: watching " + std::string(kMigConfigLabel) +
            (opt_.config_file.empty() ? " (the built-in default configs)" : " (configs from " + opt_.config_file + ")"));
  thread_ = std::thread([this] { run(); });
}

void MigManager::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (events_) events_->flush(std::chrono::seconds(1));
}

void MigManager::run() {
  while (true) {
    round();
    std::unique_lock lock(mu_);
    if (clock_.wait_for(cv_, lock, opt_.interval, [&] { return stopping_; })) return;
  }
}

bool MigManager::patch_labels(const nlohmann::json& labels) {
  auto r = client_.patch(kube::resources::kNodes, "", view_.node_name(), kube::PatchType::kMerge,
                         {{"metadata", {{"labels", labels}}}});
  if (!r) log::warn("MIG manager: labelling the node: " + r.error().text());
  return static_cast<bool>(r);
}

void MigManager::restore_operands() {
  if (paused_.empty()) return;
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& k : paused_) labels[k] = "true";
  if (patch_labels(labels)) {
    log::info(fmt::format("MIG manager: operands restored: {}", fmt::join(paused_, ", ")));
    paused_.clear();
    (void)view_.annotate_node(kAnnotationMigManager, nlohmann::json{{"paused", nlohmann::json::array()}}.dump());
  }
}

void MigManager::finish(const std::string& state, const std::string& error) {
  for (const auto& uuid : withheld_) plugins_.release(uuid);
  withheld_.clear();
  restore_operands();
  // The reason first: whoever sees the state sees why.
  (void)view_.annotate_node(kAnnotationMigError, error);
  patch_labels({{kMigStateLabel, state}});
  const std::string note =
      error.empty() ? fmt::format("MIG layout {} applied", handled_) : fmt::format("MIG layout {}: {}", handled_, error);
  log::info("MIG manager: " + note);
  events_->record({"v1", "Node", "", view_.node_name(), node_uid_}, error.empty() ? "Normal" : "Warning",
                  error.empty() ? "MigConfigApplied" : "MigConfigFailed", "ConfigureMIG", note);
}

void MigManager::round() {
  // The node informer's labels say when there is something to do; the Node is read only then (and
  // once at start, for a change cut short).
  if (resumed_) {
    const auto labels = view_.node_labels();
    if (labels) {
      const auto it = labels->find(kMigConfigLabel);
      if (it == labels->end() || it->second.empty() || it->second == handled_) return;
    }
  }
  auto node = client_.get(kube::resources::kNodes, "", view_.node_name());
  if (!node) return;  // tried again next round
  node_uid_ = k8s::api::text(*node, {"metadata", "uid"});
  if (!resumed_) {
    // A change cut short (the agent restarted mid-change): the operands it paused come back first.
    resumed_ = true;
    if (const std::string* note = k8s::api::string_at(*node, {"metadata", "annotations", kAnnotationMigManager})) {
      nlohmann::json j;
      if (note->size() <= kMaxMigAnnotationBytes && json_depth_within(*note, kMaxAnnotationDepth)) {
        j = nlohmann::json::parse(*note, nullptr, false);
      } else {
        log::warn("MIG manager: the node's annotation is too large or too deep to read; the operands it lists stay "
                  "paused",
                  {log::kv("annotation", kAnnotationMigManager), log::kv("bytes", note->size())});
      }
      if (const nlohmann::json* paused = k8s::api::find(j, {"paused"}); paused != nullptr && paused->is_array()) {
        for (const auto& k : *paused) {
          if (k.is_string() && label_of(*node, k.get<std::string>()) == kPausedForMigChange) paused_.insert(k.get<std::string>());
        }
      }
      if (!paused_.empty()) log::warn("MIG manager: a change was cut short; restoring its paused operands");
      restore_operands();
    }
  }
  const std::string want = label_of(*node, kMigConfigLabel);
  if (want.empty() || want == handled_) return;
  change(want, *node);
}

void MigManager::change(const std::string& name, const nlohmann::json& node) {
  FileLock lock(opt_.lock_file);
  if (!lock.held()) {
    log::warn(fmt::format("MIG manager: {} is held by another MIG change; trying again", opt_.lock_file));
    return;
  }
  handled_ = name;
  // The config and each GPU's target; nothing is touched before they are known to fit.
  auto inv = node_.inventory();
  if (!inv) return finish("failed", "reading the GPUs: " + inv.error().message);
  std::vector<mig::GpuId> ids;
  std::vector<mig::Offer> offers;
  for (const auto& g : inv->gpus) {
    ids.push_back({g.index, g.pci.device_id << 16 | g.pci.vendor_id});
    if (offers.empty()) {
      if (auto o = mig::offers(node_, g.index)) offers = std::move(*o);
    }
  }
  Result<mig::ConfigFile> file = mig::default_configs(offers);
  if (!opt_.config_file.empty()) {
    file = mig::load_config_file(opt_.config_file);
  }
  if (!file) return finish("failed", file.error().message);
  auto targets = mig::select(*file, name, ids);
  if (!targets) return finish("failed", targets.error().message);
  auto plan = mig::apply(node_, *targets, true);
  if (!plan) return finish("failed", plan.error().message);
  std::vector<mig::Target> changing;
  std::vector<std::string> problems;
  for (size_t k = 0; k < plan->size(); ++k) {
    if (!(*plan)[k].error.empty()) problems.push_back((*plan)[k].error);
    if ((*plan)[k].changed) changing.push_back((*targets)[k]);
  }
  if (!problems.empty()) return finish("failed", fmt::format("{}", fmt::join(problems, "; ")));
  if (changing.empty()) {
    if (label_of(node, kMigStateLabel) != "success") finish("success", "");
    else log::info("MIG manager: " + name + " is already applied");
    return;
  }
  // Pending: operands paused, the GPUs to change withheld and emptied. What is paused is written
  // down first (a restarted agent restores it), then the state and the paused operands in one
  // patch: whoever sees pending sees them paused.
  nlohmann::json pending = {{kMigStateLabel, "pending"}};
  for (const char* k : kOperands) {
    if (label_of(node, k) == "true") {
      pending[k] = kPausedForMigChange;
      paused_.insert(k);
    }
  }
  (void)view_.annotate_node(kAnnotationMigManager, nlohmann::json{{"config", name}, {"paused", paused_}}.dump());
  patch_labels(pending);
  std::vector<std::string> uuids;  // the changing GPUs and their MIG devices
  for (const auto& t : changing) {
    const auto it = std::find_if(inv->gpus.begin(), inv->gpus.end(), [&](const auto& g) { return g.index == t.index; });
    if (it == inv->gpus.end()) continue;  // not in the inventory: apply() reports it
    const auto& g = *it;
    plugins_.withhold(g.uuid, "MIG layout " + name);
    withheld_.insert(g.uuid);
    uuids.push_back(g.uuid);
    for (const auto& m : g.mig_devices) uuids.push_back(m.uuid);
  }
  const auto deadline = clock_.steady_now() + opt_.drain_timeout;
  while (true) {
    auto pods = view_.list_pods();
    std::vector<health::PodRef> holding;
    if (pods) {
      for (const auto& p : *pods) {
        if (!pod_finished(p) && pod_uses_any(p, uuids)) holding.push_back(pod_ref(p));
      }
    }
    if (pods && holding.empty()) break;
    if (clock_.steady_now() >= deadline) {
      return finish("failed", pods ? fmt::format("timed out after {} s waiting for the pods on the GPUs to change to leave: {}",
                                                 std::chrono::duration_cast<std::chrono::seconds>(opt_.drain_timeout).count(),
                                                 pod_names(holding))
                                   : "listing the node's pods: " + pods.error().message);
    }
    if (opt_.evict) {
      for (const auto& p : holding) (void)evict_pod(client_, p);
    }
    std::unique_lock l(mu_);
    if (clock_.wait_for(cv_, l, std::chrono::milliseconds(200), [&] { return stopping_; })) {
      l.unlock();
      return finish("failed", "the agent stopped during the change");
    }
  }
  auto done = mig::apply(node_, changing);
  if (!done) return finish("failed", done.error().message);
  for (const auto& c : *done) {
    if (!c.error.empty()) problems.push_back(c.error);
  }
  if (!problems.empty()) return finish("failed", fmt::format("{}", fmt::join(problems, "; ")));
  finish("success", "");
}

}  // namespace kgpu::agent
