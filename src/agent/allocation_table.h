// What each container really got: the agent's allocation table, and its checkpoint file.
//
// When the agent honours a scheduler's assignment (or steers an unassigned pod off a GPU that is
// really taken), the devices a container gets differ from the IDs the kubelet passed to Allocate.
// The kubelet (and its PodResources API) only ever knows its own IDs; this table is the one place
// that knows the real ones. An entry is made at Allocate; its pod is known then when the pod was
// matched to an assignment, otherwise it is learnt later from PodResources by the kubelet IDs.
// Entries whose pod has left PodResources are dropped (after `grace`, so that a container still
// being admitted is not).
//
// The checkpoint (<device-plugin dir>/kgpu-allocations.json) is JSON written atomically; the
// parser bounds size, entry and ID counts and names the field at fault.
//
// Thread safety: a plain value; the owner locks.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "kubelet/pod_resources.h"

namespace kgpu::agent {

inline constexpr const char* kAllocationCheckpointName = "kgpu-allocations.json";
inline constexpr size_t kMaxCheckpointBytes = 4 << 20;
inline constexpr size_t kMaxCheckpointEntries = 4096;
inline constexpr size_t kMaxIdsPerEntry = 256;

struct AllocationEntry {
  std::string uid, ns, pod, container;  // empty until known
  std::string resource;
  std::vector<std::string> kubelet_ids;  // what the kubelet passed (and PodResources reports)
  std::vector<std::string> actual_ids;   // what the container got
  std::string allocated_at;              // RFC 3339, system time
  bool assigned = false;                 // from a kgpu assignment
  bool operator==(const AllocationEntry&) const = default;

  bool identified() const { return !pod.empty(); }
};

class AllocationTable {
 public:
  const std::vector<AllocationEntry>& entries() const { return entries_; }
  void add(AllocationEntry e);

  // Who really holds which devices: every entry (its actual IDs), plus the containers `listed`
  // (PodResources) that no entry accounts for, by their kubelet IDs (allocated before the agent
  // kept a table, or by an agent without API access).
  struct Holding {
    std::string uid, ns, pod, container, resource;
    std::vector<std::string> ids;  // replica IDs as they are: "GPU-a::3"
  };
  std::vector<Holding> holdings(const std::vector<kubelet::ContainerDevice>& listed) const;
  // The (pod uid, container) pairs served, for candidate choice.
  std::set<std::pair<std::string, std::string>> served() const;

  // Joins the kubelet's PodResources listing: names the pods of unidentified entries whose
  // kubelet IDs match a container's devices of that resource, and drops entries whose container
  // is not listed and that were allocated more than `grace` before `now`. Returns whether the
  // table changed.
  bool reconcile(const std::vector<kubelet::ContainerDevice>& listed, std::chrono::system_clock::time_point now,
                 std::chrono::milliseconds grace);

  // The identified holdings as PodResources entries: the listing with the actual IDs in place of
  // the kubelet's for the containers the table knows (metrics attribute GPUs by this).
  std::vector<kubelet::ContainerDevice> translate(const std::vector<kubelet::ContainerDevice>& listed) const;

  std::string to_json() const;
  // Errors (kInvalidArgument) name the field ("entries[2].actualIDs[0]: ...") or the limit.
  static Result<AllocationTable> parse(std::string_view text);
  // A missing file is an empty table; an unreadable or malformed one is an error.
  static Result<AllocationTable> load(const std::string& path);
  Result<void> save(const std::string& path) const;

 private:
  const AllocationEntry* find(const std::string& ns, const std::string& pod, const std::string& container,
                              const std::string& resource) const;
  std::vector<AllocationEntry> entries_;
};

}  // namespace kgpu::agent
