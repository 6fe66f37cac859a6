#include "report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "common/strings.h"
#include "gpu/mig.h"
#include "framework/cluster.h"
#include "framework/fragmentation.h"
#include "framework/framework.h"

namespace kgpu::cost {

namespace {

// MIG instance memory (MiB) per shape key as NVML reports it, by GPU family.
struct Family {
  const char* name;
  std::vector<std::pair<const char*, double>> memory;  // shape key -> MiB
};
const Family kA100_40{"A100-40GB",
                      {{"1g", 4864}, {"1g.2x", 9984}, {"2g", 9984}, {"3g", 20096}, {"4g", 20096}, {"7g", 40448}}};
const Family kA100_80{"A100-80GB",
                      {{"1g", 9856}, {"1g.2x", 19968}, {"2g", 19968}, {"3g", 40192}, {"4g", 40192}, {"7g", 81152}}};
const Family kH100_80{"H100-80GB",
                      {{"1g", 9984}, {"1g.2x", 20096}, {"2g", 20096}, {"3g", 40448}, {"4g", 40448}, {"7g", 81152}}};
const Family kH200{"H200-141GB",
                   {{"1g", 18176}, {"1g.2x", 35584}, {"2g", 35584}, {"3g", 72448}, {"4g", 72448}, {"7g", 143616}}};

const Family* family(const std::string& model, double memory_mib) {
  const std::string m = ascii_lower(model);
  if (m.find("h200") != std::string::npos) return &kH200;
  if (m.find("h100") != std::string::npos || m.find("h800") != std::string::npos) return &kH100_80;
  if (m.find("a100") != std::string::npos) {
    if (memory_mib > 0) return memory_mib < 60'000 ? &kA100_40 : &kA100_80;
    return m.find("40gb") != std::string::npos ? &kA100_40 : &kA100_80;
  }
  return nullptr;
}

// Share of a GPU of the MIG profile named `profile` ("3g.40gb", "1g.10gb.me").
double mig_share(const std::string& profile, const std::string& model, double gpu_memory_mib) {
  for (const auto& p : mig_profiles_for(model, gpu_memory_mib)) {
    if (profile.starts_with(p.name)) return p.share();
  }
  unsigned c = 0;
  if (std::sscanf(profile.c_str(), "%ug", &c) == 1 && c >= 1 && c <= 7) return c / 7.0;
  return 1;
}

std::string gib(double mib) { return fmt::format("{:.1f} GiB", mib / 1024); }

struct PodFigures {
  double held_hours = 0;  // longest device
  double held_gpu_hours = 0, idle_gpu_hours = 0;
  double util_weighted = 0;
  int samples = 0;
  double last_active = 0;
  double peak_mib = -1, capacity_mib = -1;
  std::string model;
  std::vector<int> gpu_indices;
};

}  // namespace

double MigProfileSize::share() const {
  return std::max(compute_slices / double(gpu::mig::kComputeSlices), memory_slices / double(gpu::mig::kMemorySlices));
}

std::vector<MigProfileSize> mig_profiles_for(const std::string& model, double memory_mib) {
  std::vector<MigProfileSize> out;
  const Family* f = family(model, memory_mib);
  if (f == nullptr) return out;
  for (const auto& [key, mib] : f->memory) {
    for (const auto& s : gpu::mig::shapes()) {
      if (std::string_view(s.key) != key) continue;
      out.push_back({gpu::mig::profile_name(s.compute_slices, static_cast<uint64_t>(mib), false), mib, s.compute_slices,
                     s.memory_slices});
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.memory_mib, a.compute_slices) < std::tie(b.memory_mib, b.compute_slices);
  });
  return out;
}

Result<double> parse_duration(std::string_view text) {
  if (text.empty() || text.size() > 32)
    return fail(ErrorCode::kInvalidArgument, "duration '{}': empty or too long", text);
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
    if (j == i || j == text.size()) {
      return fail(ErrorCode::kInvalidArgument, "duration '{}': expected numbers with units (s, m, h, d, w), e.g. 7d",
                  text);
    }
    double n = 0;
    if (const auto [end, ec] = std::from_chars(text.data() + i, text.data() + j, n);
        ec != std::errc() || end != text.data() + j) {
      return fail(ErrorCode::kInvalidArgument, "duration '{}': '{}' is not a number", text, text.substr(i, j - i));
    }
    double unit = 0;
    switch (text[j]) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      case 'w':
        unit = 7 * 86400;
        break;
      default:
        return fail(ErrorCode::kInvalidArgument, "duration '{}': unknown unit '{}' (s, m, h, d, w)", text, text[j]);
    }
    total += n * unit;
    i = j + 1;
  }
  if (!(total > 0)) return fail(ErrorCode::kInvalidArgument, "duration '{}' must be positive", text);
  return total;
}

