// Formatting shared by the `kgpu top` views and `kgpu allocations` (internal to kgpu_top): numbers
// and units as the tables print them, kubectl-style aligned tables, and the facts of a node's GPU
// resources the rows need. Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/api/objects.h"
#include "top/node_metrics.h"

namespace kgpu::top::detail {

std::optional<double> pct(std::optional<double> ratio);
// "nvidia.com/gpu.shared" -> "gpu.shared".
std::string short_resource(const std::string& r);
// Replicas per GPU of `resource` on `n`: the agent's report for that GPU (or any GPU under that
// resource), else the nvidia.com/gpu.replicas label; 1 for MIG resources.
int replicas_for(const k8s::api::NodeObject& n, const std::string& resource, const std::string& uuid);
// Compute slices of a MIG profile ("3g.20gb", "1c.3g.20gb", "nvidia.com/mig-3g.20gb").
int mig_slices(std::string_view profile);
std::string num(std::optional<double> v, const char* suffix = "");  // "-" when unknown
std::string mib(std::optional<double> v);
std::string ratio_pct(std::optional<double> used, std::optional<double> total);
nlohmann::json opt(std::optional<double> v);  // null when unknown, else rounded to 2 decimals
// Columns aligned as kubectl prints them: left-aligned, three spaces apart.
std::string table(const std::vector<std::vector<std::string>>& rows);
std::string holder_name(const ContainerRef& who);  // "ns/pod" or "ns/pod/container"
std::string count_text(double v);                  // "2", "0.25"
std::string quantity_text(double v);

}  // namespace kgpu::top::detail
