#include "k8s/gpu_assignment.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "common/json_guard.h"
#include "k8s/quantity.h"

namespace kgpu::k8s {

using nlohmann::json;

namespace {

std::vector<std::string_view> split_view(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

bool clean_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c == ':' || c == ',' || c == ';' || c == ' ' || c == '\t' || c == '\n' || c == '\r') return false;
  return true;
}

}  // namespace

std::string format_assignment(const Assignment& a) {
  std::string out;
  for (const auto& c : a) {
    if (c.uuids.empty()) continue;
    if (!out.empty()) out += ';';
    out += c.container;
    out += ':';
    for (size_t i = 0; i < c.uuids.size(); ++i) {
      if (i) out += ',';
      out += c.uuids[i];
    }
  }
  return out;
}

Result<Assignment> parse_assignment(std::string_view text) {
  if (text.size() > kMaxAssignmentBytes)
    return fail(ErrorCode::kInvalidArgument, "{}: {} bytes, more than the {} accepted", kAnnotationGpuAssignment,
                text.size(), kMaxAssignmentBytes);
  Assignment out;
  if (text.empty()) return out;
  std::set<std::string_view> containers;
  const auto entries = split_view(text, ';');
  if (entries.size() > kMaxAssignmentContainers)
    return fail(ErrorCode::kInvalidArgument, "{}: {} containers, more than the {} accepted", kAnnotationGpuAssignment,
                entries.size(), kMaxAssignmentContainers);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string_view e = entries[i];
    const size_t colon = e.find(':');
    if (colon == std::string_view::npos)
      return fail(ErrorCode::kInvalidArgument, "{}: entry {} (\"{}\") is not <container>:<uuid>[,<uuid>...]",
                  kAnnotationGpuAssignment, i, e);
    const std::string_view name = e.substr(0, colon);
    if (!clean_token(name))
      return fail(ErrorCode::kInvalidArgument, "{}: entry {}: bad container name \"{}\"", kAnnotationGpuAssignment, i,
                  name);
    if (!containers.insert(name).second)
      return fail(ErrorCode::kInvalidArgument, "{}: container \"{}\" appears twice", kAnnotationGpuAssignment, name);
    const auto uuids = split_view(e.substr(colon + 1), ',');
    if (uuids.size() > kMaxGpusPerContainer)
      return fail(ErrorCode::kInvalidArgument, "{}: container \"{}\" has {} GPUs, more than the {} accepted",
                  kAnnotationGpuAssignment, name, uuids.size(), kMaxGpusPerContainer);
    ContainerGpus c{std::string(name), {}};
    std::set<std::string_view> seen;
    for (const auto u : uuids) {
      if (!clean_token(u))
        return fail(ErrorCode::kInvalidArgument, "{}: container \"{}\": bad GPU uuid \"{}\"", kAnnotationGpuAssignment,
                    name, u);
      if (!seen.insert(u).second)
        return fail(ErrorCode::kInvalidArgument, "{}: container \"{}\" names GPU {} twice", kAnnotationGpuAssignment,
                    name, u);
      c.uuids.emplace_back(u);
    }
    out.push_back(std::move(c));
  }
  return out;
}

const ContainerGpus* find_container(const Assignment& a, std::string_view container) {
  for (const auto& c : a)
    if (c.container == container) return &c;
  return nullptr;
}

std::string format_node_report(const NodeGpuReport& r) {
  json gpus = json::array();
  for (const auto& g : r.gpus) {
    json used = json::array();
    for (const auto& u : g.used)
      used.push_back(
          json{{"namespace", u.ns}, {"pod", u.pod}, {"uid", u.uid}, {"container", u.container}, {"replicas", u.replicas}});
    gpus.push_back(json{{"index", g.index},
                        {"uuid", g.uuid},
                        {"model", g.model},
                        {"memoryMiB", g.memory_mib},
                        {"healthy", g.healthy},
                        {"resource", g.resource},
                        {"replicas", g.replicas},
                        {"nvlinkPeers", g.nvlink_peers},
                        {"used", std::move(used)}});
  }
  return json{{"observedAt", r.observed_at}, {"gpus", std::move(gpus)}}.dump();
}

