#include "gpu/dra_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace kgpu::gpu {

std::string rfc1123_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if ((static_cast<unsigned char>(c) & 0xC0) == 0x80) continue;  // one '-' per UTF-8 sequence
    const auto u = static_cast<unsigned char>(std::tolower(static_cast<unsigned char>(c)));
    out.push_back((std::isalnum(u) != 0 && u < 0x80) || u == '-' || u == '.' ? static_cast<char>(u) : '-');
  }
  const size_t first = out.find_first_not_of('-');
  if (first == std::string::npos) return {};
  out = out.substr(first, out.find_last_not_of('-') - first + 1);
  if (out.ends_with('.')) out.pop_back();
  if (out.size() > 253) out.resize(253);
  return out;
}

std::string dra_gpu_name(unsigned minor) { return fmt::format("gpu-{}", minor); }

std::string dra_mig_name(unsigned parent_minor, std::string_view profile, unsigned gi_profile_id,
                         unsigned placement_start) {
  std::string p(profile);
  std::erase(p, '.');
  return fmt::format("gpu-{}-mig-{}-{}-{}", parent_minor, rfc1123_name(p), gi_profile_id, placement_start);
}

std::vector<DraName> dra_names(const Inventory& inv) {
  std::vector<DraName> out;
  for (const GpuInfo& g : inv.gpus) {
    if (g.lost || !g.minor_number) continue;
    if (!g.mig_enabled.value_or(false)) {
      out.push_back({dra_gpu_name(*g.minor_number), g.uuid});
      continue;
    }
    for (const MigDevice& m : g.mig_devices)
      if (m.profile_id && m.placement_start)
        out.push_back({dra_mig_name(*g.minor_number, m.profile, *m.profile_id, *m.placement_start), m.uuid});
  }
  return out;
}

}  // namespace kgpu::gpu
