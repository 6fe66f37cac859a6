#include "gpu/mig_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

namespace kgpu::gpu::mig {

namespace {

using Profiles = std::vector<std::string>;

struct Score {
  std::string config;
  bool change = false;
  unsigned evictions = 0, served = 0, stranded = 0;
  Profiles served_profiles;
};

// Each GPU's layout under config `name` (its targets; GPUs it does not name are absent).
std::optional<std::map<unsigned, Profiles>> layouts(const ConfigFile& f, const std::string& name, const PlanNode& n) {
  if (name.empty()) return std::nullopt;
  auto targets = select(f, name, n.gpus);
  if (!targets) return std::nullopt;
  std::map<unsigned, Profiles> out;
  for (const auto& t : *targets) out[t.index] = t.enabled ? t.profiles : Profiles{};
  return out;
}

// Takes one instance of `profile` out of `pool`; false when there is none.
bool take(Profiles& pool, const std::string& profile) {
  const auto it = std::find(pool.begin(), pool.end(), profile);
  if (it == pool.end()) return false;
  pool.erase(it);
  return true;
}

using Counts = std::map<std::string, unsigned>;

std::optional<Score> evaluate(const ConfigFile& f, const PlanNode& n, const std::string& config, const Counts& pending) {
  auto targets = select(f, config, n.gpus);
  if (!targets) return std::nullopt;
  for (const auto& t : *targets) {
    if (t.enabled && !plan(n.offers, t.profiles)) return std::nullopt;  // does not fit these GPUs
  }
  const auto current = layouts(f, n.current, n);
  // The running pods on the current instances, first-fit; those that do not fit are unplaced.
  std::map<unsigned, Profiles> free_now, used;
  if (current) free_now = *current;
  unsigned unplaced = 0;
  for (const auto& p : n.running) {
    bool placed = false;
    for (auto& [g, pool] : free_now) {
      if (take(pool, p)) {
        used[g].push_back(p);
        placed = true;
        break;
      }
    }
    if (!placed) ++unplaced;
  }
  Score s;
  s.config = config;
  s.change = config != n.current;
  Profiles free;
  bool any_change = false;
  for (const auto& g : n.gpus) {
    const auto t = std::find_if(targets->begin(), targets->end(), [&](const Target& x) { return x.index == g.index; });
    const bool known = current && current->contains(g.index);
    const Profiles next = t != targets->end() ? (t->enabled ? t->profiles : Profiles{}) : (known ? current->at(g.index) : Profiles{});
    const bool changed = s.change && t != targets->end() && (!known || current->at(g.index) != next);
    if (changed) {
      any_change = true;
      s.evictions += static_cast<unsigned>(used[g.index].size());
      free.insert(free.end(), next.begin(), next.end());
    } else if (known) {
      free.insert(free.end(), free_now[g.index].begin(), free_now[g.index].end());
    }
  }
  if (any_change) s.evictions += unplaced;
  Counts offered;
  for (const auto& p : free) ++offered[p];
  for (const auto& [p, have] : offered) {
    const auto want = pending.find(p);
    const unsigned served = want == pending.end() ? 0 : std::min(have, want->second);
    s.served += served;
    s.served_profiles.insert(s.served_profiles.end(), served, p);
    s.stranded += (have - served) * profile_slices(p);
  }
  return s;
}

std::string summary(const Score& s) {
  return fmt::format("{}: serves {} pending, {} eviction(s), {} compute slice(s) stranded", s.config, s.served,
                     s.evictions, s.stranded);
}

}  // namespace

std::vector<Offer> offers_for_memory(uint64_t mib) {
  // Profile names per model class (NVIDIA's MIG user guide): 1g, 1g+me, 1g (2x memory), 2g, 3g, 4g, 7g.
  struct Class {
    uint64_t min_mib, max_mib;
    const char* names[7];
    uint64_t gb[7];
  };
  static const Class kClasses[] = {
      {38'000, 42'000, {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}, {5, 5, 10, 10, 20, 20, 40}},
      {78'000, 84'000, {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}, {10, 10, 20, 20, 40, 40, 80}},
      {138'000, 148'000, {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}, {18, 18, 35, 35, 71, 71, 141}},
  };
  static const char* kShapes[7] = {"1g", "1g+me", "1g.2x", "2g", "3g", "4g", "7g"};
  std::vector<Offer> out;
  for (const auto& c : kClasses) {
    if (mib < c.min_mib || mib > c.max_mib) continue;
    for (size_t i = 0; i < 7; ++i) {
      for (const auto& s : shapes()) {
        if (std::string(s.key) == kShapes[i]) out.push_back(Offer{&s, c.names[i], c.gb[i] * 1024});
      }
    }
  }
  return out;
}

unsigned profile_slices(const std::string& profile) {
  const auto g = profile.find('g');
  if (g == std::string::npos || g == 0) return 0;
  unsigned n = 0;
  for (size_t i = 0; i < g; ++i) {
    if (profile[i] < '0' || profile[i] > '9') return 0;
    n = n * 10 + static_cast<unsigned>(profile[i] - '0');
  }
  return n;
}

std::vector<NodeChoice> plan_configs(const ConfigFile& file, const std::vector<PlanNode>& nodes, Profiles pending_list) {
  Counts pending;
  for (const auto& p : pending_list) ++pending[p];
  std::vector<NodeChoice> out;
  for (const auto& n : nodes) {
    std::vector<Score> scores;
    for (const auto& [name, entries] : file.configs) {
      if (auto s = evaluate(file, n, name, pending)) scores.push_back(std::move(*s));
    }
    NodeChoice c;
    c.node = n.name;
    if (scores.empty()) {
      c.config = n.current;
      c.why = "no config of the file fits this node's GPUs";
      out.push_back(std::move(c));
      continue;
    }
    // Fewest evictions, most served, least stranded, the current config on a tie.
    std::sort(scores.begin(), scores.end(), [](const Score& a, const Score& b) {
      return std::make_tuple(a.evictions, -static_cast<long>(a.served), a.stranded, a.change, a.config) <
             std::make_tuple(b.evictions, -static_cast<long>(b.served), b.stranded, b.change, b.config);
    });
    const auto& best = scores.front();
    c.config = best.config;
    c.change = best.change;
    c.evictions = best.evictions;
    c.served = best.served;
    c.stranded_slices = best.stranded;
    c.served_profiles = best.served_profiles;
    c.why = summary(best) + (best.change ? "" : " (the current config)");
    if (scores.size() > 1) c.why += "; next best " + summary(scores[1]);
    for (const auto& p : best.served_profiles) --pending[p];
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

// "nvidia.com/mig-1g.10gb.me" -> "1g.10gb+me"; "" for other resources.
std::string mig_profile(const std::string& resource) {
  const std::string prefix = "nvidia.com/mig-";
  if (!resource.starts_with(prefix)) return "";
  std::string p = resource.substr(prefix.size());
  if (p.ends_with(".me")) p = p.substr(0, p.size() - 3) + "+me";
  return p;
}

std::string label(const nlohmann::json& o, const std::string& key) {
  const auto l = o.value("metadata", nlohmann::json::object()).value("labels", nlohmann::json::object());
  return l.contains(key) && l[key].is_string() ? l[key].get<std::string>() : "";
}


}  // namespace

std::vector<std::string> mig_requests(const nlohmann::json& pod) {
  std::vector<std::string> out;
  const auto spec = pod.value("spec", nlohmann::json::object());
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : spec.value(list, nlohmann::json::array())) {
      const auto limits = c.value("resources", nlohmann::json::object()).value("limits", nlohmann::json::object());
      for (const auto& [r, q] : limits.items()) {
        const auto p = mig_profile(r);
        if (p.empty()) continue;
        const long n = q.is_string() ? std::strtol(q.get<std::string>().c_str(), nullptr, 10) : q.is_number() ? q.get<long>() : 0;
        for (long k = 0; k < n && k < 64; ++k) out.push_back(p);
      }
    }
  }
  return out;
}

