// Views of core/v1 kinds: Pod, Node, ResourceQuota, ConfigMap, Namespace, Service,
// PersistentVolumeClaim, and scheduling.k8s.io PriorityClass (k8s/objects.h).
#include "k8s/decode.h"

namespace kgpu::k8s {

using namespace detail;  // NOLINT: the shared decoder (k8s/decode.h)

// -----------------------------------------------------------------------------------------------
// Views
std::optional<Pod> as_pod(const Document& doc) {
  if (!is_kind(doc, "Pod")) return std::nullopt;
  Pod pod;
  Decoder d(&pod.issues);
  pod.spec = decode_pod_spec(d, doc.root, "");
  if (const Entry* se = Decoder::entry(doc.root, "status"); se != nullptr && se->value().is_map()) {
    const Value* status = &se->value();
    PodStatus& s = pod.status;
    s.line = se->key_line();
    s.phase = d.text(status, "phase", ".status");
    s.reason = d.text(status, "reason", ".status");
    s.message = d.text(status, "message", ".status");
    s.conditions = decode_conditions(d, status, ".status");
    s.container_statuses = decode_statuses(d, status, "containerStatuses", ".status");
    s.init_container_statuses = decode_statuses(d, status, "initContainerStatuses", ".status");
    s.nominated_node_name = d.text(status, "nominatedNodeName", ".status");
    s.start_time = d.text(status, "startTime", ".status");
  }
  return pod;
}

std::optional<KubeNode> as_node(const Document& doc) {
  if (!is_kind(doc, "Node")) return std::nullopt;
  KubeNode n;
  Decoder d(&n.issues);
  const Value* spec = d.map(doc.root, "spec", "");
  n.unschedulable = d.boolean(spec, "unschedulable", ".spec");
  for (const Value& t : d.seq(spec, "taints", ".spec")) {
    n.taints.push_back(Taint{Decoder::str(&t, "key"), Decoder::str(&t, "value"), Decoder::str(&t, "effect"), t.line()});
  }
  const Value* status = d.map(doc.root, "status", "");
  n.capacity = d.quantities(status, "capacity", ".status");
  n.allocatable = d.quantities(status, "allocatable", ".status");
  n.conditions = decode_conditions(d, status, ".status");
  if (const Value* info = Decoder::child(status, "nodeInfo")) {
    n.node_info = NodeSystemInfo{Decoder::str(info, "kernelVersion"),  Decoder::str(info, "containerRuntimeVersion"),
                                 Decoder::str(info, "kubeletVersion"), Decoder::str(info, "osImage"),
                                 Decoder::str(info, "architecture"),   Decoder::str(info, "operatingSystem")};
  }
  return n;
}

std::optional<ResourceQuota> as_resource_quota(const Document& doc) {
  if (!is_kind(doc, "ResourceQuota")) return std::nullopt;
  ResourceQuota q;
  Decoder d(&q.issues);
  const Value* spec = d.map(doc.root, "spec", "");
  q.hard = d.quantities(spec, "hard", ".spec");
  q.scopes = Decoder::views(spec, "scopes");
  const Value* status = d.map(doc.root, "status", "");
  q.status_hard = d.quantities(status, "hard", ".status");
  q.status_used = d.quantities(status, "used", ".status");
  return q;
}

std::optional<PriorityClass> as_priority_class(const Document& doc) {
  if (!is_kind(doc, "PriorityClass")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  return PriorityClass{d.integer(doc.root, "value", ""), d.boolean(doc.root, "globalDefault", ""),
                       d.text(doc.root, "preemptionPolicy", "")};
}

std::optional<ConfigMap> as_config_map(const Document& doc) {
  if (!is_kind(doc, "ConfigMap")) return std::nullopt;
  ConfigMap c;
  if (const Value* data = Decoder::child(doc.root, "data")) {
    std::vector<TextMap::value_type> kv;
    kv.reserve(data->size());
    for (const Entry& e : data->entries()) {
      if (e.value().is_scalar()) kv.emplace_back(e.key(), Text{e.value().text(), e.key_line()});
    }
    c.data.assign_last_wins(std::move(kv));
  }
  if (const Value* bin = Decoder::child(doc.root, "binaryData")) {
    for (const Entry& e : bin->entries()) c.binary_data_keys.push_back(e.key());
  }
  return c;
}

std::optional<Namespace> as_namespace(const Document& doc) {
  if (!is_kind(doc, "Namespace")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  return Namespace{d.text(Decoder::child(doc.root, "status"), "phase", ".status")};
}

std::optional<Service> as_service(const Document& doc) {
  if (!is_kind(doc, "Service")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  Service s;
  const Value* spec = d.map(doc.root, "spec", "");
  s.type = d.text(spec, "type", ".spec");
  s.selector = d.strings(spec, "selector", ".spec", &s.selector_line);
  s.cluster_ip = d.text(spec, "clusterIP", ".spec");
  for (const Value& p : d.seq(spec, "ports", ".spec")) {
    ServicePort port;
    port.name = Decoder::str(&p, "name");
    if (const Value* n = Decoder::child(&p, "port")) port.port = n->as_int().value_or(0);
    port.target_port = d.int_or_string(&p, "targetPort", ".spec.ports[]").value;
    port.protocol = Decoder::str(&p, "protocol");
    port.line = p.line();
    s.ports.push_back(port);
  }
  return s;
}

std::optional<PersistentVolumeClaim> as_persistent_volume_claim(const Document& doc) {
  if (!is_kind(doc, "PersistentVolumeClaim")) return std::nullopt;
  PersistentVolumeClaim c;
  Decoder d(&c.issues);
  const Value* spec = d.map(doc.root, "spec", "");
  c.storage_class_name = d.text(spec, "storageClassName", ".spec");
  c.access_modes = d.texts(spec, "accessModes", ".spec");
  c.volume_name = d.text(spec, "volumeName", ".spec");
  c.volume_mode = d.text(spec, "volumeMode", ".spec");
  const Value* requests = Decoder::child(Decoder::child(spec, "resources"), "requests");
  if (const Entry* e = Decoder::entry(requests, "storage")) c.storage = d.quantity(*e, ".spec.resources.requests");
  c.phase = d.text(Decoder::child(doc.root, "status"), "phase", ".status");
  return c;
}

}  // namespace kgpu::k8s
