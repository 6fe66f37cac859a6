#include "k8s/api/objects.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "k8s/api/document.h"
#include "k8s/api/json.h"
#include "k8s/gpu_resources.h"

namespace kgpu::k8s::api {

using nlohmann::json;

namespace {

std::string owned(std::string_view s) { return std::string(s); }

std::map<std::string, std::string> owned_map(const StringMap& m) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : m) out.emplace(k, v);
  return out;
}

// Whole units of a quantity, rounded up; never negative.
int64_t units(const Quantity& q) { return std::max<int64_t>(0, q.value()); }

void add_containers(const std::vector<Container>& list, bool init, std::vector<ContainerResources>& out) {
  for (const Container& c : list) {
    ContainerResources rc;
    rc.name = owned(c.name);
    rc.init = init;
    rc.sidecar = init && c.is_sidecar();
    for (const auto& [name, q] : effective_requests(c)) rc.requests.emplace_back(owned(name), units(q.value));
    out.push_back(std::move(rc));
  }
}

void add_claim(std::vector<std::string>& claims, std::string_view name) {
  if (!name.empty() && std::ranges::find(claims, name) == claims.end()) claims.emplace_back(name);
}

// Everything of PodObject but `invalid`, from its Document and view.
void fill_pod(PodObject& p) {
  const Document& d = p.doc;
  p.ns = owned(d.metadata.namespace_);
  p.name = owned(d.metadata.name);
  p.uid = owned(d.metadata.uid);
  p.creation = owned(d.metadata.creation_timestamp);
  p.labels = owned_map(d.metadata.labels);
  for (const auto& r : d.metadata.owner_references)
    if (r.controller) {
      p.controller = {owned(r.kind), owned(r.name)};
      break;
    }
  const Value* deletion = d.root->at({"metadata", "deletionTimestamp"});
  p.deleting = deletion != nullptr && !deletion->is_null();
  const Value* gates = d.root->at({"spec", "schedulingGates"});
  p.gated = gates != nullptr && gates->is_seq() && gates->size() > 0;
  const PodSpec& spec = p.view.spec;
  p.node = owned(spec.node_name.value);
  p.phase = owned(p.view.status.phase.value);
  p.start_time = owned(p.view.status.start_time.value);
  if (!spec.containers.empty()) p.image = owned(spec.containers.front().image.value);
  add_containers(spec.init_containers, true, p.containers);
  add_containers(spec.containers, false, p.containers);
  for (const auto& [name, q] : pod_requests(spec)) {
    if (name == "cpu") {
      p.cpu_milli = std::max<int64_t>(0, q.milli_value());
    } else if (name == "memory") {
      const int64_t bytes = q.value();
      p.memory_mib = bytes <= 0 ? 0 : (bytes + (1 << 20) - 1) >> 20;
    }
    if (is_gpu_device_resource(name)) p.requests.emplace(name, units(q));
  }
  for (const auto& c : spec.resource_claims) add_claim(p.claims, c.resource_claim_name.value);
  if (const Value* statuses = d.root->at({"status", "resourceClaimStatuses"}); statuses != nullptr)
    for (const Value& s : statuses->items())
      if (const Value* n = s.find("resourceClaimName"); n != nullptr && n->is_string()) add_claim(p.claims, n->text());
}

}  // namespace

int64_t ContainerResources::request(std::string_view resource) const {
  for (const auto& [name, n] : requests)
    if (name == resource) return n;
  return 0;
}

int64_t PodObject::request(std::string_view resource) const {
  const auto it = requests.find(std::string(resource));
  return it != requests.end() ? it->second : 0;
}

std::string PodObject::gpu_resource() const {
  for (const char* r : {"nvidia.com/gpu", "nvidia.com/gpu.shared"})
    if (request(r) > 0) return r;
  for (const auto& [r, n] : requests)
    if (n > 0) return r;
  return {};
}

std::optional<std::string_view> PodObject::annotation(std::string_view key) const {
  const auto it = doc.metadata.annotations.find(key);
  if (it == doc.metadata.annotations.end()) return std::nullopt;
  return it->second;
}

Result<PodObject> decode_pod(const json& pod) {
  const std::string what = fmt::format("pod {}/{}", text(pod, {"metadata", "namespace"}), text(pod, {"metadata", "name"}));
  auto doc = document_from_json(pod, what, "Pod");
  if (!doc) return std::unexpected(doc.error());
  auto view = as_pod(*doc);
  if (!view) return fail(ErrorCode::kInvalidArgument, "{}: kind {} is not Pod", what, doc->kind);
  PodObject p;
  p.doc = std::move(*doc);
  p.view = std::move(*view);
  fill_pod(p);
  p.invalid = resource_quantity_error(pod);
  return p;
}

