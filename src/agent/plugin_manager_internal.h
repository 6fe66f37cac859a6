// Helpers shared by the device-plugin manager's files (not part of its interface).
#pragma once

#include <vector>

#include "gpu/types.h"
#include "kubelet/device_plugin.h"
#include "sharing/allocate.h"

namespace kgpu::agent::detail {

// Whether two inventories have the same devices to advertise (GPUs, MIG modes and MIG devices).
bool same_layout(const gpu::Inventory& a, const gpu::Inventory& b);

// A lost GPU reads without UUID or MIG devices: keep what we knew, so its devices stay advertised
// (as Unhealthy) instead of vanishing from the kubelet's capacity.
gpu::Inventory merge_lost(gpu::Inventory fresh, const gpu::Inventory& known);

// The sharing layer's container edits in the kubelet's Allocate terms.
std::vector<kubelet::ContainerAllocation> to_kubelet(const std::vector<sharing::ContainerEdits>& edits);

}  // namespace kgpu::agent::detail
