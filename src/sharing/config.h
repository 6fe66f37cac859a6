// The device plugin's configuration: NVIDIA k8s-device-plugin's `version: v1` config file
// (flags, resources, sharing), with NVIDIA's precedence (command-line flag, then environment
// variable, then file, then default).
//
// parse_config() accepts every file NVIDIA's plugin accepts for the keys listed in
// docs/device-plugin.md; a document it cannot use is an error naming the source, line and field.
// Keys it does not know are reported as warnings (NVIDIA ignores them), never silently dropped.
//
// kgpu extension: per-resource `devices` and `rename` in the sharing section are honoured
// (NVIDIA parses and discards them), so GPUs of one node can have different replica counts.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace kgpu::sharing {

// Limits no real cluster reaches (docs/device-plugin.md, "Limits"), checked before anything is
// allocated for what they bound; crossing one is an error naming the file, line and field, and on
// a hot reload the last good config keeps serving.
inline constexpr size_t kMaxConfigBytes = 1 << 20;       // a ConfigMap holds at most 1 MiB of data
inline constexpr size_t kMaxConfigNodes = 20'000;        // YAML nodes, aliases expanded
inline constexpr size_t kMaxConfigDepth = 32;            // YAML nesting
inline constexpr long long kMaxReplicas = 1024;          // replicas of one GPU
inline constexpr long long kMaxMpsReplicas = 100;        // MPS: 100/replicas % of the SMs, at least 1
inline constexpr size_t kMaxSharedResources = 64;        // entries of one sharing section
inline constexpr size_t kMaxListEntries = 1024;          // a devices list, resources.gpus/mig
inline constexpr size_t kMaxAdvertisedDevices = 16'384;  // device IDs over all resources of a node
inline constexpr long long kMaxImexChannel = 2047;       // the driver's channel minors (NVreg_ImexChannelCount)
inline constexpr size_t kMaxWarnings = 20;               // warnings listed; the rest are counted

enum class MigStrategy { kNone, kSingle, kMixed };
enum class ListStrategy { kEnvvar, kVolumeMounts, kCdiAnnotations, kCdiCri };
enum class IdStrategy { kUuid, kIndex };
enum class SharedPolicy { kDistributed, kPacked };
enum class SharingKind { kNone, kTimeSlicing, kMps };

const char* mig_strategy_name(MigStrategy s);     // none | single | mixed
const char* list_strategy_name(ListStrategy s);   // envvar | volume-mounts | cdi-annotations | cdi-cri
const char* sharing_kind_name(SharingKind k);     // none | time-slicing | mps (GFD's gpu.sharing-strategy)

// Which devices a sharing rule applies to: all, the first `count`, or a list of GPU indices
// ("0"), MIG devices ("0:1" = GPU 0, MIG device slot 1) and UUIDs ("GPU-...", "MIG-...").
struct DeviceSelector {
  bool all = true;
  std::optional<int> count;
  std::vector<std::string> ids;
};

struct ReplicatedResource {
  std::string name;    // nvidia.com/gpu, nvidia.com/mig-1g.10gb
  std::string rename;  // advertised name ("" = name, or name + ".shared" with renameByDefault)
  DeviceSelector devices;
  int replicas = 0;
  int line = 0;  // where the entry starts in the config file (for errors about it later)
};

struct Sharing {
  SharingKind kind = SharingKind::kNone;
  bool rename_by_default = false;
  bool fail_requests_greater_than_one = false;  // forced true for MPS
  std::vector<ReplicatedResource> resources;
};

// `resources.gpus[]` / `resources.mig[]` entries: validated, then ignored with a warning, as
// NVIDIA's plugin does ("not yet supported"), so a copied config never renames resources.
struct NamedResource {
  std::string pattern;
  std::string name;
};

struct Config {
  std::string source;  // file name or "defaults", for messages
  MigStrategy mig_strategy = MigStrategy::kNone;
  bool fail_on_init_error = true;
  std::string nvidia_driver_root = "/";
  std::string nvidia_dev_root;  // "" = nvidia_driver_root
  std::string mps_root = "/run/nvidia/mps";

  bool pass_device_specs = false;
  // kgpu's default is cdi-cri (NVIDIA's is envvar): see docs/device-plugin.md.
  std::vector<ListStrategy> list_strategies{ListStrategy::kCdiCri};
  IdStrategy id_strategy = IdStrategy::kUuid;
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  std::string container_driver_root = "/driver-root";
  SharedPolicy shared_policy = SharedPolicy::kDistributed;

  bool gfd_oneshot = false;
  bool gfd_no_timestamp = false;
  std::chrono::seconds gfd_sleep_interval{60};
  std::string gfd_output_file = "/etc/kubernetes/node-feature-discovery/features.d/gfd";
  std::string gfd_machine_type_file = "/sys/class/dmi/id/product_name";

  // GPUDirect Storage, MOFED (InfiniBand verbs) and GDRCopy for every container that gets a GPU:
  // NVIDIA_GDS / NVIDIA_MOFED / NVIDIA_GDRCOPY=enabled and, with CDI, the `<class>=all` CDI device
  // of the node's nvidia-fs / InfiniBand / gdrdrv device nodes (NVIDIA's flags).
  bool gds_enabled = false, mofed_enabled = false, gdrcopy_enabled = false;
  // `imex.channelIDs` ([] or [0], NVIDIA's rule) and `imex.required`: the IMEX channels every GPU
  // container gets (/dev/nvidia-caps-imex-channels/channel<N>). A missing channel is skipped
  // with a warning, or is an error when required.
  std::vector<int> imex_channel_ids;
  bool imex_required = false;

  Sharing sharing;

  std::vector<std::string> warnings;  // unknown keys and other things worth a log line

  std::string dev_root() const { return nvidia_dev_root.empty() ? nvidia_driver_root : nvidia_dev_root; }
  bool has_list_strategy(ListStrategy s) const;
};

// Values given on the command line or in the environment; each, when set, wins over the file.
// Strings are parsed exactly like the file's values (errors name the flag).
struct Overrides {
  std::optional<std::string> mig_strategy, fail_on_init_error, nvidia_driver_root, nvidia_dev_root, mps_root,
      pass_device_specs, device_list_strategy, device_id_strategy, cdi_annotation_prefix, container_driver_root,
      shared_devices_allocation_policy, gfd_oneshot, gfd_no_timestamp, gfd_sleep_interval, gfd_output_file,
      gfd_machine_type_file, gds_enabled, mofed_enabled, gdrcopy_enabled, imex_channel_ids, imex_required;
};

// Parses a config document. `source` names it in errors ("config.yaml:12: sharing.timeSlicing.
// resources[0].replicas: must be at least 2, got 1"). An empty document gives the defaults.
Result<Config> parse_config(const std::string& text, const std::string& source);

// "gpu" -> "nvidia.com/gpu"; validates the name part (NVIDIA's rules). Errors say what is allowed.
Result<std::string> resource_name(const std::string& raw);

// Reads and parses `path` ("" = defaults), then applies `overrides`, then validates.
Result<Config> load_config(const std::string& path, const Overrides& overrides);

// Applies overrides and checks the cross-field rules (time-slicing with MPS, MPS with MIG...).
Result<void> finalize(Config& config, const Overrides& overrides);

// "1h", "90s", "1m30s", "500ms" (Go durations as NVIDIA's flags take them), whole seconds result.
Result<std::chrono::seconds> parse_duration(const std::string& text);

}  // namespace kgpu::sharing
