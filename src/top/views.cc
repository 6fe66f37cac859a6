#include "top/views.h"

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

namespace {

struct Mean {
  double sum = 0, weight = 0;
  void add(std::optional<double> v, double w = 1) {
    if (!v || std::isnan(*v)) return;
    sum += *v * w;
    weight += w;
  }
  std::optional<double> get() const {
    if (weight <= 0) return std::nullopt;
    return sum / weight;
  }
};

struct Sum {
  double sum = 0;
  bool any = false;
  void add(std::optional<double> v) {
    if (!v) return;
    sum += *v;
    any = true;
  }
  std::optional<double> get() const { return any ? std::optional(sum) : std::nullopt; }
};

const NodeMetrics* metrics_of(const Metrics& m, const std::string& node) {
  const auto it = m.find(node);
  if (it == m.end() || !it->second.metrics) return nullptr;
  return &*it->second.metrics;
}

std::string error_of(const Metrics& m, const std::string& node) {
  const auto it = m.find(node);
  if (it == m.end()) return "metrics not read";
  return it->second.error;
}

// The GPU's devices worth counting: MIG instances stand for their parent GPU (whose own series
// only exist with --mig-parent-series).
std::vector<const Device*> counted_devices(const NodeMetrics& nm) {
  std::set<std::string> parents;
  for (const auto& [k, d] : nm.devices) {
    if (!d.mig_id.empty()) parents.insert(d.uuid);
  }
  std::vector<const Device*> out;
  for (const auto& [k, d] : nm.devices) {
    if (d.mig_id.empty() && parents.contains(d.uuid)) continue;
    out.push_back(&d);
  }
  auto index_of = [](const Device* d) {
    try {
      return std::stoi(d->index);
    } catch (const std::exception&) {
      return 1 << 20;
    }
  };
  std::ranges::stable_sort(out, [&](const Device* a, const Device* b) {
    const int ia = index_of(a), ib = index_of(b);
    if (ia != ib) return ia < ib;
    return a->key < b->key;
  });
  return out;
}

}  // namespace