SimInput sim_input(const ClusterView& cluster) {
  SimInput in;
  std::map<std::string, size_t> index;
  for (const auto& n : cluster.nodes) {
    if (n.mig || n.gpus <= 0) continue;
    sched::NodeState s;
    s.name = n.name;
    s.cpu_milli = s.cpu_free = n.cpu_milli;
    s.memory_mib = s.memory_free = n.memory_mib;
    s.gpu_model = n.model;
    s.labels = n.labels;
    s.taints = n.taints;
    s.unschedulable = n.unschedulable;
    s.gpu_free.assign(static_cast<size_t>(n.gpus), sched::kMilli);
    index[n.name] = in.nodes.size();
    in.nodes.push_back(std::move(s));
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < cluster.pods.size(); ++i) {
    const auto& p = cluster.pods[i];
    if (index.contains(p.node) && p.mig_profile().empty()) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cluster.pods[a].started < cluster.pods[b].started; });
  for (size_t i : order) {
    const auto& p = cluster.pods[i];
    const GpuNode* node = cluster.node(p.node);
    sched::Pod s;
    s.name = p.ns + "/" + p.name;
    s.cpu_milli = p.cpu_milli;
    s.memory_mib = p.memory_mib;
    if (p.shared()) {
      s.num_gpu = 1;
      s.gpu_milli = std::max(1, sched::kMilli / std::max(1, node->replicas));
    } else {
      s.num_gpu = static_cast<int>(std::min<int64_t>(p.units, 1024));
      s.gpu_milli = sched::kMilli;
    }
    // A pod stays on its GPU model (its resource name and selectors tie it there in practice).
    if (!node->model.empty()) s.gpu_models = {node->model};
    s.node_selector = p.node_selector;
    s.tolerations = p.tolerations;
    s.creation = static_cast<int64_t>(p.started);
    in.pod_node.push_back(index.at(p.node));
    in.pods.push_back(std::move(s));
  }
  return in;
}

SimCsv to_sim_csv(const SimInput& in) {
  SimCsv out;
  out.nodes = "sn,cpu_milli,memory_mib,gpu,model\n";
  for (const auto& n : in.nodes) {
    out.nodes += fmt::format("{},{},{},{},{}\n", n.name, n.cpu_milli, n.memory_mib, std::min(n.gpus(), 64),
                             n.gpu_model.empty() ? "unknown" : n.gpu_model);
  }
  int64_t first = INT64_MAX;
  for (const auto& p : in.pods) first = std::min(first, p.creation);
  out.pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time\n";
  for (const auto& p : in.pods) {
    out.pods += fmt::format("{},{},{},{},{},{},{}\n", p.name, p.cpu_milli, p.memory_mib, std::min(p.num_gpu, 64),
                            p.gpu_milli, p.gpu_models.empty() ? "" : p.gpu_models[0], p.creation - first);
  }
  return out;
}

namespace {

void add(std::map<std::string, Rollup>& m, const std::string& key, const IdlePod& p, double held_gpu_hours) {
  auto& r = m[key];
  r.key = key;
  ++r.pods;
  r.gpus += p.gpus;
  r.held_gpu_hours += held_gpu_hours;
  r.idle_gpu_hours += p.idle_gpu_hours;
  r.idle_cost += p.cost;
}

std::vector<Rollup> sorted(std::map<std::string, Rollup>& m) {
  std::vector<Rollup> out;
  for (auto& [k, v] : m) out.push_back(v);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.idle_gpu_hours > b.idle_gpu_hours; });
  return out;
}

struct PlacedCluster {
  int idle_gpus = 0, idle_nodes = 0, partial_gpus = 0;
  double frag_ratio = 0, fragmented_gpus = 0;
};

