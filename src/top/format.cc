#include "top/format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace kgpu::top::detail {

using nlohmann::json;

std::optional<double> pct(std::optional<double> ratio) {
  if (!ratio) return std::nullopt;
  return *ratio * 100;
}

std::string short_resource(const std::string& r) {
  return r.starts_with("nvidia.com/") ? r.substr(std::string_view("nvidia.com/").size()) : r;
}

// Replicas per GPU of `resource` on `n`: the agent's report for that GPU (or any GPU under that
// resource), else the nvidia.com/gpu.replicas label; 1 for MIG resources.
int replicas_for(const k8s::api::NodeObject& n, const std::string& resource, const std::string& uuid) {
  if (resource.starts_with("nvidia.com/mig-")) return 1;
  if (n.report) {
    for (const auto& g : n.report->gpus) {
      if (!uuid.empty() && g.uuid == uuid && g.resource == resource) return std::max(1, g.replicas);
    }
    for (const auto& g : n.report->gpus) {
      if (g.resource == resource) return std::max(1, g.replicas);
    }
  }
  if (auto it = n.labels.find("nvidia.com/gpu.replicas"); it != n.labels.end()) {
    try {
      const int r = std::stoi(it->second);
      if (r > 1) return r;
    } catch (const std::exception&) {
    }
  }
  return 1;
}

// Compute slices of a MIG profile ("3g.20gb", "1c.3g.20gb", "nvidia.com/mig-3g.20gb"): the number
// before 'g'.
int mig_slices(std::string_view profile) {
  if (profile.starts_with("nvidia.com/mig-")) profile.remove_prefix(std::string_view("nvidia.com/mig-").size());
  if (const size_t c = profile.find("c."); c != std::string_view::npos && c < profile.find('g')) {
    profile.remove_prefix(c + 2);
  }
  int n = 0;
  size_t i = 0;
  while (i < profile.size() && profile[i] >= '0' && profile[i] <= '9') n = n * 10 + (profile[i++] - '0');
  return i < profile.size() && profile[i] == 'g' ? n : 0;
}

std::string num(std::optional<double> v, const char* suffix) {
  if (!v) return "-";
  return fmt::format("{:.0f}{}", *v, suffix);
}

std::string mib(std::optional<double> v) {
  if (!v) return "-";
  return fmt::format("{:.0f}Mi", *v);
}

std::string ratio_pct(std::optional<double> used, std::optional<double> total) {
  if (!used || !total || *total <= 0) return "-";
  return fmt::format("{:.0f}%", *used / *total * 100);
}

json opt(std::optional<double> v) {
  if (!v || std::isnan(*v)) return nullptr;
  return std::round(*v * 100) / 100;
}

// Columns aligned as kubectl prints them: left-aligned, three spaces apart.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 3, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string holder_name(const ContainerRef& who) {
  return who.container.empty() ? who.ns + "/" + who.pod : who.ns + "/" + who.pod + "/" + who.container;
}

std::string count_text(double v) {
  if (std::fabs(v - std::round(v)) < 1e-9) return fmt::format("{:.0f}", v);
  return fmt::format("{:.2f}", v);
}

std::string quantity_text(double v) { return count_text(v); }

}  // namespace kgpu::top::detail
