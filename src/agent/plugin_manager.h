// The agent's device-plugin side: turns the config and the node's GPUs into a sharing plan,
// serves one kubelet device plugin per advertised resource, and keeps them right while things
// change underneath:
//
// - kubelet restarts (kubelet.sock re-created, or our sockets deleted): serve and register again
//   within one poll interval (100 ms);
// - config changes (file rewritten or ConfigMap symlink swap, or with a config directory another
//   config chosen by the node's label): re-plan, restart and re-register only the resources whose
//   advertisement changed; a config that does not parse, validate or fit this node, or a label
//   naming no config, is rejected with file, line and reason, and the last good one keeps running;
// - MIG layout changes: re-plan like a config change;
// - health: critical XIDs (minus the ignored ones) mark devices Unhealthy; a lost GPU is
//   Unhealthy; the recovery rule (docs/device-plugin.md) returns a device to Healthy.
//
// It also writes the CDI spec for our devices and the GPU Feature Discovery labels.
//
// With API access (DevicePluginOptions::cluster), Allocate honours the scheduler's GPU assignment
// and never gives a device that is really in use; the manager keeps the allocation table (and its
// checkpoint) and publishes the node report (docs/scheduler.md, "The node honours the choice").
//
// The work is split by job: plugin_manager.cc (life cycle, config, kubelet sockets and
// registration, status and metrics), plugin_health.cc (XID events, probes, the recovery rule,
// GPU layout changes), plugin_assign.cc (Allocate with API access, the allocation table, the node
// report) and node_files.cc (what the manager writes on the node: CDI spec, labels, and the host
// facts it reads for them).
//
// Thread safety: start()/stop() from one thread; metrics_text() and status() from any thread.
// Internally: one control thread, the NVML event thread, one report thread (with API access), and
// gRPC's threads (Allocate and GetPreferredAllocation read the current plan under the manager's
// lock; Allocates with API access are serialised, and may wait for one LIST of the node's pods).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/allocation_table.h"
#include "agent/assignment.h"
#include "agent/cluster_view.h"
#include "agent/config_select.h"
#include "agent/health.h"
#include "agent/mps.h"
#include "common/clock.h"
#include "gpu/node.h"
#include "kubelet/device_plugin.h"
#include "kubelet/pod_resources.h"
#include "sharing/allocate.h"
#include "sharing/config.h"
#include "sharing/plan.h"

namespace kgpu::agent {

// What the CDI specs and Allocate need to know about the host (sharing::HostFacts): device nodes,
// MIG capability minors (<proc_root>/driver/nvidia-caps/mig-minors), driver files, DRM nodes (from
// <pci_devices_dir>), extra device classes and NVIDIA's hook tool. Shared with the DRA driver.
sharing::HostFacts node_host_facts(const sharing::Config& c, const gpu::Inventory& inv, const std::string& proc_root,
                                   const std::string& pci_devices_dir);

struct DevicePluginOptions {
  std::string plugin_dir = kubelet::kDefaultDevicePluginDir;
  std::string config_file;  // "" = defaults
  // A directory of named configs (config_dir.dir "" = not used), one chosen per node by its label
  // (read through `cluster`; without it the default and fallbacks only). It wins over config_file.
  ConfigDirOptions config_dir;
  sharing::Overrides overrides;
  std::string cdi_root = "/var/run/cdi";  // where the CDI spec goes ("" = do not write)
  std::string proc_root = "/proc";        // for /proc/driver/nvidia-caps/mig-minors
  std::string pci_devices_dir = "/sys/bus/pci/devices";  // PCI class of each GPU (gpu.mode label)
  bool labels = true;                     // write the GFD labels file
  std::string node_name;

  // DP_DISABLE_HEALTHCHECKS: "all" or "xids" disables XID health; otherwise extra XIDs to ignore.
  std::string disable_health_checks;
  // DP_ENABLE_HEALTHCHECKS: XIDs to watch even though NVIDIA ignores them by default.
  std::string enable_health_checks;
  // A device marked Unhealthy returns to Healthy after this long without a new critical XID,
  // once it answers NVML and has no row remap pending. 0 = never (NVIDIA's behaviour).
  std::chrono::milliseconds health_recovery{std::chrono::minutes(10)};

  std::chrono::milliseconds poll_interval{100};          // sockets
  std::chrono::milliseconds config_poll_interval{500};   // config file
  std::chrono::milliseconds health_interval{5000};       // NVML probes, MIG layout
  std::chrono::milliseconds register_timeout{5000};

