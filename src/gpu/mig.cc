#include "gpu/mig.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/nvml/abi.h"

namespace kgpu::gpu::mig {

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> kShapes = {
      {"1g", nvml::kGpuInstanceProfile1Slice, 19, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 7, false},
      {"2g", nvml::kGpuInstanceProfile2Slice, 14, 2, 2, {0, 2, 4}, 3, false},
      {"3g", nvml::kGpuInstanceProfile3Slice, 9, 3, 4, {0, 4}, 2, false},
      {"4g", nvml::kGpuInstanceProfile4Slice, 5, 4, 4, {0}, 1, false},
      {"7g", nvml::kGpuInstanceProfile7Slice, 0, 7, 8, {0}, 1, false},
      {"1g+me", nvml::kGpuInstanceProfile1SliceRev1, 20, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 1, true},
      {"1g.2x", nvml::kGpuInstanceProfile1SliceRev2, 15, 1, 2, {0, 2, 4, 6}, 4, false},
  };
  return kShapes;
}

const Shape* shape_by_profile_id(unsigned profile_id) {
  for (const auto& s : shapes()) {
    if (s.profile_id == profile_id) return &s;
  }
  return nullptr;
}

const Shape* shape_by_index(unsigned nvml_profile_index) {
  for (const auto& s : shapes()) {
    if (s.nvml_profile_index == nvml_profile_index) return &s;
  }
  return nullptr;
}

std::string profile_name(unsigned compute_slices, uint64_t memory_mib, bool media_engines) {
  const uint64_t gb = (memory_mib + 1023) / 1024;
  return fmt::format("{}g.{}gb{}", compute_slices, gb, media_engines ? "+me" : "");
}

Result<std::vector<Placed>> place(const std::vector<std::pair<const Shape*, std::optional<unsigned>>>& requests) {
  std::vector<Placed> out;
  bool used[kMemorySlices] = {};
  unsigned compute = 0;
  unsigned media = 0;
  auto fits = [&](const Shape& s, unsigned start) {
    if (start + s.memory_slices > kMemorySlices) return false;
    for (unsigned i = start; i < start + s.memory_slices; ++i) {
      if (used[i]) return false;
    }
    return true;
  };
  for (size_t n = 0; n < requests.size(); ++n) {
    const Shape& s = *requests[n].first;
    const auto& fixed = requests[n].second;
    if (compute + s.compute_slices > kComputeSlices) {
      return fail(ErrorCode::kInvalidArgument, "instance {} ({}): needs {} compute slices but only {} of {} are left",
                  n, s.key, s.compute_slices, kComputeSlices - compute, kComputeSlices);
    }
    if (s.media_engines && media > 0) {
      return fail(ErrorCode::kInvalidArgument, "instance {} ({}): only one media-engine instance is allowed", n, s.key);
    }
    std::optional<unsigned> start;
    if (fixed) {
      bool allowed = false;
      for (unsigned a : s.starts) allowed = allowed || a == *fixed;
      if (!allowed) {
        return fail(ErrorCode::kInvalidArgument, "instance {} ({}): placement {} is not allowed (allowed: {})", n,
                    s.key, *fixed, fmt::join(s.starts, ","));
      }
      if (!fits(s, *fixed)) {
        return fail(ErrorCode::kInvalidArgument, "instance {} ({}): memory slices {}-{} overlap an earlier instance", n,
                    s.key, *fixed, *fixed + s.memory_slices - 1);
      }
      start = fixed;
    } else {
      for (unsigned a : s.starts) {
        if (fits(s, a)) {
          start = a;
          break;
        }
      }
      if (!start) {
        return fail(ErrorCode::kInvalidArgument,
                    "instance {} ({}): no free run of {} memory slices at an allowed placement", n, s.key,
                    s.memory_slices);
      }
    }
    for (unsigned i = *start; i < *start + s.memory_slices; ++i) used[i] = true;
    compute += s.compute_slices;
    if (s.media_engines) ++media;
    out.push_back({&s, *start});
  }
  return out;
}

std::string resource_profile(std::string_view profile) {
  std::string out(profile);
  std::replace(out.begin(), out.end(), '+', '.');
  return out;
}

}  // namespace kgpu::gpu::mig
