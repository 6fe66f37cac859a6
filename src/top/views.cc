#include "top/views.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "k8s/gpu_resources.h"

namespace kgpu::top {

using nlohmann::json;

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

std::string num(std::optional<double> v, const char* suffix = "") {
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

std::string holder_name(const ContainerRef& who) {
  return who.container.empty() ? who.ns + "/" + who.pod : who.ns + "/" + who.pod + "/" + who.container;
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

std::string count_text(double v) {
  if (std::fabs(v - std::round(v)) < 1e-9) return fmt::format("{:.0f}", v);
  return fmt::format("{:.2f}", v);
}

std::string quantity_text(double v) { return count_text(v); }

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