std::vector<NodeRow> node_rows(const Cluster& c, const Metrics& m) {
  std::vector<NodeRow> rows;
  for (const auto& n : c.nodes) {
    NodeRow row;
    row.name = n.name;
    row.cordoned = n.unschedulable;
    std::set<std::string> names;
    for (const auto& [r, v] : n.capacity) names.insert(r);
    for (const auto& [r, v] : n.allocatable) names.insert(r);
    for (const auto& r : names) {
      NodeRow::Resource res{r, 0, 0, replicas_for(n, r, "")};
      if (auto it = n.allocatable.find(r); it != n.allocatable.end()) res.allocatable = it->second;
      for (const auto& p : c.pods) {
        if (p.node != n.name) continue;
        if (auto it = p.requests.find(r); it != p.requests.end()) res.requested += it->second;
      }
      row.resources.push_back(res);
    }
    std::map<std::string, NodeRow::Resource> dra;
    for (const auto& s : c.slices) {
      if (s.node != n.name) continue;
      dra.try_emplace(s.driver, NodeRow::Resource{"dra:" + s.driver, 0, 0, 1}).first->second.allocatable +=
          static_cast<int64_t>(s.devices.size());
    }
    for (const auto& cl : c.claims) {
      for (const auto& d : cl.devices) {
        if (d.pool == n.name && dra.contains(d.driver)) ++dra[d.driver].requested;
      }
    }
    for (auto& [d, r] : dra) row.resources.push_back(r);

    std::map<std::string, bool> healthy;  // by UUID, from the report
    if (n.report) {
      for (const auto& g : n.report->gpus) {
        healthy[g.uuid] = g.healthy;
        row.unhealthy += g.healthy ? 0 : 1;
      }
    }
    if (const NodeMetrics* nm = metrics_of(m, n.name)) {
      std::map<std::string, std::string> model_by_uuid;
      std::map<std::string, double> power_by_uuid;
      Mean util, gr, tensor;
      Sum used, total;
      std::optional<double> temp;
      std::map<std::string, std::vector<std::string>> holders;
      std::map<std::pair<std::string, ContainerRef>, std::pair<int, std::string>> replicas;
      for (const auto& a : nm->allocations) {
        if (a.replica) {
          auto& e = replicas[{a.device_key, a.who}];
          ++e.first;
          e.second = a.resource;
        } else {
          holders[a.device_key].push_back(holder_name(a.who));
        }
      }
      for (const auto& [key, e] : replicas) {
        const Device* d = nm->devices.contains(key.first) ? &nm->devices.at(key.first) : nullptr;
        const int of = replicas_for(n, e.second, d != nullptr ? d->uuid : "");
        holders[key.first].push_back(fmt::format("{} {}/{}", holder_name(key.second), e.first, of));
      }
      for (const Device* d : counted_devices(*nm)) {
        model_by_uuid[d->uuid] = d->model;
        if (d->power_w) power_by_uuid[d->uuid] = std::max(power_by_uuid[d->uuid], *d->power_w);
        util.add(d->util_pct);
        gr.add(pct(d->gr_active));
        tensor.add(pct(d->tensor_active));
        if (d->fb_used_mib && d->fb_total_mib()) {
          used.add(d->fb_used_mib);
          total.add(d->fb_total_mib());
        }
        if (d->temp_c) temp = std::max(temp.value_or(*d->temp_c), *d->temp_c);
        GpuRow g;
        g.node = n.name;
        g.key = d->key;
        g.uuid = d->uuid;
        g.index = d->index;
        g.model = d->model;
        g.mig_profile = d->mig_profile;
        g.up = d->up;
        if (auto h = healthy.find(d->uuid); h != healthy.end()) g.healthy = h->second;
        g.util = d->util_pct;
        g.gr = pct(d->gr_active);
        g.tensor = pct(d->tensor_active);
        g.mem_used = d->fb_used_mib;
        g.mem_total = d->fb_total_mib();
        g.temp = d->temp_c;
        g.power = d->power_w;
        if (auto h = holders.find(d->key); h != holders.end()) g.holders = h->second;
        row.devices.push_back(std::move(g));
      }
      for (const auto& [k, d] : nm->devices) {
        if (d.mig_id.empty() && d.up && !*d.up) ++row.lost;  // kgpu_gpu_up is per GPU, MIG or not
      }
      for (const auto& [uuid, model] : model_by_uuid) ++row.models[model];
      row.gpus = static_cast<int>(model_by_uuid.size());
      row.util = util.get();
      row.gr = gr.get();
      row.tensor = tensor.get();
      row.mem_used = used.get();
      row.mem_total = total.get();
      row.temp = temp;
      if (!power_by_uuid.empty()) {
        double p = 0;
        for (const auto& [u, w] : power_by_uuid) p += w;
        row.power = p;
      }
    } else {
      row.error = error_of(m, n.name);
      if (n.report) {
        for (const auto& g : n.report->gpus) ++row.models[g.model];
        row.gpus = static_cast<int>(n.report->gpus.size());
      } else if (auto whole = n.capacity.find("nvidia.com/gpu"); whole != n.capacity.end() && whole->second > 0) {
        row.gpus = static_cast<int>(whole->second / replicas_for(n, whole->first, ""));
      } else if (auto it = n.labels.find("nvidia.com/gpu.count"); it != n.labels.end()) {
        try {
          row.gpus = std::stoi(it->second);
        } catch (const std::exception&) {
        }
        if (auto p = n.labels.find("nvidia.com/gpu.product"); p != n.labels.end() && row.gpus > 0) {
          row.models[p->second] = row.gpus;
        }
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<PodRow> pod_rows(const Cluster& c, const Metrics& m, bool containers) {
  std::vector<PodRow> out;
  for (const auto& p : c.pods) {
    if (p.node.empty()) continue;  // not scheduled: nothing to measure
    const k8s::api::NodeObject* node = c.node(p.node);
    const NodeMetrics* nm = metrics_of(m, p.node);
    // Holdings by container ("" for the pod's DRA claims).
    std::map<std::string, std::vector<Holding>> by_container;
    std::string note;
    if (nm != nullptr) {
      std::map<std::pair<std::string, std::string>, std::pair<int, Allocation>> grouped;  // (container, device)
      for (const auto& a : nm->allocations) {
        if (a.who.ns != p.ns || a.who.pod != p.name) continue;
        auto& e = grouped[{a.who.container, a.device_key}];
        if (e.first == 0) e.second = a;
        e.first += a.replica ? 1 : 0;
      }
      for (const auto& [key, e] : grouped) {
        const auto& [container, device_key] = key;
        const Allocation& a = e.second;
        Holding h;
        h.node = p.node;
        h.device_key = device_key;
        h.resource = a.resource;
        const auto dit = nm->devices.find(device_key);
        const Device* d = dit != nm->devices.end() ? &dit->second : nullptr;
        const std::string model = d != nullptr ? d->model : std::string("?");
        const std::string index = d != nullptr ? d->index : std::string("?");
        if (e.first > 0) {
          h.replicas = e.first;
          h.of = node != nullptr ? replicas_for(*node, a.resource, d != nullptr ? d->uuid : "") : 1;
          h.gpu_equiv = static_cast<double>(h.replicas) / h.of;
          h.what = fmt::format("{}/{} of GPU {} ({})", h.replicas, h.of, index, model);
          for (const auto& u : nm->uses) {
            if (u.device_key == device_key && u.who == a.who) {
              h.util = u.util_pct;
              h.mem_used = u.fb_used_mib;
            }
          }
          // No processes of its own: it uses nothing of the GPU.
          if (!h.mem_used && d != nullptr) h.mem_used = 0;
          if (!h.util && d != nullptr && d->util_pct) h.util = 0;
          if (d != nullptr && d->fb_total_mib()) h.mem_entitled = *d->fb_total_mib() * h.gpu_equiv;
        } else if (d != nullptr && !d->mig_id.empty()) {
          h.gpu_equiv = mig_slices(d->mig_profile) / 7.0;
          h.what = fmt::format("MIG {} on GPU {} ({})", d->mig_profile, index, model);
          h.gr = pct(d->gr_active);
          h.tensor = pct(d->tensor_active);
          h.mem_used = d->fb_used_mib;
          h.mem_entitled = d->fb_total_mib();
        } else {
          h.gpu_equiv = a.resource.starts_with("nvidia.com/mig-") ? mig_slices(a.resource) / 7.0 : 1.0;
          h.what = fmt::format("GPU {} ({})", index, model);
          if (d != nullptr) {
            h.util = d->util_pct;
            h.gr = pct(d->gr_active);
            h.tensor = pct(d->tensor_active);
            h.mem_used = d->fb_used_mib;
            h.mem_entitled = d->fb_total_mib();
          }
        }
        by_container[container].push_back(std::move(h));
      }
      // DRA claims: devices NVIDIA's driver names gpu-<minor> are the GPU of that minor number.
      for (const auto& name : p.claims) {
        for (const auto& cl : c.claims) {
          if (cl.ns != p.ns || cl.name != name) continue;
          for (const auto& dev : cl.devices) {
            Holding h;
            h.node = p.node;
            h.resource = "dra:" + dev.driver;
            h.what = fmt::format("claim {}: {}", cl.name, dev.device);
            h.gpu_equiv = 1;
            const bool whole = dev.device.starts_with("gpu-") && dev.device.find("-mig-") == std::string::npos;
            if (const size_t mig = dev.device.find("-mig-"); mig != std::string::npos) {
              const std::string rest = dev.device.substr(mig + 5);
              h.gpu_equiv = mig_slices(rest) / 7.0;
            }
            if (whole && dev.pool == p.node) {
              const std::string minor = dev.device.substr(4);
              for (const auto& [k, d] : nm->devices) {
                if (d.minor != minor || !d.mig_id.empty()) continue;
                h.device_key = k;
                h.what = fmt::format("claim {}: GPU {} ({})", cl.name, d.index, d.model);
                h.util = d.util_pct;
                h.gr = pct(d.gr_active);
                h.tensor = pct(d.tensor_active);
                h.mem_used = d.fb_used_mib;
                h.mem_entitled = d.fb_total_mib();
              }
            }
            by_container[""].push_back(std::move(h));
          }
        }
      }
    } else {
      note = error_of(m, p.node);
    }
    if (by_container.empty()) {
      // What the pod asked for, without readings: the agent did not say what it holds.
      for (const auto& ct : p.containers) {
        for (const auto& [r, n] : ct.requests) {
          if (!k8s::is_gpu_device_resource(r) || n <= 0) continue;
          Holding h;
          h.node = p.node;
          h.resource = r;
          h.what = fmt::format("{} {}", n, short_resource(r));
          const int of = node != nullptr ? replicas_for(*node, r, "") : 1;
          h.gpu_equiv = r.starts_with("nvidia.com/mig-") ? n * mig_slices(r) / 7.0 : static_cast<double>(n) / of;
          by_container[ct.name].push_back(std::move(h));
        }
      }
      if (note.empty() && nm != nullptr) note = "the node's agent lists no device of this pod";
    }
    auto summarize = [&](PodRow& row, const std::vector<const Holding*>& hs) {
      Mean util, gr, tensor;
      Sum used, entitled;
      bool all_entitled = true;
      for (const Holding* h : hs) {
        row.holds.push_back(*h);
        row.gpu_equiv += h->gpu_equiv;
        util.add(h->util, h->gpu_equiv > 0 ? h->gpu_equiv : 1);
        gr.add(h->gr);
        tensor.add(h->tensor);
        used.add(h->mem_used);
        entitled.add(h->mem_entitled);
        all_entitled = all_entitled && h->mem_entitled.has_value();
      }
      row.util = util.get();
      row.gr = gr.get();
      row.tensor = tensor.get();
      row.mem_used = used.get();
      if (all_entitled) row.mem_entitled = entitled.get();
    };
    if (containers) {
      for (const auto& [name, hs] : by_container) {
        PodRow row{p.ns, p.name, name, p.node, {}, 0, {}, {}, {}, {}, {}, note};
        std::vector<const Holding*> ptrs;
        for (const auto& h : hs) ptrs.push_back(&h);
        summarize(row, ptrs);
        out.push_back(std::move(row));
      }
    } else {
      PodRow row{p.ns, p.name, "", p.node, {}, 0, {}, {}, {}, {}, {}, note};
      std::vector<const Holding*> ptrs;
      for (const auto& [name, hs] : by_container) {
        for (const auto& h : hs) ptrs.push_back(&h);
      }
      summarize(row, ptrs);
      out.push_back(std::move(row));
    }
  }
  return out;
}

std::vector<NamespaceRow> namespace_rows(const Cluster& c, const Metrics& m) {
  std::map<std::string, NamespaceRow> by_ns;
  for (const auto& p : c.pods) {
    auto& row = by_ns[p.ns];
    row.name = p.ns;
    for (const auto& [r, n] : p.requests) row.requested[r] += n;
  }
  std::map<std::string, Mean> util;
  std::map<std::string, Sum> used;
  for (const auto& pr : pod_rows(c, m, false)) {
    auto& row = by_ns[pr.ns];
    ++row.pods;
    row.gpu_equiv += pr.gpu_equiv;
    util[pr.ns].add(pr.util, pr.gpu_equiv > 0 ? pr.gpu_equiv : 1);
    used[pr.ns].add(pr.mem_used);
  }
  for (const auto& q : c.quotas) {
    auto& row = by_ns[q.ns];
    row.name = q.ns;
    for (const auto& [k, v] : q.hard) {
      auto [it, fresh] = row.quota.try_emplace(k, v);
      if (!fresh) it->second = std::min(it->second, v);
    }
  }
  if (c.queues) {
    for (const auto& q : c.queues->queues)
      for (const auto& ns : q.namespaces) by_ns[ns].name = ns;
    for (auto& [ns, row] : by_ns) {
      row.queue = scheduler::queues::queue_for(*c.queues, ns, "");
      const auto* q = c.queues->find(row.queue);
      const auto u = c.queue_usage.find(row.queue);
      if (q == nullptr || u == c.queue_usage.end()) continue;
      for (const auto& x : q->quotas) {
        const scheduler::queues::Key k{x.resource, x.model};
        const auto at = [&](const scheduler::queues::Amounts& amounts) { return scheduler::queues::amount_of(amounts, k); };
        row.queue_usage.push_back(fmt::format("{}{} {}/{}, {} borrowed, {} pending", short_resource(x.resource),
                                              x.model.empty() ? "" : " (" + x.model + ")", at(u->second.used),
                                              x.nominal, at(u->second.borrowed), at(u->second.pending)));
      }
    }
  }
  std::vector<NamespaceRow> out;
  for (auto& [ns, row] : by_ns) {
    row.util = util[ns].get();
    row.mem_used = used[ns].get();
    out.push_back(std::move(row));
  }
  return out;
}

namespace {

template <typename Row>
Result<void> sort_by(std::vector<Row>& rows, const std::string& key,
                     const std::map<std::string, std::function<std::optional<double>(const Row&)>>& numbers,
                     const std::function<std::string(const Row&)>& name) {
  if (key.empty() || key == "name") {
    std::ranges::stable_sort(rows, [&](const Row& a, const Row& b) { return name(a) < name(b); });
    return {};
  }
  const auto it = numbers.find(key);
  if (it == numbers.end()) {
    std::string choices = "name";
    for (const auto& [k, f] : numbers) choices += ", " + k;
    return fail(ErrorCode::kInvalidArgument, "--sort-by {}: expected one of {}", key, choices);
  }
  const auto& f = it->second;
  std::ranges::stable_sort(rows, [&](const Row& a, const Row& b) {
    const auto va = f(a), vb = f(b);
    if (va.has_value() != vb.has_value()) return va.has_value();
    if (va && *va != *vb) return *va > *vb;
    return name(a) < name(b);
  });
  return {};
}

}  // namespace

Result<void> sort_nodes(std::vector<NodeRow>& rows, const std::string& key) {
  using F = std::function<std::optional<double>(const NodeRow&)>;
  const std::map<std::string, F> numbers = {
      {"util", [](const NodeRow& r) { return r.util; }},
      {"gr-active", [](const NodeRow& r) { return r.gr; }},
      {"tensor", [](const NodeRow& r) { return r.tensor; }},
      {"memory", [](const NodeRow& r) { return r.mem_used; }},
      {"temp", [](const NodeRow& r) { return r.temp; }},
      {"power", [](const NodeRow& r) { return r.power; }},
      {"gpus", [](const NodeRow& r) { return std::optional<double>(r.gpus); }},
      {"allocated",
       [](const NodeRow& r) {
         double a = 0, t = 0;
         for (const auto& x : r.resources) {
           a += static_cast<double>(x.requested) / x.replicas;
           t += static_cast<double>(x.allocatable) / x.replicas;
         }
         return t > 0 ? std::optional(a / t) : std::nullopt;
       }},
  };
  return sort_by<NodeRow>(rows, key, numbers, [](const NodeRow& r) { return r.name; });
}

Result<void> sort_pods(std::vector<PodRow>& rows, const std::string& key) {
  using F = std::function<std::optional<double>(const PodRow&)>;
  const std::map<std::string, F> numbers = {
      {"util", [](const PodRow& r) { return r.util; }},
      {"gr-active", [](const PodRow& r) { return r.gr; }},
      {"tensor", [](const PodRow& r) { return r.tensor; }},
      {"memory", [](const PodRow& r) { return r.mem_used; }},
      {"gpus", [](const PodRow& r) { return std::optional<double>(r.gpu_equiv); }},
  };
  return sort_by<PodRow>(rows, key, numbers, [](const PodRow& r) { return r.ns + "/" + r.pod + "/" + r.container; });
}

Result<void> sort_namespaces(std::vector<NamespaceRow>& rows, const std::string& key) {
  using F = std::function<std::optional<double>(const NamespaceRow&)>;
  const std::map<std::string, F> numbers = {
      {"util", [](const NamespaceRow& r) { return r.util; }},
      {"memory", [](const NamespaceRow& r) { return r.mem_used; }},
      {"gpus", [](const NamespaceRow& r) { return std::optional<double>(r.gpu_equiv); }},
      {"quota",
       [](const NamespaceRow& r) -> std::optional<double> {
         const auto q = r.quota.find("requests.nvidia.com/gpu");
         if (q == r.quota.end() || q->second <= 0) return std::nullopt;
         const auto u = r.requested.find("nvidia.com/gpu");
         return (u == r.requested.end() ? 0.0 : static_cast<double>(u->second)) / q->second;
       }},
  };
  return sort_by<NamespaceRow>(rows, key, numbers, [](const NamespaceRow& r) { return r.name; });
}

}  // namespace kgpu::top
