// The names NVIDIA's DRA driver (gpu.nvidia.com) gives a node's devices, from the inventory: what
// a ResourceClaim's allocation results name and the kubelet's PodResources lists for a claim.
// Below both the DRA driver (dra/devices.h builds the published devices with these names) and the
// metrics (a claim's device -> the GPU or MIG device it is), so metrics does not link DRA.
//
// A whole GPU is `gpu-<minor>`; a MIG device is
// `gpu-<parent minor>-mig-<profile>-<GI profile id>-<placement start>`, where <profile> is the
// profile name without dots, as an RFC 1123 name ("1g.10gb+me" -> "1g10gb-me"). A GPU with MIG
// enabled is named by its MIG devices only; a lost GPU, or one without the facts a name needs
// (minor number; MIG profile id and placement), has no name.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpu/types.h"

namespace kgpu::gpu {

// Lower case, every character outside [a-z0-9.-] turned into '-' (one per UTF-8 sequence),
// leading/trailing '-' and a trailing '.' trimmed, at most 253 characters.
std::string rfc1123_name(std::string_view name);
std::string dra_gpu_name(unsigned minor);
std::string dra_mig_name(unsigned parent_minor, std::string_view profile, unsigned gi_profile_id,
                         unsigned placement_start);

struct DraName {
  std::string name;  // "gpu-0", "gpu-1-mig-2g20gb-14-0"
  std::string uuid;  // the GPU's or MIG device's
};
// Every named device of `inventory`, GPUs in index order each followed by its MIG devices.
std::vector<DraName> dra_names(const Inventory& inventory);

}  // namespace kgpu::gpu
