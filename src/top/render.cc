#include "top/views.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "top/format.h"

// Renderings of the `kgpu top` rows: aligned tables and JSON.
namespace kgpu::top {

using nlohmann::json;
using namespace detail;

namespace {

std::string models_text(const std::map<std::string, int>& models) {
  if (models.empty()) return "-";
  if (models.size() == 1) return models.begin()->first;
  std::vector<std::string> parts;
  for (const auto& [m, n] : models) parts.push_back(fmt::format("{}x {}", n, m));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string allocated_text(const NodeRow& r) {
  std::vector<std::string> parts;
  for (const auto& x : r.resources) {
    parts.push_back(fmt::format("{} {}/{}", short_resource(x.name), x.requested, x.allocatable));
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, " "));
}

}  // namespace

std::string nodes_table(const std::vector<NodeRow>& rows, bool wide) {
  std::vector<std::vector<std::string>> t;
  t.push_back(
      {"NAME", "GPUS", "MODEL", "ALLOCATED", "UTIL", "GR-ACTIVE", "TENSOR", "MEMORY", "MEMORY%", "TEMP", "POWER"});
  for (const auto& r : rows) {
    std::string name = r.name;
    if (r.cordoned) name += " (cordoned)";
    std::string gpus = std::to_string(r.gpus);
    if (r.lost > 0) gpus += fmt::format(" ({} lost)", r.lost);
    if (r.unhealthy > 0) gpus += fmt::format(" ({} unhealthy)", r.unhealthy);
    t.push_back({name, gpus, models_text(r.models), allocated_text(r), num(r.util, "%"), num(r.gr, "%"),
                 num(r.tensor, "%"), r.mem_used && r.mem_total ? mib(r.mem_used) + "/" + mib(r.mem_total) : "-",
                 ratio_pct(r.mem_used, r.mem_total), num(r.temp, "C"), num(r.power, "W")});
    if (wide) {
      for (const auto& g : r.devices) {
        std::string label = "  GPU " + g.index;
        if (!g.mig_profile.empty()) label += " MIG " + g.mig_profile;
        std::string state;
        if (g.up && !*g.up) state = " (lost)";
        if (g.healthy && !*g.healthy) state += " (unhealthy)";
        t.push_back({label + state, g.uuid, g.model,
                     g.holders.empty() ? "-" : fmt::format("{}", fmt::join(g.holders, ", ")), num(g.util, "%"),
                     num(g.gr, "%"), num(g.tensor, "%"),
                     g.mem_used && g.mem_total ? mib(g.mem_used) + "/" + mib(g.mem_total) : "-",
                     ratio_pct(g.mem_used, g.mem_total), num(g.temp, "C"), num(g.power, "W")});
      }
    }
  }
  return table(t);
}

std::string pods_table(const std::vector<PodRow>& rows, bool all_namespaces, bool containers, bool wide) {
  std::vector<std::vector<std::string>> t;
  std::vector<std::string> head;
  if (all_namespaces) head.push_back("NAMESPACE");
  head.push_back("NAME");
  if (containers) head.push_back("CONTAINER");
  for (const char* h : {"GPUS", "HOLDS", "UTIL", "GR-ACTIVE", "TENSOR", "MEMORY", "MEMORY%"}) head.push_back(h);
  if (wide) head.push_back("NODE");
  t.push_back(head);
  for (const auto& r : rows) {
    std::vector<std::string> line;
    if (all_namespaces) line.push_back(r.ns);
    line.push_back(r.pod);
    if (containers) line.push_back(r.container.empty() ? "(claims)" : r.container);
    std::vector<std::string> what;
    for (const auto& h : r.holds) what.push_back(h.what);
    line.push_back(count_text(r.gpu_equiv));
    line.push_back(what.empty() ? "-" : fmt::format("{}", fmt::join(what, ", ")));
    line.push_back(num(r.util, "%"));
    line.push_back(num(r.gr, "%"));
    line.push_back(num(r.tensor, "%"));
    line.push_back(r.mem_used ? mib(r.mem_used) + (r.mem_entitled ? "/" + mib(r.mem_entitled) : "") : "-");
    line.push_back(ratio_pct(r.mem_used, r.mem_entitled));
    if (wide) line.push_back(r.node);
    t.push_back(std::move(line));
  }
  return table(t);
}

std::string namespaces_table(const std::vector<NamespaceRow>& rows) {
  std::vector<std::vector<std::string>> t;
  const bool queues = std::ranges::any_of(rows, [](const NamespaceRow& r) { return !r.queue.empty(); });
  t.push_back({"NAME", "PODS", "GPUS", "REQUESTED", "QUOTA", "UTIL", "MEMORY"});
  if (queues) t.back().push_back("QUEUE");
  for (const auto& r : rows) {
    std::vector<std::string> req, quota;
    for (const auto& [res, n] : r.requested) req.push_back(fmt::format("{} {}", short_resource(res), n));
    for (const auto& [key, hard] : r.quota) {
      // Extended resources are quoted as requests.<name>; the pods' requests are the usage.
      std::string res = key.starts_with("requests.") ? key.substr(9) : key;
      const auto u = r.requested.find(res);
      quota.push_back(
          fmt::format("{} {}/{}", short_resource(res), u == r.requested.end() ? 0 : u->second, quantity_text(hard)));
    }
    t.push_back({r.name, std::to_string(r.pods), count_text(r.gpu_equiv),
                 req.empty() ? "-" : fmt::format("{}", fmt::join(req, " ")),
                 quota.empty() ? "-" : fmt::format("{}", fmt::join(quota, " ")), num(r.util, "%"), mib(r.mem_used)});
    if (queues) {
      t.back().push_back(r.queue.empty() ? "-"
                                         : fmt::format("{}: {}", r.queue, fmt::join(r.queue_usage, "; ")));
    }
  }
  return table(t);
}

json to_json(const std::vector<NodeRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    json resources = json::array();
    for (const auto& x : r.resources) {
      resources.push_back({{"name", x.name},
                           {"allocatable", x.allocatable},
                           {"requested", x.requested},
                           {"replicasPerGpu", x.replicas}});
    }
    json devices = json::array();
    for (const auto& g : r.devices) {
      devices.push_back({{"index", g.index},
                         {"uuid", g.uuid},
                         {"model", g.model},
                         {"migProfile", g.mig_profile.empty() ? json(nullptr) : json(g.mig_profile)},
                         {"up", g.up ? json(*g.up) : json(nullptr)},
                         {"healthy", g.healthy ? json(*g.healthy) : json(nullptr)},
                         {"utilPercent", opt(g.util)},
                         {"grActivePercent", opt(g.gr)},
                         {"tensorActivePercent", opt(g.tensor)},
                         {"memoryUsedMiB", opt(g.mem_used)},
                         {"memoryTotalMiB", opt(g.mem_total)},
                         {"temperatureC", opt(g.temp)},
                         {"powerW", opt(g.power)},
                         {"holders", g.holders}});
    }
    out.push_back({{"name", r.name},
                   {"gpus", r.gpus},
                   {"models", r.models},
                   {"resources", resources},
                   {"utilPercent", opt(r.util)},
                   {"grActivePercent", opt(r.gr)},
                   {"tensorActivePercent", opt(r.tensor)},
                   {"memoryUsedMiB", opt(r.mem_used)},
                   {"memoryTotalMiB", opt(r.mem_total)},
                   {"temperatureC", opt(r.temp)},
                   {"powerW", opt(r.power)},
                   {"lostGpus", r.lost},
                   {"unhealthyGpus", r.unhealthy},
                   {"cordoned", r.cordoned},
                   {"error", r.error.empty() ? json(nullptr) : json(r.error)},
                   {"devices", devices}});
  }
  return out;
}