namespace {

// Field readers that name the path on error.
Result<std::string> str_field(const json& o, const char* key, const std::string& path, bool required = true) {
  const auto it = o.find(key);
  if (it == o.end()) {
    if (required) return fail(ErrorCode::kInvalidArgument, "{}.{}: missing", path, key);
    return std::string();
  }
  if (!it->is_string()) return fail(ErrorCode::kInvalidArgument, "{}.{}: not a string", path, key);
  return it->get<std::string>();
}

Result<int64_t> int_field(const json& o, const char* key, const std::string& path, int64_t lo, int64_t hi,
                          int64_t dflt) {
  const auto it = o.find(key);
  if (it == o.end()) return dflt;
  if (!it->is_number_integer()) return fail(ErrorCode::kInvalidArgument, "{}.{}: not an integer", path, key);
  const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : it->get<int64_t>();
  if (v < lo || v > hi)
    return fail(ErrorCode::kInvalidArgument, "{}.{}: {} is outside {}..{}", path, key, v, lo, hi);
  return v;
}

}  // namespace

Result<NodeGpuReport> parse_node_report(std::string_view text) {
  if (text.size() > kMaxNodeReportBytes)
    return fail(ErrorCode::kInvalidArgument, "{}: {} bytes, more than the {} accepted", kAnnotationNodeGpus,
                text.size(), kMaxNodeReportBytes);
  if (!json_depth_within(text, 8))
    return fail(ErrorCode::kInvalidArgument, "{}: nested deeper than 8 levels", kAnnotationNodeGpus);
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail(ErrorCode::kInvalidArgument, "{}: not a JSON object", kAnnotationNodeGpus);
  NodeGpuReport r;
  auto at = str_field(j, "observedAt", kAnnotationNodeGpus, false);
  if (!at) return std::unexpected(at.error());
  r.observed_at = *at;
  const auto gpus = j.find("gpus");
  if (gpus == j.end() || !gpus->is_array())
    return fail(ErrorCode::kInvalidArgument, "{}.gpus: missing or not a list", kAnnotationNodeGpus);
  if (gpus->size() > kMaxReportGpus)
    return fail(ErrorCode::kInvalidArgument, "{}.gpus: {} GPUs, more than the {} accepted", kAnnotationNodeGpus,
                gpus->size(), kMaxReportGpus);
  std::set<int> indices;
  std::set<std::string> uuids;
  for (size_t i = 0; i < gpus->size(); ++i) {
    const json& g = (*gpus)[i];
    const std::string path = fmt::format("{}.gpus[{}]", kAnnotationNodeGpus, i);
    if (!g.is_object()) return fail(ErrorCode::kInvalidArgument, "{}: not an object", path);
    ReportedGpu out;
    auto index = int_field(g, "index", path, 0, static_cast<int64_t>(kMaxReportGpus) - 1, -1);
    if (!index) return std::unexpected(index.error());
    if (*index < 0) return fail(ErrorCode::kInvalidArgument, "{}.index: missing", path);
    out.index = static_cast<int>(*index);
    if (!indices.insert(out.index).second)
      return fail(ErrorCode::kInvalidArgument, "{}.index: GPU {} listed twice", path, out.index);
    auto uuid = str_field(g, "uuid", path);
    if (!uuid) return std::unexpected(uuid.error());
    if (uuid->empty() || !uuids.insert(*uuid).second)
      return fail(ErrorCode::kInvalidArgument, "{}.uuid: empty or listed twice", path);
    out.uuid = *uuid;
    auto model = str_field(g, "model", path, false);
    if (!model) return std::unexpected(model.error());
    out.model = *model;
    auto mem = int_field(g, "memoryMiB", path, 0, int64_t{1} << 40, 0);
    if (!mem) return std::unexpected(mem.error());
    out.memory_mib = static_cast<uint64_t>(*mem);
    if (const auto h = g.find("healthy"); h != g.end()) {
      if (!h->is_boolean()) return fail(ErrorCode::kInvalidArgument, "{}.healthy: not a boolean", path);
      out.healthy = h->get<bool>();
    }
    auto res = str_field(g, "resource", path, false);
    if (!res) return std::unexpected(res.error());
    out.resource = *res;
    auto replicas = int_field(g, "replicas", path, 1, 1024, 1);
    if (!replicas) return std::unexpected(replicas.error());
    out.replicas = static_cast<int>(*replicas);
    if (const auto p = g.find("nvlinkPeers"); p != g.end()) {
      if (!p->is_array() || p->size() > kMaxReportGpus)
        return fail(ErrorCode::kInvalidArgument, "{}.nvlinkPeers: not a list of at most {} indices", path,
                    kMaxReportGpus);
      for (const auto& v : *p) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= static_cast<int64_t>(kMaxReportGpus))
          return fail(ErrorCode::kInvalidArgument, "{}.nvlinkPeers: not a GPU index", path);
        out.nvlink_peers.push_back(v.get<int>());
      }
    }
    if (const auto u = g.find("used"); u != g.end()) {
      if (!u->is_array() || u->size() > kMaxReportUsesPerGpu)
        return fail(ErrorCode::kInvalidArgument, "{}.used: not a list of at most {} entries", path,
                    kMaxReportUsesPerGpu);
      for (size_t k = 0; k < u->size(); ++k) {
        const json& e = (*u)[k];
        const std::string upath = fmt::format("{}.used[{}]", path, k);
        if (!e.is_object()) return fail(ErrorCode::kInvalidArgument, "{}: not an object", upath);
        GpuUse use;
        for (auto [key, dst] : {std::pair{"namespace", &use.ns}, std::pair{"pod", &use.pod}, std::pair{"uid", &use.uid},
                                std::pair{"container", &use.container}}) {
          auto v = str_field(e, key, upath, std::string_view(key) != "container");
          if (!v) return std::unexpected(v.error());
          *dst = *v;
        }
        auto n = int_field(e, "replicas", upath, 1, out.replicas, 1);
        if (!n) return std::unexpected(n.error());
        use.replicas = static_cast<int>(*n);
        out.used.push_back(std::move(use));
      }
    }
    r.gpus.push_back(std::move(out));
  }
  return r;
}