PlacedCluster measure(const sched::Cluster& c, const std::vector<sched::TaskShape>& workload) {
  PlacedCluster m;
  for (const auto& n : c.nodes()) {
    m.idle_gpus += n.full_free_gpus();
    if (n.gpus() > 0 && n.full_free_gpus() == n.gpus()) ++m.idle_nodes;
    for (int f : n.gpu_free) m.partial_gpus += f > 0 && f < sched::kMilli ? 1 : 0;
  }
  const auto f = sched::cluster_fragmentation(c, workload);
  m.frag_ratio = f.ratio();
  m.fragmented_gpus = f.fragmented_milli / sched::kMilli;
  return m;
}

Fragmentation fragmentation(const ClusterView& cluster, const std::map<std::string, PodFigures>& figures,
                            const Prices& prices, std::vector<std::string>& warnings) {
  Fragmentation out;
  const SimInput in = sim_input(cluster);
  const auto& nodes = in.nodes;
  double price_sum = 0;
  for (const auto& n : cluster.nodes) {
    ++out.nodes;
    out.gpus += n.gpus;
  }
  for (const auto& n : nodes) price_sum += prices.price_for(n.gpu_model) * n.gpus();
  out.nodes_modelled = static_cast<int>(nodes.size());
  struct Placed {
    sched::Pod pod;
    size_t node;
    std::vector<int> known;
  };
  std::vector<Placed> pods;
  for (size_t i = 0; i < in.pods.size(); ++i) {
    std::vector<int> known;
    if (auto f = figures.find(in.pods[i].name); f != figures.end()) known = f->second.gpu_indices;
    pods.push_back({in.pods[i], in.pod_node[i], std::move(known)});
  }
  out.pods = static_cast<int>(pods.size());

  std::vector<sched::Pod> all;
  for (const auto& p : pods) all.push_back(p.pod);
  const auto workload = sched::target_workload(all);

  sched::Cluster today(nodes);
  int unplaceable = 0;
  for (const auto& p : pods) {
    const auto& n = today.node(p.node);
    std::vector<int> gpus;
    const int need = p.pod.num_gpu;
    const int per = p.pod.num_gpu == 1 ? p.pod.gpu_milli : sched::kMilli;
    bool ok = static_cast<int>(p.known.size()) == need;
    for (int g : p.known) ok = ok && g >= 0 && g < n.gpus() && n.gpu_free[g] >= per;
    if (ok) {
      gpus = p.known;
    } else if (auto d = sched::default_gpus(p.pod, n)) {
      gpus = *d;
    } else {
      ++unplaceable;
      continue;
    }
    today.assign(p.pod, sched::Placement{p.node, gpus});
  }
  if (unplaceable > 0) {
    warnings.push_back(
        fmt::format("{} GPU pods did not fit their node's GPUs in the model (more requested than the "
                    "node advertises)",
                    unplaceable));
  }
  out.gpus_allocated = today.gpu_allocated() / double(sched::kMilli);
  const auto now = measure(today, workload);
  out.idle_gpus = now.idle_gpus;
  out.idle_nodes = now.idle_nodes;
  out.partial_gpus = now.partial_gpus;
  out.frag_ratio = now.frag_ratio;
  out.fragmented_gpus = now.fragmented_gpus;

  sched::Cluster replay(nodes);
  sched::SchedulingContext ctx;
  ctx.workload = workload;
  ctx.tie_break = sched::TieBreak::kFirst;
  auto fw = sched::make_framework("FGD", ctx);
  if (!fw) {
    warnings.push_back("FGD: " + fw.error().message);
    return out;
  }
  std::mt19937_64 rng(1);
  for (const auto& p : pods) {
    const auto outcome = fw->schedule(p.pod, replay, rng);
    if (!outcome.placement) ++out.fgd_unplaced;
  }
  const auto after = measure(replay, workload);
  out.fgd_idle_gpus = after.idle_gpus;
  out.fgd_idle_nodes = after.idle_nodes;
  out.fgd_partial_gpus = after.partial_gpus;
  out.fgd_frag_ratio = after.frag_ratio;
  out.fgd_fragmented_gpus = after.fragmented_gpus;
  const int freed = out.fgd_idle_gpus - out.idle_gpus;
  out.freed_gpu_hours_per_day = freed * 24.0;
  const double mean_price = out.gpus > 0 ? price_sum / std::max(1, out.gpus) : 0;
  out.freed_cost_per_day = out.freed_gpu_hours_per_day * mean_price;
  return out;
}

}  // namespace

