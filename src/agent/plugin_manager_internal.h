// Inventory helpers shared by the device-plugin manager's files (not part of its interface).
#pragma once

#include "gpu/types.h"

namespace kgpu::agent::detail {

// Whether two inventories have the same devices to advertise (GPUs, MIG modes and MIG devices).
bool same_layout(const gpu::Inventory& a, const gpu::Inventory& b);

// A lost GPU reads without UUID or MIG devices: keep what we knew, so its devices stay advertised
// (as Unhealthy) instead of vanishing from the kubelet's capacity.
gpu::Inventory merge_lost(gpu::Inventory fresh, const gpu::Inventory& known);

}  // namespace kgpu::agent::detail
