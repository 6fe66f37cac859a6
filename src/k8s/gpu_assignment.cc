#include "k8s/gpu_assignment.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <set>

#include "common/json_guard.h"

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

}  // namespace kgpu::k8s