Result<PodObject> pod_object(Document doc) {
  auto view = as_pod(doc);
  if (!view) return fail(ErrorCode::kInvalidArgument, "{}: kind {} is not Pod", doc.ref(), doc.kind);
  PodObject p;
  p.doc = std::move(doc);
  p.view = std::move(*view);
  fill_pod(p);
  for (const Issue& i : p.view.issues)
    if (i.invalid_quantity) {
      p.invalid = i.message;
      break;
    }
  return p;
}

int64_t NodeObject::label_int(std::string_view key) const {
  const auto it = labels.find(std::string(key));
  if (it == labels.end()) return 0;
  int64_t v = 0;
  const auto* b = it->second.data();
  const auto* e = b + it->second.size();
  const auto r = std::from_chars(b, e, v);
  return r.ec == std::errc() && r.ptr == e ? v : 0;
}

bool NodeObject::is_gpu_node() const {
  if (report) return true;
  const auto present = labels.find("nvidia.com/gpu.present");
  if (present != labels.end() && present->second == "true") return true;
  for (const auto& [r, v] : capacity)
    if (v > 0) return true;
  return label_int("nvidia.com/gpu.count") != 0;
}

Result<NodeObject> decode_node(const json& node) {
  const std::string what = fmt::format("node {}", text(node, {"metadata", "name"}));
  auto doc = document_from_json(node, what, "Node");
  if (!doc) return std::unexpected(doc.error());
  auto view = as_node(*doc);
  if (!view) return fail(ErrorCode::kInvalidArgument, "{}: kind {} is not Node", what, doc->kind);
  NodeObject n;
  n.doc = std::move(*doc);
  n.view = std::move(*view);
  n.name = owned(n.doc.metadata.name);
  n.labels = owned_map(n.doc.metadata.labels);
  n.unschedulable = n.view.unschedulable.value_or(false);
  if (const Condition* c = find_condition(n.view.conditions, "Ready")) n.ready = c->status == "True";
  for (const auto& [r, q] : n.view.capacity)
    if (is_gpu_device_resource(r)) n.capacity.emplace(r, units(q.value));
  for (const auto& [r, q] : n.view.allocatable) {
    if (is_gpu_device_resource(r)) n.allocatable.emplace(r, units(q.value));
    if (r == "cpu") n.cpu_milli = std::max<int64_t>(0, q.value.milli_value());
    if (r == "memory") n.memory_mib = std::max<int64_t>(0, q.value.value()) >> 20;
  }
  if (const std::string* report = annotation(node, kAnnotationNodeGpus)) {
    if (auto r = parse_node_report(*report)) {
      n.report = std::move(*r);
    } else {
      n.report_error = r.error().message;
    }
  }
  return n;
}

ClaimObject decode_claim(const json& claim) {
  ClaimObject c;
  c.ns = text(claim, {"metadata", "namespace"});
  c.name = text(claim, {"metadata", "name"});
  for (const auto& r : list(claim, {"status", "allocation", "devices", "results"}))
    c.devices.push_back({text(r, {"driver"}), text(r, {"pool"}), text(r, {"device"})});
  for (const auto& r : list(claim, {"status", "reservedFor"}))
    if (text(r, {"resource"}) == "pods") c.reserved_for.push_back(text(r, {"name"}));
  return c;
}

SliceObject decode_slice(const json& slice) {
  SliceObject s;
  s.name = text(slice, {"metadata", "name"});
  s.driver = text(slice, {"spec", "driver"});
  s.pool = text(slice, {"spec", "pool", "name"});
  s.node = text(slice, {"spec", "nodeName"});
  for (const auto& d : list(slice, {"spec", "devices"}))
    s.devices.push_back({text(d, {"name"}), !list(d, {"taints"}).empty()});
  return s;
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
  std::map<std::string, Quantity, std::less<>> requests, limits;
  for (const char* part : {"requests", "limits"}) {
    const json& m = at(c, {"resources", part});
    if (!m.is_object()) continue;
    for (const auto& [name, value] : m.items()) {
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
  for (const char* key : {"initContainers", "containers"}) {
    const json& containers = list(pod, {"spec", key});
    for (size_t i = 0; i < containers.size(); ++i) {
      const json& c = containers[i];
      if (!c.is_object()) continue;
      const std::string where = fmt::format("spec.{}[{}] ({})", key, i, text(c, {"name"}));
      if (auto e = container_quantity_error(c, where)) return e;
    }
  }
  return std::nullopt;
}

}  // namespace kgpu::k8s::api