std::map<std::string, int64_t> pod_requests(const std::vector<ContainerResources>& containers) {
  std::map<std::string, int64_t> app, init_max, sidecars;
  for (const auto& c : containers) {
    for (const auto& [r, n] : c.requests) {
      if (!c.init) {
        app[r] += n;
      } else if (c.sidecar) {
        sidecars[r] += n;
      } else {
        init_max[r] = std::max(init_max[r], n + sidecars[r]);  // beside the sidecars started before it
      }
    }
  }
  for (const auto& [r, n] : sidecars) app[r] += n;
  std::map<std::string, int64_t> out = init_max;
  for (const auto& [r, n] : app) out[r] = std::max(n, out[r]);
  return out;
}

int64_t ContainerResources::request(const std::string& resource) const {
  for (const auto& [name, n] : requests)
    if (name == resource) return n;
  return 0;
}

namespace {

std::string text_of(const json& obj, const char* key) {
  const auto v = obj.find(key);
  return v != obj.end() && v->is_string() ? v->get<std::string>() : std::string();
}

// Whole units of an extended-resource quantity ("2", 2); nullopt for anything else.
std::optional<int64_t> units(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return std::nullopt;
  auto q = Quantity::parse(v.get<std::string>());
  if (!q) return std::nullopt;
  return q->value();
}

void read_containers(const json& spec, const char* key, bool init, std::vector<ContainerResources>& out) {
  const auto list = spec.find(key);
  if (list == spec.end() || !list->is_array()) return;
  for (const auto& c : *list) {
    if (!c.is_object()) continue;
    ContainerResources rc;
    rc.name = text_of(c, "name");
    rc.init = init;
    rc.sidecar = init && text_of(c, "restartPolicy") == "Always";
    const auto res = c.find("resources");
    if (res != c.end() && res->is_object()) {
      for (const char* part : {"requests", "limits"}) {
        const auto m = res->find(part);
        if (m == res->end() || !m->is_object()) continue;
        for (const auto& [name, value] : m->items()) {
          if (std::ranges::any_of(rc.requests, [&](const auto& r) { return r.first == name; })) continue;
          if (auto n = units(value)) rc.requests.emplace_back(name, *n);
        }
      }
    }
    out.push_back(std::move(rc));
  }
}

}  // namespace