ClusterPlan plan_cluster(const std::vector<const nlohmann::json*>& nodes, const std::vector<const nlohmann::json*>& pods,
                         const ConfigFile* file) {
  ClusterPlan out;
  // The MIG-capable nodes, grouped by their GPUs' memory class (the default names differ by class).
  std::map<std::string, std::vector<PlanNode>> groups;
  std::map<std::string, std::vector<Offer>> group_offers;
  std::vector<std::string>& pending = out.unserved;
  std::map<std::string, std::vector<std::string>> running;
  for (const nlohmann::json* p : pods) {
    const auto phase = p->value("status", nlohmann::json::object()).value("phase", "");
    if (phase == "Succeeded" || phase == "Failed") continue;
    const auto node = p->value("spec", nlohmann::json::object()).value("nodeName", "");
    auto req = mig_requests(*p);
    auto& into = node.empty() ? pending : running[node];
    into.insert(into.end(), req.begin(), req.end());
  }
  for (const nlohmann::json* n : nodes) {
    const auto name = n->value("metadata", nlohmann::json::object()).value("name", "");
    if (label(*n, "nvidia.com/mig.capable") != "true" && label(*n, "nvidia.com/mig.config").empty()) continue;
    const long count = std::strtol(label(*n, "nvidia.com/gpu.count").c_str(), nullptr, 10);
    const long memory = std::strtol(label(*n, "nvidia.com/gpu.memory").c_str(), nullptr, 10);
    auto offers = offers_for_memory(memory > 0 ? static_cast<uint64_t>(memory) : 0);
    if (count <= 0 || count > 64 || offers.empty()) {
      out.skipped.push_back(fmt::format("{} (nvidia.com/gpu.count={}, nvidia.com/gpu.memory={}: not a known MIG GPU)",
                                        name, label(*n, "nvidia.com/gpu.count"), label(*n, "nvidia.com/gpu.memory")));
      continue;
    }
    PlanNode pn;
    pn.name = name;
    for (long i = 0; i < count; ++i) pn.gpus.push_back({static_cast<unsigned>(i), 0});
    pn.offers = offers;
    if (label(*n, "nvidia.com/mig.config.state") == "success") pn.current = label(*n, "nvidia.com/mig.config");
    pn.running = running[name];
    const std::string key = offers.front().name;
    group_offers[key] = offers;
    groups[key].push_back(std::move(pn));
  }
  for (auto& [key, members] : groups) {
    const ConfigFile f = file ? *file : default_configs(group_offers[key]);
    auto c = plan_configs(f, members, pending);
    for (const auto& x : c) {
      for (const auto& p : x.served_profiles) {
        const auto it = std::find(pending.begin(), pending.end(), p);
        if (it != pending.end()) pending.erase(it);
      }
    }
    out.choices.insert(out.choices.end(), c.begin(), c.end());
  }
  return out;
}

}  // namespace kgpu::gpu::mig