  MpsControl* mps = nullptr;  // not owned; null = run nvidia-cuda-mps-control (RealMpsControl)

  // API access (not owned; must outlive the manager). Null: Allocate gives the kubelet's device
  // IDs, as NVIDIA's plugin does, and there is no allocation table or node report.
  ClusterView* cluster = nullptr;
  // With API access: the kubelet's PodResources socket, read for the table and the report ("" =
  // not read: entries are then never pruned and unidentified ones stay unnamed).
  std::string pod_resources_socket;
  std::chrono::milliseconds pod_resources_timeout{2000};
  // How often the node report is rebuilt (and patched onto the Node when it changed); an
  // allocation asks for one at once.
  std::chrono::milliseconds report_interval{30000};
  // A table entry whose container PodResources does not list is dropped this long after its
  // Allocate (the kubelet lists a container once it is admitted).
  std::chrono::milliseconds allocation_grace{60000};
  // Called on the NVML event thread with every XID or GPU-lost event, before the health rules
  // (remediation's classifier, agent/remediation_service.h); must not block. Null: none.
  std::function<void(const gpu::Event&)> on_fault;
  // Time for every interval above, the recovery rule and the labels' timestamp (not owned; must
  // outlive the manager). Tests pass a FakeClock.
  Clock* clock = &Clock::real();
};

// A directory's entries, sorted by name, with each symbolic link's target (sharing::ListDir over
// the real filesystem; empty when the directory cannot be read). At most 65,536 entries.
std::vector<sharing::DirEntry> list_driver_dir(const std::string& dir);

// failOnInitError: the flag or variable when set, else the config text's `flags.failOnInitError`
// (true when the text does not parse), else true.
bool fails_on_init_error(const DevicePluginOptions& options, const std::string& config_text);

// The config file the options name before the node's label is read: config_file, or in a config
// directory the default or fallback choice ("" = the built-in defaults, or no choice).
std::string initial_config_file(const DevicePluginOptions& options);

class DevicePluginManager {
 public:
  DevicePluginManager(gpu::NodeGpus& node, DevicePluginOptions options);
  ~DevicePluginManager();

  // Loads the config and plans. An error here (bad config, unusable MIG layout, NVML failing) is
  // returned; the caller decides (failOnInitError). On success the control thread runs.
  Result<void> start();
  void stop();

  // Prometheus text with the kgpu_device_plugin_* families (docs/device-plugin.md).
  std::string metrics_text() const;

  struct ResourceStatus {
    std::string name, socket;
    bool registered = false;
    size_t devices = 0, healthy = 0;
  };
  struct Status {
    uint64_t config_generation = 0;  // bumped on every applied config
    uint64_t health_checks = 0;      // completed health probe rounds (check_health)
    std::string last_reload_error;   // "" after a successful reload
    // The config in use: its name in the config directory (else the file's path; "" = the built-in
    // defaults) and what chose it ("node-label", "default", "named", "single", "empty",
    // "config-file" or "none").
    std::string config_name, config_selected_by;
    std::string cdi_error;  // why the CDI specs were last not written ("" = written, or none needed)
    std::string invalid_layout;  // why migStrategy single cannot use the MIG layout ("" = it can)
    std::vector<ResourceStatus> resources;
  };
  Status status() const;

  // Removes the labels file this manager writes (the uninstall rule, src/agent/uninstall.h). After
  // stop(); false when there was none to remove (or labels are off). Errors are logged.
  bool remove_labels();

  // Remediation: stop / start advertising GPU `uuid` (and its MIG devices): Unhealthy to the
  // kubelet at once, whatever the recovery rule says, until release(). Any thread.
  void withhold(const std::string& uuid, const std::string& reason);
  void release(const std::string& uuid);

  // PodResources entries with the devices the containers really got (the allocation table);
  // unchanged without API access. Any thread.
  std::vector<kubelet::ContainerDevice> translate_devices(const std::vector<kubelet::ContainerDevice>& listed) const;

