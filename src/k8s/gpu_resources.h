// Which extended resources are GPUs. Two meanings, one function each, shared by `kgpu lint`,
// `kgpu doctor` and the scheduler adapter; header-only with no dependencies.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

namespace kgpu::k8s {

// Any resource of the nvidia.com domain: whole GPUs, MIG slices, shared replicas, and whatever
// else an NVIDIA device plugin advertises. What a manifest asks of NVIDIA's device plugins (lint:
// GPU requests and limits, fractional GPU quantities, misspelled names).
inline bool is_nvidia_resource(std::string_view name) { return name.starts_with("nvidia.com/"); }

// A resource that allocates GPU devices to a pod: a whole GPU (nvidia.com/gpu), a MIG slice
// (nvidia.com/mig-<profile>) or a shared GPU replica (nvidia.com/gpu.shared, or any other
// nvidia.com/gpu.<suffix>, or any nvidia.com/<name>.shared a sharing config renames to). What the scheduler places and doctor
// counts as a pod's GPU request and a node's GPU capacity.
inline bool is_gpu_device_resource(std::string_view name) {
  return name == "nvidia.com/gpu" || name.starts_with("nvidia.com/mig-") || name.starts_with("nvidia.com/gpu.") ||
         (name.starts_with("nvidia.com/") && name.ends_with(".shared"));
}

}  // namespace kgpu::k8s