json to_json(const std::vector<PodRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    json holds = json::array();
    for (const auto& h : r.holds) {
      holds.push_back({{"what", h.what},
                       {"resource", h.resource},
                       {"device", h.device_key.empty() ? json(nullptr) : json(h.device_key)},
                       {"replicas", h.replicas},
                       {"replicasPerGpu", h.of},
                       {"gpuEquivalents", opt(h.gpu_equiv)},
                       {"utilPercent", opt(h.util)},
                       {"grActivePercent", opt(h.gr)},
                       {"tensorActivePercent", opt(h.tensor)},
                       {"memoryUsedMiB", opt(h.mem_used)},
                       {"memoryEntitledMiB", opt(h.mem_entitled)}});
    }
    json row = {{"namespace", r.ns},
                {"pod", r.pod},
                {"node", r.node},
                {"gpuEquivalents", opt(r.gpu_equiv)},
                {"holds", holds},
                {"utilPercent", opt(r.util)},
                {"grActivePercent", opt(r.gr)},
                {"tensorActivePercent", opt(r.tensor)},
                {"memoryUsedMiB", opt(r.mem_used)},
                {"memoryEntitledMiB", opt(r.mem_entitled)},
                {"note", r.note.empty() ? json(nullptr) : json(r.note)}};
    if (!r.container.empty()) row["container"] = r.container;
    out.push_back(std::move(row));
  }
  return out;
}

json to_json(const std::vector<NamespaceRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    out.push_back({{"name", r.name},
                   {"pods", r.pods},
                   {"gpuEquivalents", opt(r.gpu_equiv)},
                   {"requested", r.requested},
                   {"quota", r.quota},
                   {"utilPercent", opt(r.util)},
                   {"memoryUsedMiB", opt(r.mem_used)}});
    if (!r.queue.empty()) out.back()["queue"] = {{"name", r.queue}, {"usage", r.queue_usage}};
  }
  return out;
}

}  // namespace kgpu::top