Report build_report(const ClusterView& cluster, const Usage& usage, const Prices& prices, const ReportOptions& o) {
  Report r;
  const auto& uo = usage.options;
  r.until = uo.until;
  r.since = uo.until - uo.window_s;
  r.step_s = uo.step_s;
  r.idle_threshold = uo.idle_threshold;
  r.currency = prices.currency;
  r.prometheus_url = o.prometheus_url;
  r.max_rows = o.max_rows;
  r.warnings = cluster.warnings;
  for (const auto& w : usage.warnings) r.warnings.push_back(w);
  const double step_h = uo.step_s / 3600;

  // Per pod: its devices' figures, each weighted by the pod's share of that device.
  std::map<std::string, PodFigures> figures;
  std::map<std::string, const GpuPod*> pods;
  for (const auto& p : cluster.pods) pods[p.ns + "/" + p.name] = &p;
  for (const auto& d : usage.devices) {
    if (d.pod.empty()) continue;
    const auto it = pods.find(d.ns + "/" + d.pod);
    if (it == pods.end()) continue;
    const GpuPod& p = *it->second;
    const GpuNode* node = cluster.node(p.node);
    double share = 1;
    if (p.shared()) share = 1.0 / (node != nullptr ? node->replicas : 1);
    if (!p.mig_profile().empty()) {
      share = mig_share(p.mig_profile(), d.model.empty() && node ? node->model : d.model,
                        node != nullptr ? static_cast<double>(node->gpu_memory_mib) : -1);
    }
    auto& f = figures[it->first];
    f.held_hours = std::max(f.held_hours, d.held_samples * step_h);
    f.held_gpu_hours += d.held_samples * step_h * share;
    f.idle_gpu_hours += d.idle_samples * step_h * share;
    f.util_weighted += d.mean_util * d.held_samples;
    f.samples += d.held_samples;
    f.last_active = std::max(f.last_active, d.last_active);
    if (d.peak_fb_mib >= 0) f.peak_mib = std::max(f.peak_mib, d.peak_fb_mib);
    if (d.fb_total_mib > 0) f.capacity_mib = std::max(f.capacity_mib, d.fb_total_mib);
    if (f.model.empty()) f.model = d.model;
    char* end = nullptr;
    const long idx = std::strtol(d.gpu.c_str(), &end, 10);
    if (!d.gpu.empty() && *end == '\0' &&
        std::find(f.gpu_indices.begin(), f.gpu_indices.end(), idx) == f.gpu_indices.end()) {
      f.gpu_indices.push_back(static_cast<int>(idx));
    }
  }

  std::map<std::string, Rollup> by_ns, by_workload, by_owner;
  int without = 0;
  for (const auto& p : cluster.pods) {
    ++r.gpu_pods;
    const std::string key = p.ns + "/" + p.name;
    const GpuNode* node = cluster.node(p.node);
    const auto fit = figures.find(key);
    if (fit == figures.end() || fit->second.samples == 0) {
      ++without;
      continue;
    }
    ++r.pods_with_metrics;
    const PodFigures& f = fit->second;
    const std::string model = !f.model.empty() ? f.model : (node != nullptr ? node->model : "");
    const double price = prices.price_for(model);
    IdlePod ip;
    ip.ns = p.ns;
    ip.pod = p.name;
    ip.workload = p.workload;
    ip.owner = p.owner;
    ip.node = p.node;
    ip.model = model;
    ip.resource = p.resource;
    ip.kind = p.kind;
    ip.gpus = f.held_hours > 0 ? f.held_gpu_hours / f.held_hours : 0;
    ip.mean_util = f.util_weighted / f.samples;
    ip.held_hours = f.held_hours;
    ip.idle_gpu_hours = f.idle_gpu_hours;
    ip.cost = f.idle_gpu_hours * price;
    r.held_gpu_hours += f.held_gpu_hours;
    r.held_cost += f.held_gpu_hours * price;
    r.idle_gpu_hours += f.idle_gpu_hours;
    r.idle_cost += ip.cost;
    add(by_ns, p.ns, ip, f.held_gpu_hours);
    add(by_workload, p.ns + "/" + p.workload, ip, f.held_gpu_hours);
    add(by_owner, p.owner.empty() ? "(no owner label)" : p.owner, ip, f.held_gpu_hours);

    // Stale notebooks and Jobs.
    if (p.kind != WorkKind::kOther) {
      const double since = f.last_active > 0 ? f.last_active : std::max(r.since, p.started);
      const double idle_s = r.until - since;
      if (idle_s >= o.idle_after_s) {
        StaleHolder s;
        s.ns = p.ns;
        s.pod = p.name;
        s.workload = p.workload;
        s.owner = p.owner;
        s.node = p.node;
        s.model = model;
        s.kind = p.kind;
        s.gpus = ip.gpus;
        s.started = p.started;
        s.last_active = f.last_active;
        s.idle_hours = idle_s / 3600;
        s.cost_since_active = s.idle_hours * s.gpus * price;
        r.stale.push_back(std::move(s));
      }
    }

    if (ip.mean_util < uo.idle_threshold) r.idle.push_back(ip);

    // Right-sizing: single-device pods with memory figures.
    if (p.shared() || p.units != 1 || f.peak_mib < 0) continue;
    const double capacity =
        f.capacity_mib > 0 ? f.capacity_mib : (node != nullptr && node->gpu_memory_mib > 0 ? node->gpu_memory_mib : -1);
    if (capacity <= 0) continue;
    const double gpu_memory = node != nullptr && node->gpu_memory_mib > 0 ? node->gpu_memory_mib : capacity;
    const double current = ip.gpus;  // share of a GPU
    const double need_mib = f.peak_mib * (1 + o.headroom);
    const double need_util = ip.mean_util * current * (1 + o.headroom);  // % of a whole GPU
    RightSize rs;
    const auto profiles = mig_profiles_for(model, gpu_memory);
    for (const auto& prof : profiles) {
      if (prof.share() >= current - 1e-9) continue;
      if (prof.memory_mib < need_mib || prof.compute_slices * 100.0 / gpu::mig::kComputeSlices < need_util) continue;
      if (rs.suggestion.empty() || prof.share() < rs.suggested_gpus) {
        rs.suggestion = "MIG " + prof.name;
        rs.suggested_resource = "nvidia.com/mig-" + prof.name;
        rs.suggested_gpus = prof.share();
        rs.suggested_mib = prof.memory_mib;
      }
    }
    if (profiles.empty() && p.mig_profile().empty()) {
      for (int n : {8, 4, 2}) {
        if (gpu_memory / n >= need_mib && 100.0 / n >= need_util) {
          rs.suggestion = fmt::format("1/{} of a shared GPU (time-slicing or MPS, {} replicas)", n, n);
          rs.suggested_resource = "nvidia.com/gpu.shared";
          rs.suggested_gpus = 1.0 / n;
          rs.suggested_mib = gpu_memory / n;
          break;
        }
      }
    }
    if (rs.suggestion.empty()) continue;
    rs.ns = p.ns;
    rs.pod = p.name;
    rs.workload = p.workload;
    rs.owner = p.owner;
    rs.node = p.node;
    rs.model = model;
    rs.current = p.mig_profile().empty() ? fmt::format("1 GPU ({})", gib(capacity)) : "MIG " + p.mig_profile();
    rs.peak_mib = f.peak_mib;
    rs.capacity_mib = capacity;
    rs.mean_util = ip.mean_util;
    rs.gpus = current;
    rs.held_hours = f.held_hours;
    rs.saving_gpu_hours = (current - rs.suggested_gpus) * f.held_hours;
    rs.saving = rs.saving_gpu_hours * price;
    r.right_size.push_back(std::move(rs));
  }
  if (without > 0) {
    r.warnings.push_back(
        fmt::format("{} of {} GPU pods have no utilization series in the window (no agent on their "
                    "node, or Prometheus does not scrape it)",
                    without, r.gpu_pods));
  }
  std::stable_sort(r.idle.begin(), r.idle.end(),
                   [](const auto& a, const auto& b) { return a.idle_gpu_hours > b.idle_gpu_hours; });
  std::stable_sort(r.right_size.begin(), r.right_size.end(),
                   [](const auto& a, const auto& b) { return a.saving_gpu_hours > b.saving_gpu_hours; });
  std::stable_sort(r.stale.begin(), r.stale.end(),
                   [](const auto& a, const auto& b) { return a.idle_hours > b.idle_hours; });
  r.by_namespace = sorted(by_ns);
  r.by_workload = sorted(by_workload);
  r.by_owner = sorted(by_owner);
  r.fragmentation = fragmentation(cluster, figures, prices, r.warnings);
  return r;
}

}  // namespace kgpu::cost