 private:
  Result<void> load_and_apply(bool initial);
  Result<ConfigChoice> choose_config_now() const;  // the node's label (when known) and the directory
  bool check_selection();                          // control thread; false: keep the config in use
  void apply_plan(sharing::Plan plan, sharing::Config config, gpu::Inventory inventory);
  void set_invalid_layout(const std::optional<std::string>& reason);  // takes mu_; logs changes
  void control_loop();
  void check_sockets();
  void check_config();
  void check_health();
  void write_labels();
  void write_cdi_spec();
  void on_event(const gpu::Event& e);
  void push_devices();  // takes mu_
  std::vector<kubelet::DeviceState> device_states(const sharing::PlannedResource& r) const;  // mu_ held
  bool facts_nodes_differ(const sharing::HostFacts& facts) const;                            // mu_ held
  void start_event_watcher();  // control thread (or start())
  bool register_one(kubelet::DevicePluginServer& server);
  // plugin_assign.cc
  Result<std::vector<kubelet::ContainerAllocation>> allocate_assigned(
      const std::string& resource, const std::vector<std::vector<std::string>>& requests);
  void load_table();           // start()
  void report_loop();          // the report thread
  void refresh_allocations();  // PodResources, reconcile, checkpoint, node report
  void request_report();
  std::string checkpoint_path() const;
  // The node's facts for the CDI spec and Allocate; `inv` gives the driver version and the GPUs'
  // PCI bus ids (DRM nodes).
  sharing::HostFacts host_facts(const sharing::Config& c, const gpu::Inventory& inv) const;
  // imex.required with a configured channel missing: the error; else logs missing channels.
  Result<void> check_imex(const sharing::Config& c, const sharing::HostFacts& facts) const;

  gpu::NodeGpus& node_;
  DevicePluginOptions opt_;
  Clock& clock_;
  std::unique_ptr<MpsControl> own_mps_;
  MpsControl* mps_ = nullptr;

  mutable std::mutex mu_;
  sharing::Config config_;     // last good
  sharing::Plan plan_;         // from config_
  gpu::Inventory inventory_;   // the plan's
  sharing::HostFacts host_;
  // The devices' health (agent/health.h).
  HealthBook health_;
  std::map<std::string, std::unique_ptr<kubelet::DevicePluginServer>> servers_;  // by resource
  std::map<std::string, bool> registered_;
  uint64_t generation_ = 0;
  std::string last_reload_error_;
  std::string cdi_error_;  // why the CDI specs were last not written ("" = written)
  std::string invalid_layout_;  // single_layout_problem() of the plan in use ("" = none)
  ConfigChoice applied_;  // what chose the config in use
  std::optional<std::string> last_rejected_text_;  // the config text last rejected (not retried)
  uint64_t reloads_ok_ = 0, reloads_failed_ = 0, registrations_ = 0, allocations_ = 0, allocation_errors_ = 0;
  uint64_t health_checks_ = 0;
  std::atomic<uint64_t> unique_{0};

  // Control-thread state.
  struct FileStamp {
    unsigned long inode = 0;
    long long mtime_ns = 0;
    long long size = -1;
    bool operator==(const FileStamp&) const = default;
  };
  static FileStamp stamp(const std::string& path);  // stat() following symlinks; {} when absent
  FileStamp config_stamp_, kubelet_stamp_;
  std::string config_path_;  // the config file in use or chosen ("" = the built-in defaults)
  ConfigChoice selected_;    // the choice config_path_ comes from
  std::string selection_error_;  // why the last choice failed ("" = it did not); logged once
  std::string config_text_;          // the text of the config in use
  std::string config_text_attempt_;  // the text last read (for failOnInitError at start)
  std::map<std::string, std::string> serve_error_;  // resource -> why serving failed ("" = serving)
  Clock::SteadyTime next_config_check_{}, next_full_config_read_{}, next_health_{}, next_labels_{}, next_register_{};
  bool labels_dir_missing_logged_ = false;

  // With API access. assign_mu_ serialises those Allocates (candidate choice and table update are
  // one step); table_mu_ guards the table and the last PodResources reading (lock order:
  // assign_mu_, then mu_ or table_mu_, never both of those).
  std::mutex assign_mu_;
  mutable std::mutex table_mu_;
  AllocationTable table_;
  // Containers whose assignment was refused (guarded by assign_mu_): the kubelet fails their pod,
  // but until the informer shows that they must not be matched to the next Allocate.
  Served refused_;
  std::vector<kubelet::ContainerDevice> listed_;
  std::unique_ptr<kubelet::PodResourcesClient> pod_resources_;
  std::string last_report_;  // report thread: the last report patched (observedAt left out)
  bool report_requested_ = false;  // guarded by stop_mu_
  std::thread report_thread_;

  std::unique_ptr<gpu::EventWatcher> events_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  bool dirty_ = false;     // guarded by stop_mu_: health changed, push lists now
  std::thread thread_;
};

}  // namespace kgpu::agent
