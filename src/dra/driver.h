// The DRA driver's node side: NodePrepareResources / NodeUnprepareResources for this node's
// devices, without gRPC (src/dra/plugin.h serves it).
//
// Prepare, per claim (namespace, uid, name): reads the ResourceClaim through the API (its uid must
// match), takes status.allocation.devices.results for this driver and this node's pool, maps each
// device name to a Device of the node, validates the claim's opaque config (claim_config.h), writes
// the claim's CDI spec `<cdi_root>/k8s.<driver>-claim_<uid>.json` (kind `k8s.<driver>/claim`, one
// device `<uid>-<device name>` per allocated device, the device's nodes as the device plugin's spec
// has them, the common driver edits, and for MPS the client limits and MPS directories) atomically,
// records the claim in the checkpoint, and answers the devices with their CDI IDs. Any failure is
// that claim's error; other claims are unaffected. A claim already prepared (checkpointed, spec on
// disk) gets the same answer again without reading the API.
//
// Unprepare removes the claim's CDI spec and checkpoint entry (and stops its MPS setup); a claim
// not prepared is a success (the kubelet repeats calls).
//
// Dynamic MIG: a device that is a partition (Device::partition) is created at prepare by
// `create_partition` (the MIG instance at the allocated placement) after the claim is checkpointed
// with its partitions, so a restarted agent knows the instance is the claim's; a prepare that fails
// afterwards destroys what it created. Unprepare destroys the claim's partitions after removing its
// CDI spec; one that cannot be destroyed (a process still on it) fails the call, keeping the
// checkpoint entry, and the kubelet's retry tries again.
//
// Checkpoint: `<state_dir>/checkpoint.json`, {"version": 1, "driver", "claims": {uid: {...}}},
// replaced atomically on every change; at most kMaxClaims claims and kMaxCheckpointBytes bytes. A
// checkpoint that does not parse, has another version or another driver's name is not used: the
// driver starts empty, keeps the file as checkpoint.json.corrupt and reports why (load_error()).
//
// Thread safety: prepare()/unprepare() may be called from any thread; they are serialized.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "dra/claim_config.h"
#include "dra/devices.h"
#include "sharing/allocate.h"

namespace kgpu::dra {

inline constexpr int kCheckpointVersion = 1;
inline constexpr size_t kMaxClaims = 4096;
inline constexpr size_t kMaxCheckpointBytes = 16 << 20;

struct ClaimRef {
  std::string ns, uid, name;
};

// A MIG instance made for a claim (dynamic MIG): GPU index, GPU-instance profile id, first memory slice.
struct Partition {
  unsigned gpu_index = 0, profile_id = 0, start = 0;
  bool operator==(const Partition&) const = default;
};

struct PreparedDevice {
  std::vector<std::string> request_names;
  std::string pool_name, device_name;
  std::vector<std::string> cdi_device_ids;
  std::optional<Partition> partition;
  bool operator==(const PreparedDevice&) const = default;
};

struct PrepareResult {
  std::vector<PreparedDevice> devices;
  std::string error;  // non-empty: the claim failed
};

// MPS for one prepared claim: the devices' UUIDs and the limits, and where its pipe directory is.
struct MpsClaim {
  std::string claim_uid;
  std::vector<std::string> uuids;
  std::vector<unsigned> gpu_indices;
  SharingSettings settings;
  std::string pipe_dir;  // host path: <mps_root>/claim-<uid>/pipe
  std::string log_dir;   // host path: <mps_root>/claim-<uid>/log
};

struct DriverOptions {
  std::string driver_name = std::string(kDefaultDriverName);
  std::string node_name;  // the pool name: NVIDIA's driver names its pool after the node
  std::string cdi_root = "/var/run/cdi";
  std::string state_dir;  // the checkpoint's directory (the plugin dir: /var/lib/kubelet/plugins/<driver>)
  // The device plugin path's CDI facts (dev root, driver files, hooks, MIG capability minors).
  sharing::Config cdi_config;
  sharing::HostFacts host;
  // Reads a ResourceClaim (namespace, name): the object, or an error naming the reason.
  std::function<Result<nlohmann::json>(const std::string&, const std::string&)> get_claim;
  // The node's devices now, and whether a device (by UUID) is healthy.
  std::function<std::vector<Device>()> devices;
  std::function<bool(const Device&)> healthy;
  // Starts/stops MPS for a claim (a control daemon with the limits); unset: the client limits in the
  // CDI spec only. An error fails the claim's prepare.
  std::function<Result<void>(const MpsClaim&)> start_mps;
  std::function<void(const std::string& claim_uid)> stop_mps;
  // Dynamic MIG: makes a partition's MIG instance, answering the device as it now exists (uuid,
  // instance ids); removes one. Unset: a partition fails to prepare.
  std::function<Result<Device>(const Device& partition)> create_partition;
  std::function<Result<void>(const Partition&)> destroy_partition;
};

class Driver {
 public:
  explicit Driver(DriverOptions options);

  // Loads the checkpoint (see above). Errors only for a state directory that cannot be created.
  Result<void> start();
  // Why the checkpoint found at start() was not used ("" when it was, or there was none).
  const std::string& load_error() const { return load_error_; }

  std::map<std::string, PrepareResult> prepare(const std::vector<ClaimRef>& claims);
  std::map<std::string, std::string> unprepare(const std::vector<ClaimRef>& claims);

  // The claims now prepared (uid -> devices), for status and tests.
  std::map<std::string, std::vector<PreparedDevice>> prepared() const;
  // The partitions of the checkpointed claims (prepared, or being prepared).
  std::vector<Partition> partitions() const;

  std::string cdi_kind() const;                             // "k8s.gpu.nvidia.com/claim"
  std::string cdi_spec_path(const std::string& uid) const;  // <cdi_root>/k8s.gpu.nvidia.com-claim_<uid>.json
  std::string checkpoint_path() const;
  const DriverOptions& options() const { return opt_; }

 private:
  struct Entry {
    std::string ns, name;
    std::vector<PreparedDevice> devices;
    bool mps = false;
  };
  Result<std::vector<PreparedDevice>> prepare_one(const ClaimRef& ref, bool& mps);
  // Destroys the MIG partitions among `devices`, every one tried; the first failure's message, ""
  // when none failed. mu_ held.
  std::string destroy_partitions_locked(const std::vector<PreparedDevice>& devices);
  Result<void> save_locked();

  DriverOptions opt_;
  std::string load_error_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> claims_;  // guarded by mu_
};

}  // namespace kgpu::dra