std::vector<ContainerResources> pod_containers(const json& pod) {
  std::vector<ContainerResources> out;
  if (!pod.is_object()) return out;
  if (const auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    read_containers(*spec, "initContainers", true, out);
    read_containers(*spec, "containers", false, out);
  }
  return out;
}

namespace {

// Kubernetes' IsExtendedResourceName: fully qualified, outside kubernetes.io, not a quota name.
bool extended_resource(std::string_view name) {
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos || name.starts_with("requests.")) return false;
  const std::string_view domain = name.substr(0, slash);
  return domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io");
}

// The value as a quantity, or why it is not one.
Result<Quantity> quantity_value(const json& v) {
  if (v.is_string()) return Quantity::parse(v.get_ref<const std::string&>());
  if (v.is_number_float() && !std::isfinite(v.get<double>()))
    return fail(ErrorCode::kInvalidArgument, "a number out of range is not a quantity");
  if (v.is_number()) return Quantity::parse(v.dump());
  return fail(ErrorCode::kInvalidArgument, "{} is not a quantity", v.is_null() ? "null" : v.type_name());
}

std::optional<std::string> container_quantity_error(const json& c, const std::string& where) {
  const auto res = c.find("resources");
  if (res == c.end() || !res->is_object()) return std::nullopt;
  std::map<std::string, Quantity, std::less<>> requests, limits;
  for (const char* part : {"requests", "limits"}) {
    const auto m = res->find(part);
    if (m == res->end() || !m->is_object()) continue;
    for (const auto& [name, value] : m->items()) {
      const std::string field = fmt::format("{}: resources.{}[{}]", where, part, name);
      auto q = quantity_value(value);
      if (!q) return field + ": " + q.error().message;
      if (q->is_negative()) return fmt::format("{}: {} is negative", field, q->to_string());
      if (extended_resource(name) && !q->is_integer())
        return fmt::format("{}: {} is not a whole number (an extended resource is counted in whole units)", field,
                           q->to_string());
      (std::string_view(part) == "requests" ? requests : limits).emplace(name, *q);
    }
  }
  for (const auto& [name, q] : requests) {
    if (!extended_resource(name)) continue;
    const auto l = limits.find(name);
    if (l == limits.end())
      return fmt::format("{}: resources.limits[{}]: missing; an extended resource's request needs a limit", where, name);
    if (l->second != q)
      return fmt::format("{}: resources.requests[{}]: {} differs from the limit {}; an extended resource cannot be "
                         "overcommitted",
                         where, name, q.to_string(), l->second.to_string());
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> resource_quantity_error(const json& pod) {
  if (!pod.is_object()) return std::nullopt;
  const auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return std::nullopt;
  for (const char* key : {"initContainers", "containers"}) {
    const auto list = spec->find(key);
    if (list == spec->end() || !list->is_array()) continue;
    for (size_t i = 0; i < list->size(); ++i) {
      const json& c = (*list)[i];
      if (!c.is_object()) continue;
      const std::string where = fmt::format("spec.{}[{}] ({})", key, i, text_of(c, "name"));
      if (auto e = container_quantity_error(c, where)) return e;
    }
  }
  return std::nullopt;
}

const std::string* object_annotation(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return nullptr;
  const auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return nullptr;
  const auto v = a->find(key);
  return v != a->end() && v->is_string() ? v->get_ptr<const std::string*>() : nullptr;
}

}  // namespace kgpu::k8s
