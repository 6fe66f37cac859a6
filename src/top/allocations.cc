#include "top/allocations.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "k8s/gpu_resources.h"
#include "top/format.h"

namespace kgpu::top {

using nlohmann::json;
using namespace detail;

Allocations allocations(const Cluster& c) {
  Allocations out;
  auto total = [&](const std::string& resource) -> AllocationRow& {
    auto [it, fresh] = out.totals.try_emplace(resource);
    if (fresh) it->second.resource = resource;
    return it->second;
  };
  for (const auto& n : c.nodes) {
    std::set<std::string> names;
    for (const auto& [r, v] : n.capacity) names.insert(r);
    for (const auto& [r, v] : n.allocatable) names.insert(r);
    for (const auto& r : names) {
      AllocationRow row;
      row.node = n.name;
      row.resource = r;
      row.replicas = replicas_for(n, r, "");
      if (auto it = n.capacity.find(r); it != n.capacity.end()) row.capacity = it->second;
      if (auto it = n.allocatable.find(r); it != n.allocatable.end()) row.allocatable = it->second;
      for (const auto& p : c.pods) {
        if (p.node != n.name) continue;
        const auto it = p.requests.find(r);
        if (it == p.requests.end() || it->second == 0) continue;
        row.requested += it->second;
        row.holders.push_back({p.ns, p.name, it->second});
      }
      const int64_t free = std::max<int64_t>(0, row.allocatable - row.requested);
      if (row.capacity > row.allocatable) {
        std::vector<std::string> bad;
        if (n.report) {
          for (const auto& g : n.report->gpus) {
            if (!g.healthy && g.resource == r) bad.push_back(fmt::format("GPU {} ({})", g.index, g.uuid));
          }
        }
        out.unusable.push_back({n.name, r, "unhealthy", static_cast<double>(row.capacity - row.allocatable),
                                fmt::format("capacity {}, allocatable {}: the device plugin reports {} device(s) "
                                            "unhealthy{}",
                                            row.capacity, row.allocatable, row.capacity - row.allocatable,
                                            bad.empty() ? "" : fmt::format(" ({})", fmt::join(bad, ", ")))});
      }
      if (free > 0 && n.unschedulable) {
        out.unusable.push_back({n.name, r, "cordoned", static_cast<double>(free),
                                fmt::format("{} free, but the node is cordoned (kubectl uncordon {})", free, n.name)});
      } else if (free > 0 && !n.ready) {
        out.unusable.push_back({n.name, r, "not-ready", static_cast<double>(free),
                                fmt::format("{} free, but the node is not Ready", free)});
      }
      auto& t = total(r);
      t.capacity += row.capacity;
      t.allocatable += row.allocatable;
      t.requested += row.requested;
      out.rows.push_back(std::move(row));
    }
    // Shares spread over GPUs: replicas free on GPUs others already use. They serve share
    // requests only and never a whole GPU; the report says which GPU each replica is on.
    if (n.report && !n.unschedulable && n.ready) {
      std::map<std::string, std::vector<std::string>> partial;
      std::map<std::string, int> free_replicas, largest;
      for (const auto& g : n.report->gpus) {
        if (g.replicas <= 1 || g.resource.empty() || !g.healthy) continue;
        int used = 0;
        for (const auto& u : g.used) used += u.replicas;
        if (used == 0 || used >= g.replicas) continue;
        free_replicas[g.resource] += g.replicas - used;
        largest[g.resource] = std::max(largest[g.resource], g.replicas - used);
        partial[g.resource].push_back(fmt::format("GPU {} {}/{} free", g.index, g.replicas - used, g.replicas));
      }
      for (const auto& [r, list] : partial) {
        out.unusable.push_back(
            {n.name, r, "fragmented", static_cast<double>(free_replicas[r]),
             fmt::format("{} replica(s) free on GPUs in use by other pods ({}): at most {} together on one GPU, no "
                         "whole GPU among them",
                         free_replicas[r], fmt::join(list, ", "), largest[r])});
      }
    }
    // GPUs the node has but advertises under no resource: no device plugin registered.
    if (!n.report) {
      int64_t advertised = 0;
      for (const auto& [r, v] : n.capacity) advertised += v;
      if (auto it = n.labels.find("nvidia.com/gpu.count"); it != n.labels.end() && advertised == 0) {
        int count = 0;
        try {
          count = std::stoi(it->second);
        } catch (const std::exception&) {
        }
        bool dra = std::ranges::any_of(c.slices, [&](const k8s::api::SliceObject& s) { return s.node == n.name; });
        if (count > 0 && !dra) {
          out.unusable.push_back({n.name, "nvidia.com/gpu", "not-advertised", static_cast<double>(count),
                                  fmt::format("the node is labelled with {} GPU(s) but advertises no GPU resource: "
                                              "no device plugin is registered",
                                              count)});
        }
      }
    }
    // DRA: devices in the node's slices against the devices claims were allocated.
    std::map<std::string, AllocationRow> dra;
    for (const auto& s : c.slices) {
      if (s.node != n.name) continue;
      auto& row = dra[s.driver];
      row.node = n.name;
      row.resource = "dra:" + s.driver;
      int tainted = 0;
      for (const auto& d : s.devices) tainted += d.tainted ? 1 : 0;
      row.capacity += static_cast<int64_t>(s.devices.size());
      row.allocatable += static_cast<int64_t>(s.devices.size()) - tainted;
      if (tainted > 0) {
        out.unusable.push_back({n.name, row.resource, "unhealthy", static_cast<double>(tainted),
                                fmt::format("{} device(s) of slice {} carry taints", tainted, s.name)});
      }
    }
    for (const auto& cl : c.claims) {
      std::map<std::string, int64_t> here;
      for (const auto& d : cl.devices) {
        if (d.pool == n.name && dra.contains(d.driver)) ++here[d.driver];
      }
      for (const auto& [driver, k] : here) {
        auto& row = dra[driver];
        row.requested += k;
        const std::string who = cl.reserved_for.empty() ? "claim " + cl.name : cl.reserved_for.front();
        row.holders.push_back({cl.ns, who, k});
      }
    }
    for (auto& [driver, row] : dra) {
      auto& t = total(row.resource);
      t.capacity += row.capacity;
      t.allocatable += row.allocatable;
      t.requested += row.requested;
      out.rows.push_back(std::move(row));
    }
  }
  for (auto& [r, t] : out.totals) {
    for (const auto& row : out.rows) {
      if (row.resource == r) t.replicas = std::max(t.replicas, row.replicas);
    }
  }
  if (c.queues) {
    for (const auto& q : c.queues->queues) {
      const auto u = c.queue_usage.find(q.name);
      for (const auto& x : q.quotas) {
        const scheduler::queues::Key key{x.resource, x.model};
        const auto at = [&](const scheduler::queues::Amounts& amounts) {
          return scheduler::queues::amount_of(amounts, key);
        };
        QueueRow r{q.name, q.cohort, x.resource, x.model, x.nominal};
        if (u != c.queue_usage.end()) {
          r.used = at(u->second.used);
          r.borrowed = at(u->second.borrowed);
          r.pending = at(u->second.pending);
          r.admitted = u->second.admitted;
          r.waiting = u->second.waiting;
        }
        out.queues.push_back(std::move(r));
      }
    }
  }
  return out;
}

std::string allocations_text(const Allocations& a, bool wide) {
  std::vector<std::vector<std::string>> t;
  t.push_back({"NODE", "RESOURCE", "CAPACITY", "ALLOCATABLE", "REQUESTED", "FREE", "HOLDERS"});
  auto holders = [&](const AllocationRow& r) {
    std::vector<std::string> names;
    for (const auto& h : r.holders) {
      names.push_back(h.count == 1 && r.replicas == 1 ? h.ns + "/" + h.pod
                                                      : fmt::format("{}/{} ({})", h.ns, h.pod, h.count));
    }
    if (!wide && names.size() > 3) {
      const size_t more = names.size() - 3;
      names.resize(3);
      names.push_back(fmt::format("+{} more", more));
    }
    return names.empty() ? std::string("-") : fmt::format("{}", fmt::join(names, ", "));
  };
  auto resource_text = [](const AllocationRow& r) {
    return r.replicas > 1 ? fmt::format("{} ({} per GPU)", r.resource, r.replicas) : r.resource;
  };
  for (const auto& r : a.rows) {
    t.push_back({r.node, resource_text(r), std::to_string(r.capacity), std::to_string(r.allocatable),
                 std::to_string(r.requested), std::to_string(std::max<int64_t>(0, r.allocatable - r.requested)),
                 holders(r)});
  }
  for (const auto& [res, r] : a.totals) {
    t.push_back({"(cluster)", resource_text(r), std::to_string(r.capacity), std::to_string(r.allocatable),
                 std::to_string(r.requested), std::to_string(std::max<int64_t>(0, r.allocatable - r.requested)), ""});
  }
  std::string out = table(t);
  out += "\n";
  if (!a.queues.empty()) {
    std::vector<std::vector<std::string>> q;
    q.push_back({"QUEUE", "COHORT", "RESOURCE", "NOMINAL", "USED", "BORROWED", "PENDING", "WORKLOADS"});
    for (const auto& x : a.queues) {
      q.push_back({x.queue, x.cohort.empty() ? "-" : x.cohort,
                   x.model.empty() ? x.resource : x.resource + " (" + x.model + ")", std::to_string(x.nominal),
                   std::to_string(x.used), std::to_string(x.borrowed), std::to_string(x.pending),
                   fmt::format("{} admitted, {} pending", x.admitted, x.waiting)});
    }
    out += table(q) + "\n";
  }
  if (a.unusable.empty()) {
    out += "No unusable GPU capacity found.\n";
    return out;
  }
  std::vector<std::vector<std::string>> u;
  u.push_back({"UNUSABLE", "NODE", "RESOURCE", "COUNT", "WHY"});
  for (const auto& x : a.unusable) u.push_back({x.reason, x.node, x.resource, count_text(x.count), x.detail});
  out += table(u);
  return out;
}

json to_json(const Allocations& a) {
  auto row_json = [](const AllocationRow& r) {
    json holders = json::array();
    for (const auto& h : r.holders) holders.push_back({{"namespace", h.ns}, {"pod", h.pod}, {"count", h.count}});
    json j = {{"resource", r.resource},
              {"capacity", r.capacity},
              {"allocatable", r.allocatable},
              {"requested", r.requested},
              {"free", std::max<int64_t>(0, r.allocatable - r.requested)},
              {"replicasPerGpu", r.replicas}};
    if (!r.node.empty()) {
      j["node"] = r.node;
      j["holders"] = holders;
    }
    return j;
  };
  json nodes = json::array();
  for (const auto& r : a.rows) nodes.push_back(row_json(r));
  json totals = json::array();
  for (const auto& [res, r] : a.totals) totals.push_back(row_json(r));
  json unusable = json::array();
  for (const auto& x : a.unusable) {
    unusable.push_back(
        {{"node", x.node}, {"resource", x.resource}, {"reason", x.reason}, {"count", x.count}, {"detail", x.detail}});
  }
  json out = {{"nodes", nodes}, {"cluster", totals}, {"unusable", unusable}};
  if (!a.queues.empty()) {
    json queues = json::array();
    for (const auto& x : a.queues) {
      queues.push_back({{"queue", x.queue},       {"cohort", x.cohort},   {"resource", x.resource},
                        {"model", x.model},       {"nominal", x.nominal}, {"used", x.used},
                        {"borrowed", x.borrowed}, {"pending", x.pending}, {"admitted", x.admitted},
                        {"waiting", x.waiting}});
    }
    out["queues"] = std::move(queues);
  }
  return out;
}


}  // namespace kgpu::top
