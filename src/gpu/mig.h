// MIG geometry: GPU-instance profile shapes and placement rules (A100, A30-class, H100, H200).
//
// Facts from specs/dra-and-mig.md: 7 compute slices and 8 memory slices per GPU; an instance
// takes a contiguous run of memory slices starting at an allowed offset; total compute slices
// may not exceed 7; at most one media-engine (+me) instance. Used by the inventory (names), by
// tools/fake-nvml (validating layouts) and later by sharing plans.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace kgpu::gpu::mig {

inline constexpr unsigned kComputeSlices = 7;
inline constexpr unsigned kMemorySlices = 8;

struct Shape {
  const char* key;              // "1g", "1g+me", "1g.2x", "2g", "3g", "4g", "7g"
  unsigned nvml_profile_index;  // argument of nvmlDeviceGetGpuInstanceProfileInfo
  unsigned profile_id;          // NVML profile id, as `nvidia-smi mig -lgip` shows it
  unsigned compute_slices;
  unsigned memory_slices;
  std::vector<unsigned> starts;  // allowed first memory slice
  unsigned max_instances;
  bool media_engines;
};

// The seven shapes, in NVML profile-index order of the table in the spec.
const std::vector<Shape>& shapes();
const Shape* shape_by_profile_id(unsigned profile_id);
const Shape* shape_by_index(unsigned nvml_profile_index);

// "<compute slices>g.<ceil(memory MiB / 1024)>gb", plus "+me" for media-engine profiles.
std::string profile_name(unsigned compute_slices, uint64_t memory_mib, bool media_engines);

// A profile as it appears in resource and label names: '+' (not allowed there) becomes '.'
// ("1g.10gb+me" -> "1g.10gb.me", as in nvidia.com/mig-1g.10gb.me).
std::string resource_profile(std::string_view profile);

// A GPU-instance profile a GPU offers (read through NVML: gpu/mig_manage.h offers()).
struct Offer {
  const Shape* shape = nullptr;
  std::string name;  // "1g.10gb", "1g.10gb+me"
  uint64_t memory_mib = 0;
  // nvmlGpuInstanceProfileInfo_t's engines of the profile.
  unsigned multiprocessors = 0, copy_engines = 0, decoders = 0, encoders = 0, jpeg_engines = 0, ofa_engines = 0;
};

struct Placed {
  const Shape* shape;
  unsigned start;  // first memory slice
};

// Places instances in order. Each request is a shape and an optional fixed start; without one,
// the first allowed start that is free is taken. Errors (kInvalidArgument) say which request
// cannot be placed and why (bad start, overlap, too many compute slices, two +me instances).
Result<std::vector<Placed>> place(const std::vector<std::pair<const Shape*, std::optional<unsigned>>>& requests);

}  // namespace kgpu::gpu::mig
