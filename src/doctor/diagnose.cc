#include "doctor/diagnose.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

#include "sched/k8s_adapter.h"

namespace kgpu::doctor {

namespace {

using PodObj = Obj<k8s::Pod>;
using NodeObj = Obj<k8s::KubeNode>;
using sv = std::string_view;

// ---------------------------------------------------------------------------------------------
// Helpers

bool contains(sv haystack, sv needle) { return haystack.find(needle) != sv::npos; }

bool contains_any(sv haystack, std::span<const sv> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](sv n) { return contains(haystack, n); });
}

bool contains_any(sv haystack, std::initializer_list<sv> needles) {
  return contains_any(haystack, std::span<const sv>(needles.begin(), needles.size()));
}

std::string lower(sv s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_gpu_resource(sv name) {
  return name == "nvidia.com/gpu" || name.starts_with("nvidia.com/mig-") || name.starts_with("nvidia.com/gpu.");
}

struct GpuRequest {
  std::string resource;
  k8s::Quantity quantity;
};

std::optional<GpuRequest> gpu_request(const k8s::PodSpec& spec) {
  for (const auto& list : {&spec.containers, &spec.init_containers}) {
    for (const auto& c : *list) {
      for (const auto* m : {&c.resources.limits, &c.resources.requests}) {
        for (const auto& [name, q] : *m) {
          if (!is_gpu_resource(name) || q->is_zero()) continue;  // `nvidia.com/gpu: 0` asks for no GPU
          auto total = k8s::pod_request(spec, name);
          if (!total.is_zero()) return GpuRequest{std::string(name), std::move(total)};
        }
      }
    }
  }
  return std::nullopt;
}

std::string age(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds >= 86400) return fmt::format("{}d{}h", seconds / 86400, seconds % 86400 / 3600);
  if (seconds >= 3600) return fmt::format("{}h{}m", seconds / 3600, seconds % 3600 / 60);
  return fmt::format("{}m", seconds / 60);
}

std::string pod_ref(const PodObj& p) { return fmt::format("pod/{}/{}", p.ns(), p.name()); }

Evidence event_evidence(const Obj<k8s::Event>& e) {
  const auto& v = e.v;
  const auto ts = v.last_timestamp.empty() ? v.event_time : v.last_timestamp;
  return Evidence{
      fmt::format("event {} {} on {}/{}{} (x{}, last {}) at {}", v.type, v.reason, lower(v.involved_object.kind),
                  v.involved_object.namespace_.empty() ? "" : v.involved_object.namespace_,
                  v.involved_object.namespace_.empty() ? std::string(v.involved_object.name)
                                                       : "/" + std::string(v.involved_object.name),
                  std::max<int64_t>(1, v.count), ts, e.doc->where()),
      std::string(v.message)};
}

// The latest event about the object with that reason (any reason when empty).
const Obj<k8s::Event>* last_event(const Snapshot& s, sv kind, sv ns, sv name, sv reason, sv needle = {}) {
  const Obj<k8s::Event>* out = nullptr;
  for (const auto* e : s.events_for(kind, ns, name)) {
    if ((reason.empty() || e->v.reason == reason) && (needle.empty() || contains(e->v.message, needle))) out = e;
  }
  return out;
}

struct LogHit {
  const ContainerLog* log = nullptr;
  int line = 0;
  sv text;
};

std::optional<LogHit> find_in_logs(std::span<const ContainerLog* const> logs, std::span<const sv> needles) {
  for (const auto* l : logs) {
    sv t = l->text;
    int n = 1;
    size_t pos = 0;
    while (pos <= t.size()) {
      size_t end = t.find('\n', pos);
      if (end == sv::npos) end = t.size();
      sv line = t.substr(pos, end - pos);
      if (contains_any(line, needles)) return LogHit{l, n, line};
      pos = end + 1;
      ++n;
    }
  }
  return std::nullopt;
}

std::optional<LogHit> find_in_logs(std::span<const ContainerLog* const> logs, std::initializer_list<sv> needles) {
  return find_in_logs(logs, std::span<const sv>(needles.begin(), needles.size()));
}

Evidence log_evidence(const LogHit& h) {
  return Evidence{fmt::format("log {}/{} container {}{} line {} (snapshot {})", h.log->ns, h.log->pod, h.log->container,
                              h.log->previous ? " (previous)" : "", h.line, h.log->doc->where()),
                  std::string(h.text)};
}

sv label(const k8s::Document* doc, sv key) {
  auto it = doc->metadata.labels.find(key);
  return it == doc->metadata.labels.end() ? sv{} : it->second;
}

bool is_gpu_node(const NodeObj& n) {
  const auto* d = n.doc;
  if (label(d, "nvidia.com/gpu.present") == "true" || !label(d, "nvidia.com/gpu.product").empty() ||
      label(d, "feature.node.kubernetes.io/pci-10de.present") == "true") {
    return true;
  }
  for (const auto& [name, q] : n.v.capacity) {
    if (is_gpu_resource(name) && !q->is_zero()) return true;
  }
  return false;
}

int64_t gpu_allocatable(const NodeObj& n) {
  int64_t total = 0;
  for (const auto& [name, q] : n.v.allocatable) {
    if (is_gpu_resource(name)) total += q->value();
  }
  return total;
}

// GPU operator / kgpu component of a pod, by its name or app label: "driver", "toolkit",
// "device-plugin", "validator", "cuda-validator", "mig-manager", "dcgm-exporter", "kgpu-agent", "".
sv component(const PodObj& p) {
  sv app = label(p.doc, "app");
  if (app.empty()) app = label(p.doc, "app.kubernetes.io/name");
  for (sv s : {app, p.name()}) {
    if (s.starts_with("nvidia-driver")) return "driver";
    if (s.starts_with("nvidia-container-toolkit")) return "toolkit";
    if (s.starts_with("nvidia-device-plugin")) return "device-plugin";
    if (s.starts_with("nvidia-operator-validator")) return "validator";
    if (s.starts_with("nvidia-cuda-validator")) return "cuda-validator";
    if (s.starts_with("nvidia-mig-manager")) return "mig-manager";
    if (s.starts_with("nvidia-dcgm-exporter")) return "dcgm-exporter";
    if (s.starts_with("kgpu-agent") || s == "kgpu") return "kgpu-agent";
  }
  return "";
}

const PodObj* stack_pod_on(const Snapshot& s, sv node, sv comp) {
  for (size_t i : s.pods_on(node)) {
    if (component(s.pods[i]) == comp) return &s.pods[i];
  }
  return nullptr;
}

// "Running", "CrashLoopBackOff", "Init:CrashLoopBackOff", "Init:1/4" ... as kubectl prints.
std::string pod_status_text(const k8s::Pod& p) {
  const auto& inits = p.status.init_container_statuses;
  for (size_t i = 0; i < inits.size(); ++i) {
    const auto& st = inits[i].state;
    if (st.state == "terminated" && st.exit_code == 0) continue;
    if (!st.reason.empty() && st.reason != "PodInitializing") return fmt::format("Init:{}", st.reason);
    return fmt::format("Init:{}/{}", i, inits.size());
  }
  for (const auto& c : p.status.container_statuses) {
    if (c.state.state == "waiting" && !c.state.reason.empty()) return std::string(c.state.reason);
    if (c.state.state == "terminated" && !c.state.reason.empty()) return std::string(c.state.reason);
  }
  if (!p.status.reason->empty()) return std::string(*p.status.reason);
  return std::string(p.status.phase.value_or("Unknown"));
}

// The controller at the top of a pod's owner chain: ("Deployment", name) through a ReplicaSet
// named <deployment>-<hash>, else the direct controller, else ("Pod", name).
std::pair<std::string, std::string> top_owner(const Snapshot& s, const PodObj& p) {
  for (const auto& o : p.doc->metadata.owner_references) {
    if (!o.controller) continue;
    if (o.kind == "ReplicaSet") {
      if (const auto* rs = s.workload("ReplicaSet", p.ns(), o.name)) {
        for (const auto& ro : rs->doc->metadata.owner_references) {
          if (ro.kind == "Deployment") return {"Deployment", std::string(ro.name)};
        }
      }
      if (auto dash = o.name.rfind('-'); dash != sv::npos) {
        const sv dep = o.name.substr(0, dash);
        if (s.workload("Deployment", p.ns(), dep) != nullptr) return {"Deployment", std::string(dep)};
      }
    }
    return {std::string(o.kind), std::string(o.name)};
  }
  return {"Pod", std::string(p.name())};
}

std::string patch_command(const std::pair<std::string, std::string>& owner, sv ns, const std::string& spec_json) {
  if (owner.first == "Pod") {
    return fmt::format(
        "kubectl get pod -n {} {} -o yaml > pod.yaml  # edit: {} ; then kubectl replace --force -f pod.yaml", ns,
        owner.second, spec_json);
  }
  const std::string path = owner.first == "CronJob"
                               ? "{\"spec\":{\"jobTemplate\":{\"spec\":{\"template\":{\"spec\":" + spec_json + "}}}}}"
                               : "{\"spec\":{\"template\":{\"spec\":" + spec_json + "}}}";
  return fmt::format("kubectl patch {} -n {} {} --type merge -p '{}'", lower(owner.first), ns, owner.second, path);
}

const k8s::Container* first_gpu_container(const k8s::PodSpec& spec) {
  for (const auto& c : spec.containers) {
    for (const auto& [name, q] : c.resources.limits) {
      if (is_gpu_resource(name)) return &c;
    }
    for (const auto& [name, q] : c.resources.requests) {
      if (is_gpu_resource(name)) return &c;
    }
  }
  return nullptr;
}

class Diagnoser {
 public:
  Diagnoser(const Snapshot& s, const Options& o) : s_(s), o_(o) {}

  std::vector<Finding> run();

 private:
  bool in_scope_pod(const PodObj& p) const;
  bool in_scope_node(const NodeObj& n) const;
  bool in_scope_ns(sv ns) const;

  std::optional<Finding> pod_finding(const PodObj& p);
  std::optional<Finding> admission(const PodObj& p);
  std::optional<Finding> admission_out_of(const PodObj& p, const GpuRequest& req);
  std::optional<Finding> scheduling(const PodObj& p, const GpuRequest& req);
  std::optional<Finding> dra(const PodObj& p);
  std::optional<Finding> runtime(const PodObj& p);
  std::optional<Finding> app(const PodObj& p, const std::optional<GpuRequest>& req);
  void add_scheduling_evidence(const PodObj& p, Finding& f);

  void node_findings(const NodeObj& n);
  void invalid_field_findings();
  void driver_findings();
  void spec_findings();
  std::pair<sv, sv> creator_of(sv kind, sv ns, sv name) const;
  void checklist();

  Finding& add(Finding f) { return out_.emplace_back(std::move(f)); }

  // Pods holding a device resource, by node (indices as in Snapshot::nodes).
  struct Holder {
    const PodObj* pod = nullptr;
    size_t node = 0;
    int64_t gpus = 0;
    int64_t running_s = 0;
    std::string why;  // "notebook, running for days: likely idle", ...; "" = nothing suspicious
  };
  struct Holders {
    std::vector<Holder> all;
    std::vector<std::vector<size_t>> by_node;
    std::vector<int> finished;  // finished pods that requested the resource, per node
    std::vector<size_t> order;  // suspicious first, then longest running
  };
  const Holders& holders(const std::string& resource);
  std::map<std::string, Holders> holders_;

  const Snapshot& s_;
  const Options& o_;
  std::vector<Finding> out_;
  std::set<std::string> not_advertised_nodes_;
};

bool Diagnoser::in_scope_ns(sv ns) const {
  switch (o_.target.kind) {
    case Target::Kind::kCluster:
      return true;
    case Target::Kind::kNamespace:
      return ns == o_.target.ns;
    default:
      return false;
  }
}

bool Diagnoser::in_scope_pod(const PodObj& p) const {
  switch (o_.target.kind) {
    case Target::Kind::kCluster:
      return true;
    case Target::Kind::kNamespace:
      return p.ns() == o_.target.ns;
    case Target::Kind::kPod:
      return p.ns() == o_.target.ns && p.name() == o_.target.name;
    case Target::Kind::kNode:
      return *p.v.spec.node_name == o_.target.name;
  }
  return false;
}

bool Diagnoser::in_scope_node(const NodeObj& n) const {
  return o_.target.kind == Target::Kind::kCluster ||
         (o_.target.kind == Target::Kind::kNode && n.name() == o_.target.name);
}

// ---------------------------------------------------------------------------------------------
// Pods

std::optional<Finding> Diagnoser::pod_finding(const PodObj& p) {
  const auto req = gpu_request(p.v.spec);
  const sv phase = p.v.status.phase.value_or("");
  if (phase == "Succeeded") return std::nullopt;
  if (phase == "Failed" && *p.v.status.reason == "UnexpectedAdmissionError") return admission(p);
  if (phase == "Failed" && p.v.status.reason->starts_with("OutOf") && !p.v.spec.node_name->empty() && req) {
    return admission_out_of(p, *req);
  }
  if (phase == "Pending" && p.v.spec.node_name->empty()) {
    if (!p.v.spec.resource_claims.empty() && !req) return dra(p);
    if (req) return scheduling(p, *req);
    return std::nullopt;
  }
  if (auto f = runtime(p)) return f;
  return app(p, req);
}

void Diagnoser::add_scheduling_evidence(const PodObj& p, Finding& f) {
  if (const auto* e = last_event(s_, "Pod", p.ns(), p.name(), "FailedScheduling")) {
    f.evidence.push_back(event_evidence(*e));
  } else if (const auto* c = k8s::find_condition(p.v.status.conditions, "PodScheduled");
             c != nullptr && c->status == "False") {
    f.evidence.push_back(Evidence{
        fmt::format("{} .status.conditions[PodScheduled] ({}) at {}", pod_ref(p), c->reason, p.doc->where(c->line)),
        std::string(c->message)});
  }
}

std::optional<Finding> Diagnoser::admission(const PodObj& p) {
  const sv msg = *p.v.status.message;
  const sv node_name = *p.v.spec.node_name;
  Finding f;
  f.layer = Layer::kPlugin;
  f.severity = Severity::kCritical;
  f.object = pod_ref(p);
  f.evidence.push_back(Evidence{fmt::format("{} .status (reason UnexpectedAdmissionError) at {}", pod_ref(p),
                                            p.doc->where(p.v.status.message.line)),
                                std::string(msg)});
  const auto owner = top_owner(s_, p);
  const NodeObj* node = s_.node(node_name);
  if (contains_any(msg, {"maximum request size for shared resources is 1", "too large"})) {
    f.rule = "admission-shared-request";
    const auto req = gpu_request(p.v.spec);
    f.summary = fmt::format(
        "the kubelet rejected the pod on {}: it asks for {} {} replicas of a shared (time-sliced) "
        "GPU and the plugin fails requests greater than one (failRequestsGreaterThanOne)",
        node_name, req ? req->quantity.to_string() : "several", req ? req->resource : "GPU");
    if (node != nullptr) {
      if (sv r = label(node->doc, "nvidia.com/gpu.replicas"); !r.empty()) {
        f.evidence.push_back(
            Evidence{fmt::format("node/{} label at {}", node_name, node->doc->where(node->doc->metadata.labels_line)),
                     fmt::format("nvidia.com/gpu.replicas={}", r)});
      }
    }
    f.details.push_back(
        "Two replicas of a time-sliced GPU are not twice the compute; request one replica, or a MIG "
        "slice or whole GPU on an unshared node pool.");
    f.fix.push_back(
        patch_command(owner, p.ns(),
                      fmt::format("{{\"containers\":[{{\"name\":\"{}\",\"resources\":{{\"limits\":{{\"{}\":1}}}}}}]}}",
                                  first_gpu_container(p.v.spec) ? first_gpu_container(p.v.spec)->name : "main",
                                  req ? req->resource : "nvidia.com/gpu")));
    if (owner.first != "Pod") f.fix.push_back(fmt::format("kubectl delete pod -n {} {}", p.ns(), p.name()));
    return f;
  }
  f.rule = "admission-plugin-not-registered";
  f.summary = fmt::format(
      "the kubelet on {} admitted the pod before the device plugin had (re-)registered its devices "
      "(typically right after a kubelet restart); the pod failed and will not be retried",
      node_name);
  if (const auto* e = last_event(s_, "Node", "", node_name, "Starting")) f.evidence.push_back(event_evidence(*e));
  if (const auto* dp = stack_pod_on(s_, node_name, "device-plugin")) {
    f.details.push_back(
        fmt::format("device plugin pod {}/{} on the node: {}", dp->ns(), dp->name(), pod_status_text(dp->v)));
  }
  f.fix.push_back(fmt::format("kubectl delete pod -n {} {}{}", p.ns(), p.name(),
                              owner.first == "Pod" ? "  # bare pod: re-apply its manifest afterwards" : ""));
  f.fix.push_back(fmt::format("kubectl get node {} -o jsonpath='{{.status.allocatable}}'", node_name));
  f.fix.push_back(
      "kubectl rollout restart -n gpu-operator daemonset/nvidia-device-plugin-daemonset  # if still missing");
  return f;
}

// A pod bound by hand (spec.nodeName) skips the scheduler; the kubelet's admission then rejects it
// with reason OutOf<resource> when the node's GPUs (or CPU, memory) are taken.
std::optional<Finding> Diagnoser::admission_out_of(const PodObj& p, const GpuRequest& req) {
  const sv node_name = *p.v.spec.node_name;
  const sv resource = sv(*p.v.status.reason).substr(5);
  Finding f;
  f.rule = "admission-out-of-resource";
  f.layer = Layer::kScheduler;
  f.severity = Severity::kCritical;
  f.object = pod_ref(p);
  f.summary = fmt::format(
      "the kubelet on {} rejected the pod (OutOf{}): it names its node in spec.nodeName, which skips the "
      "scheduler, and the node had no free {}",
      node_name, resource, resource);
  f.evidence.push_back(Evidence{
      fmt::format("{} .status (reason {}) at {}", pod_ref(p), *p.v.status.reason, p.doc->where(p.v.status.reason.line)),
      std::string(*p.v.status.message)});
  if (const NodeObj* node = s_.node(node_name); node != nullptr && is_gpu_resource(resource)) {
    const Holders& table = holders(std::string(resource));
    const auto i = static_cast<size_t>(node - s_.nodes.data());
    if (i < table.by_node.size()) {
      for (size_t h : table.by_node[i]) {
        const Holder& hd = table.all[h];
        if (hd.pod == &p) continue;
        f.details.push_back(fmt::format("{}/{} holds {} {} on {}, running {}{}", hd.pod->ns(), hd.pod->name(), hd.gpus,
                                        resource, node_name, age(hd.running_s), hd.why.empty() ? "" : " -- " + hd.why));
      }
    }
  }
  const auto owner = top_owner(s_, p);
  f.fix.push_back(
      fmt::format("drop spec.nodeName and select the node with a nodeSelector (kubernetes.io/hostname: {}) so that the "
                  "scheduler waits for a free {}",
                  node_name, req.resource));
  f.fix.push_back(fmt::format("kubectl delete pod -n {} {}{}", p.ns(), p.name(),
                              owner.first == "Pod" ? "  # bare pod: re-apply its manifest afterwards" : ""));
  return f;
}

std::optional<Finding> Diagnoser::scheduling(const PodObj& p, const GpuRequest& req) {
  if (s_.nodes.empty()) return std::nullopt;  // snapshot-no-nodes
  Finding f;
  f.layer = Layer::kScheduler;
  f.severity = Severity::kCritical;
  f.object = pod_ref(p);
  const auto owner = top_owner(s_, p);
  if (!req.quantity.is_integer() || req.quantity.is_negative()) {
    f.layer = Layer::kSpec;
    f.rule = "gpu-request-fractional";
    f.summary = fmt::format("the pod requests {} {}: extended resources must be whole numbers",
                            req.quantity.to_string(), req.resource);
    return f;
  }
  const sched::Cluster& cluster = s_.cluster(req.resource);
  const sched::Pod spod = sched::pod_from_k8s(*p.doc, p.v, req.resource);
  const auto filters = sched::filters_for(p.v, s_.node_refs());
  const sched::FitReport fit = sched::explain_fit(spod, cluster, filters);
  if (fit.outcome.feasible > 0) return std::nullopt;  // fits now: the scheduler's next attempt places it
  f.details.push_back(fmt::format("kgpu's scheduler filters over the snapshot: {}", fit.outcome.message()));
  add_scheduling_evidence(p, f);

  const size_t n = cluster.nodes().size();
  std::vector<size_t> past_selector, past_taint;
  for (size_t i = 0; i < n; ++i) {
    const sv plugin = fit.plugin[i];
    if (plugin == "NodeSelector" || plugin == "NodeAffinity") continue;
    past_selector.push_back(i);
    if (plugin != "TaintToleration" && plugin != "NodeUnschedulable") past_taint.push_back(i);
  }
  const auto has_gpu = [&](size_t i) { return cluster.node(i).gpus() > 0; };

  if (past_selector.empty()) {
    f.rule = "selector-no-match";
    f.summary = "no node matches the pod's node selector / required node affinity";
    // Near misses: the value a node carries for each selector key.
    std::vector<std::pair<std::string, std::string>> wanted;
    for (const auto& [k, v] : p.v.spec.node_selector) wanted.emplace_back(k, v);
    for (const auto& term : p.v.spec.required_node_affinity) {
      for (const auto& r : term.match_expressions) {
        if (r.op == "In") {
          for (sv v : r.values) wanted.emplace_back(r.key, v);
        }
      }
    }
    std::string suggestion_key, suggestion_value;
    for (const auto& [k, v] : wanted) {
      std::map<std::string, int> values;
      for (const auto& node : cluster.nodes()) {
        if (auto it = node.labels.find(k); it != node.labels.end()) ++values[it->second];
      }
      if (values.empty()) {
        f.details.push_back(fmt::format("no node has the label {} at all", k));
        continue;
      }
      if (values.contains(v)) continue;
      std::vector<std::string> listed;
      for (const auto& [val, count] : values) listed.push_back(fmt::format("{} ({} node(s))", val, count));
      f.details.push_back(
          fmt::format("selector {}={} matches no node; nodes carry: {}", k, v, fmt::join(listed, ", ")));
      for (const auto& [val, count] : values) {
        sv nv = val;
        if (nv == v + "-SHARED") {
          f.details.push_back(
              fmt::format("{} is {} with time-slicing's -SHARED suffix: the node's GPUs are shared "
                          "replicas now (renameByDefault=false keeps the resource name, the product "
                          "label changes)",
                          val, v));
          suggestion_key = k, suggestion_value = val;
        } else if (nv.starts_with(v + "-MIG-")) {
          f.details.push_back(
              fmt::format("{} is {} with the MIG (single strategy) product suffix: the node's GPUs are "
                          "MIG slices now",
                          val, v));
          suggestion_key = k, suggestion_value = val;
        } else if (v == val + "-SHARED" || sv(v).starts_with(val + "-MIG-")) {
          f.details.push_back(
              fmt::format("the pod asks for {} but the nodes are not shared/partitioned that way: {}", v, val));
          suggestion_key = k, suggestion_value = val;
        }
      }
    }
    if (!suggestion_key.empty()) {
      f.fix.push_back(patch_command(
          owner, p.ns(), fmt::format("{{\"nodeSelector\":{{\"{}\":\"{}\"}}}}", suggestion_key, suggestion_value)));
    }
    f.fix.push_back(
        fmt::format("kubectl get nodes -L nvidia.com/gpu.product -L nvidia.com/gpu.replicas -L nvidia.com/mig.config"));
    return f;
  }
  // Cordoned or NotReady/unreachable/under-pressure nodes: the node controller's
  // node.kubernetes.io/* taints and spec.unschedulable say the node's state, not a missing toleration.
  const auto first_untolerated = [&](size_t i) -> const k8s::Taint* {
    for (const auto& t : s_.nodes[i].v.taints) {
      if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
      if (!k8s::tolerates(p.v.spec.tolerations, t)) return &t;
    }
    return nullptr;
  };
  const auto node_state = [&](size_t i) -> const k8s::Taint* {
    if (fit.plugin[i] != "TaintToleration") return nullptr;
    const k8s::Taint* t = first_untolerated(i);
    return t != nullptr && t->key.starts_with("node.kubernetes.io/") ? t : nullptr;
  };
  if (std::none_of(past_taint.begin(), past_taint.end(), has_gpu)) {
    std::vector<size_t> unavailable;
    for (size_t i : past_selector) {
      if (has_gpu(i) && (fit.plugin[i] == "NodeUnschedulable" || node_state(i) != nullptr)) unavailable.push_back(i);
    }
    if (!unavailable.empty()) {
      f.rule = "gpu-node-unavailable";
      f.layer = Layer::kNode;
      f.summary = "the GPU nodes the pod may use are cordoned or not ready: they take no new pods";
      for (size_t i : unavailable) {
        const NodeObj& node = s_.nodes[i];
        const sv name = node.name();
        if (fit.plugin[i] == "NodeUnschedulable") {
          f.details.push_back(fmt::format("node {} is cordoned (spec.unschedulable: true)", name));
          f.evidence.push_back(Evidence{
              fmt::format("node/{} .spec.unschedulable at {}", name, node.doc->where(node.v.unschedulable.line)),
              "unschedulable: true"});
          f.fix.push_back(fmt::format("kubectl uncordon {}  # once its maintenance is over", name));
          continue;
        }
        const k8s::Taint& t = *node_state(i);
        f.evidence.push_back(Evidence{fmt::format("node/{} .spec.taints at {}", name, node.doc->where(t.line)),
                                      fmt::format("{}={}:{}", t.key, t.value, t.effect)});
        const sv what = t.key.substr(sv("node.kubernetes.io/").size());
        if (what == "unschedulable") {
          f.details.push_back(fmt::format("node {} is cordoned (taint {})", name, t.key));
          f.fix.push_back(fmt::format("kubectl uncordon {}  # once its maintenance is over", name));
        } else if (what == "not-ready" || what == "unreachable") {
          f.details.push_back(fmt::format("node {} is NotReady ({}): its kubelet is not posting a Ready status", name,
                                          what == "unreachable" ? "unreachable" : "not ready"));
          f.fix.push_back(fmt::format("kubectl describe node {} | grep -A12 Conditions", name));
          f.fix.push_back(fmt::format("# on the node: systemctl status kubelet containerd; journalctl -u kubelet"));
        } else {
          f.details.push_back(fmt::format("node {} reports {} (taint {})", name, what, t.key));
          f.fix.push_back(fmt::format("kubectl describe node {} | grep -A12 Conditions", name));
        }
      }
      return f;
    }
  }
  if (std::none_of(past_taint.begin(), past_taint.end(), has_gpu) &&
      std::any_of(past_selector.begin(), past_selector.end(), has_gpu)) {
    f.rule = "gpu-taint-not-tolerated";
    f.summary = "every node with a free-able GPU that matches the selector has a taint the pod does not tolerate";
    std::string key, value, effect;
    for (size_t i : past_selector) {
      if (!has_gpu(i) || fit.plugin[i] != "TaintToleration") continue;
      const NodeObj& node = s_.nodes[i];
      for (const auto& t : node.v.taints) {
        if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
        if (k8s::tolerates(p.v.spec.tolerations, t)) continue;
        if (key.empty()) key = t.key, value = t.value, effect = t.effect;
        f.evidence.push_back(Evidence{fmt::format("node/{} .spec.taints at {}", node.name(), node.doc->where(t.line)),
                                      fmt::format("{}={}:{}", t.key, t.value, t.effect)});
        break;
      }
      if (f.evidence.size() >= 4) break;
    }
    f.fix.push_back(
        patch_command(owner, p.ns(),
                      fmt::format("{{\"tolerations\":[{{\"key\":\"{}\",\"operator\":\"Exists\",\"effect\":\"{}\"}}]}}",
                                  key, effect)));
    return f;
  }
  if (std::none_of(past_taint.begin(), past_taint.end(), has_gpu)) {
    // The nodes advertise the GPUs under another name: time-slicing/MPS with renameByDefault=true
    // (nvidia.com/gpu.shared), or the other way round.
    std::map<std::string, std::vector<std::string>> other;  // resource -> nodes
    for (size_t i : past_taint) {
      for (const auto& [name, q] : s_.nodes[i].v.allocatable) {
        if (is_gpu_resource(name) && name != req.resource && q->value() > 0) {
          other[std::string(name)].emplace_back(s_.nodes[i].name());
        }
      }
    }
    if (!other.empty()) {
      f.rule = "gpu-resource-name-mismatch";
      f.layer = Layer::kSpec;
      const auto& [name, on] = *other.begin();
      f.summary =
          fmt::format("the pod asks for {} but the nodes it may use advertise their GPUs as {}", req.resource, name);
      for (const auto& [res, nodes] : other) {
        f.details.push_back(fmt::format("{} on {}", res, fmt::join(nodes, ", ")));
      }
      if (name.ends_with(".shared") || req.resource.ends_with(".shared")) {
        f.details.push_back(
            "the device plugin's sharing config (time-slicing or MPS) has renameByDefault: true, which "
            "advertises shared replicas as <resource>.shared; request that name, or set renameByDefault: "
            "false to keep nvidia.com/gpu");
      }
      f.fix.push_back(patch_command(
          owner, p.ns(),
          fmt::format("{{\"containers\":[{{\"name\":\"{}\",\"resources\":{{\"limits\":{{\"{}\":{}}}}}}}]}}",
                      first_gpu_container(p.v.spec) ? first_gpu_container(p.v.spec)->name : "main", name,
                      req.quantity.to_string())));
      f.fix.push_back(fmt::format("kubectl get node {} -o jsonpath='{{.status.allocatable}}'", on.front()));
      return f;
    }
    f.rule = "gpu-not-advertised";
    f.layer = Layer::kPlugin;
    f.summary =
        fmt::format("no node the pod may use advertises {}: the device plugin has not registered it", req.resource);
    for (size_t i : past_taint) {
      const NodeObj& node = s_.nodes[i];
      if (!is_gpu_node(node)) continue;
      f.details.push_back(fmt::format("GPU node {} has no allocatable {}", node.name(), req.resource));
      if (const auto* v = stack_pod_on(s_, node.name(), "validator")) {
        f.details.push_back(fmt::format("validator {}/{}: {}", v->ns(), v->name(), pod_status_text(v->v)));
      }
      f.fix.push_back(fmt::format("kgpu doctor --node {}", node.name()));
      break;
    }
    f.fix.push_back("kubectl get pods -n gpu-operator -o wide");
    return f;
  }
  // Candidates: past selector and taints, with GPUs.
  std::vector<size_t> candidates;
  for (size_t i : past_taint) {
    if (has_gpu(i)) candidates.push_back(i);
  }
  // GPUs free but CPU or memory not: a GPU node filled by other pods.
  std::vector<size_t> blocked;
  for (size_t i : candidates) {
    if (fit.reasons[i] && (*fit.reasons[i] == "Insufficient cpu" || *fit.reasons[i] == "Insufficient memory") &&
        cluster.node(i).full_free_gpus() >= spod.num_gpu) {
      blocked.push_back(i);
    }
  }
  if (!blocked.empty()) {
    candidates = blocked;
    f.rule = "gpu-node-cpu-memory-full";
    f.summary = "the GPU nodes have free GPUs but not enough free CPU or memory for the pod: non-GPU pods fill them";
    for (size_t i : candidates) {
      const NodeObj& node = s_.nodes[i];
      int cpu_pods = 0;
      for (size_t k : s_.pods_on(node.name())) {
        const auto& q = s_.pods[k];
        if (sched::holds_node_resources(q.v) && !gpu_request(q.v.spec) && component(q).empty()) ++cpu_pods;
      }
      f.details.push_back(fmt::format("{}: {} ({} non-GPU pods on it; GPU node taint: {})", node.name(),
                                      *fit.reasons[i], cpu_pods, node.v.taints.empty() ? "none" : "present"));
    }
    // Taint only the nodes that lack the GPU taint: on tainted ones the CPU pods tolerate it already.
    for (size_t i : candidates) {
      const auto& taints = s_.nodes[i].v.taints;
      if (std::none_of(taints.begin(), taints.end(), [](const k8s::Taint& t) { return t.key == "nvidia.com/gpu"; })) {
        f.fix.push_back(fmt::format("kubectl taint nodes {} nvidia.com/gpu=present:NoSchedule", s_.nodes[i].name()));
        break;
      }
    }
    f.fix.push_back(fmt::format("kubectl describe node {} | grep -A8 \"Allocated resources\"",
                                s_.nodes[candidates.front()].name()));
    return f;
  }
  // Insufficient GPUs: who holds them? (per-resource holder table, built once)
  const Holders& table = holders(req.resource);
  const Obj<k8s::Workload>* deployment =
      owner.first == "Deployment" ? s_.workload("Deployment", p.ns(), owner.second) : nullptr;
  const PodObj* sibling = nullptr;
  // A rollout is under way only when the holder belongs to another revision (pod-template-hash, or
  // the owning ReplicaSet): pods of the same revision are a plain scale-out.
  const auto owning_rs = [](const PodObj& q) -> sv {
    for (const auto& o : q.doc->metadata.owner_references) {
      if (o.kind == "ReplicaSet") return o.name;
    }
    return {};
  };
  const auto other_revision = [&](const PodObj& q) {
    const sv a = label(q.doc, "pod-template-hash"), b = label(p.doc, "pod-template-hash");
    if (!a.empty() && !b.empty()) return a != b;
    const sv ra = owning_rs(q), rb = owning_rs(p);
    return !ra.empty() && !rb.empty() && ra != rb;
  };
  std::vector<char> is_candidate(n, 0);
  int finished = 0;
  size_t holder_count = 0;
  for (size_t i : candidates) {
    is_candidate[i] = 1;
    finished += table.finished[i];
    holder_count += table.by_node[i].size();
    if (deployment == nullptr) continue;
    for (size_t h : table.by_node[i]) {
      const PodObj& q = *table.all[h].pod;
      if (q.ns() == p.ns() && q.name() != p.name() && deployment->v.selector.matches(q.doc->metadata.labels) &&
          other_revision(q))
        sibling = &q;
    }
  }
  std::vector<const Holder*> shown;
  for (size_t h : table.order) {
    if (shown.size() >= 8) break;
    if (is_candidate[table.all[h].node]) shown.push_back(&table.all[h]);
  }
  if (deployment != nullptr && sibling != nullptr &&
      deployment->v.strategy_type.value_or("RollingUpdate") != "Recreate") {
    f.rule = "rolling-update-second-gpu";
    f.summary = fmt::format(
        "a rolling update of deployment {} needs a second GPU while the old pod {} still holds the "
        "only free one",
        owner.second, sibling->name());
    f.evidence.push_back(
        Evidence{fmt::format("deployment/{}/{} .spec.strategy at {}", p.ns(), owner.second,
                             deployment->doc->where(deployment->v.strategy_type.line)),
                 fmt::format("type: {}", deployment->v.strategy_type.value_or("RollingUpdate (default)"))});
    f.details.push_back(
        fmt::format("old pod {} ({}) holds {} {} on {}", sibling->name(), label(sibling->doc, "pod-template-hash"),
                    k8s::pod_request(sibling->v.spec, req.resource).value(), req.resource, *sibling->v.spec.node_name));
    f.fix.push_back(
        fmt::format("kubectl patch deployment -n {} {} --type merge -p "
                    "'{{\"spec\":{{\"strategy\":{{\"type\":\"Recreate\",\"rollingUpdate\":null}}}}}}'",
                    p.ns(), owner.second));
    f.fix.push_back(fmt::format("# or keep RollingUpdate with maxSurge: 0, maxUnavailable: 1"));
    return f;
  }
  f.rule = "insufficient-gpu";
  f.summary = fmt::format("every node the pod may use has fewer than {} free {}", spod.num_gpu, req.resource);
  for (const Holder* h : shown) {
    f.details.push_back(fmt::format("{}/{} holds {} {} on {}, running {}{}", h->pod->ns(), h->pod->name(), h->gpus,
                                    req.resource, *h->pod->v.spec.node_name, age(h->running_s),
                                    h->why.empty() ? "" : " -- " + h->why));
  }
  if (holder_count > shown.size())
    f.details.push_back(fmt::format("... and {} more holders", holder_count - shown.size()));
  if (finished > 0) {
    f.details.push_back(
        fmt::format("{} finished (Succeeded/Failed) GPU pod(s) on these nodes hold nothing: the "
                    "scheduler already released their GPUs",
                    finished));
  }
  if (!shown.empty() && !shown.front()->why.empty()) {
    const Holder& h = *shown.front();
    const auto ho = top_owner(s_, *h.pod);
    if (ho.first == "Job") {
      f.fix.push_back(
          fmt::format("kubectl delete job -n {} {}  # and set activeDeadlineSeconds / ttlSecondsAfterFinished",
                      h.pod->ns(), ho.second));
    } else if (ho.first == "StatefulSet" || ho.first == "Deployment") {
      f.fix.push_back(fmt::format("kubectl scale {} -n {} {} --replicas=0", lower(ho.first), h.pod->ns(), ho.second));
    } else {
      f.fix.push_back(fmt::format("kubectl delete pod -n {} {}", h.pod->ns(), h.pod->name()));
    }
  }
  if (!candidates.empty()) {
    f.fix.push_back(
        fmt::format("kubectl describe node {} | grep -A8 \"Allocated resources\"", s_.nodes[candidates[0]].name()));
  }
  return f;
}

const Diagnoser::Holders& Diagnoser::holders(const std::string& resource) {
  auto [it, inserted] = holders_.try_emplace(resource);
  Holders& t = it->second;
  if (!inserted) return t;
  t.by_node.resize(s_.nodes.size());
  t.finished.assign(s_.nodes.size(), 0);
  for (size_t i = 0; i < s_.nodes.size(); ++i) {
    for (size_t k : s_.pods_on(s_.nodes[i].name())) {
      const PodObj& q = s_.pods[k];
      const int64_t g = k8s::pod_request(q.v.spec, resource).value();
      if (g <= 0) continue;
      if (!sched::holds_node_resources(q.v)) {
        ++t.finished[i];
        continue;
      }
      const auto start = parse_time(q.v.status.start_time.value_or(q.doc->metadata.creation_timestamp));
      const int64_t running = start ? s_.now() - *start : 0;
      std::string why;
      const std::string lname = lower(q.name()) + " " + lower(label(q.doc, "app")) + " " +
                                lower(q.v.spec.containers.empty() ? "" : q.v.spec.containers[0].image.value);
      const auto qowner = top_owner(s_, q);
      if (contains_any(lname, {"notebook", "jupyter"}) || qowner.first == "Notebook") {
        why = running >= o_.idle_after_s ? "notebook, running for days: likely idle" : "notebook";
      } else if (qowner.first == "Job" && running >= o_.idle_after_s) {
        why = "Job pod still Running after " + age(running) + " (no activeDeadlineSeconds?)";
      }
      t.by_node[i].push_back(t.all.size());
      t.all.push_back({&q, i, g, running, std::move(why)});
    }
  }
  t.order.resize(t.all.size());
  for (size_t i = 0; i < t.order.size(); ++i) t.order[i] = i;
  std::stable_sort(t.order.begin(), t.order.end(), [&](size_t a, size_t b) {
    return std::make_pair(!t.all[a].why.empty(), t.all[a].running_s) >
           std::make_pair(!t.all[b].why.empty(), t.all[b].running_s);
  });
  return t;
}

// ---- DRA ----

struct CelCheck {
  enum Kind { kCapacity, kAttribute, kDriver, kUnknown } kind = kUnknown;
  std::string domain, name, op, value;
};

// device.capacity["d"].n.compareTo(quantity("40Gi")) >= 0 | device.attributes["d"].n == "v" | device.driver == "d"
CelCheck parse_cel(sv e) {
  CelCheck c;
  const auto quoted = [&](size_t from, size_t* end) -> std::string {
    size_t a = e.find('"', from);
    if (a == sv::npos) return {};
    size_t b = e.find('"', a + 1);
    if (b == sv::npos) return {};
    *end = b + 1;
    return std::string(e.substr(a + 1, b - a - 1));
  };
  const auto ident = [&](size_t from) {
    size_t a = from;
    while (a < e.size() && (e[a] == ']' || e[a] == '.')) ++a;
    size_t b = a;
    while (b < e.size() && (std::isalnum(static_cast<unsigned char>(e[b])) || e[b] == '_')) ++b;
    return std::pair<std::string, size_t>(std::string(e.substr(a, b - a)), b);
  };
  if (auto pos = e.find("device.capacity["); pos != sv::npos) {
    size_t end = 0;
    c.domain = quoted(pos, &end);
    auto [n, after] = ident(end);
    c.name = n;
    size_t q = e.find("quantity(", after);
    if (q == sv::npos) return {};
    c.value = quoted(q, &end);
    for (sv op : {">=", "<=", "==", ">", "<"}) {
      if (e.find(op, end) != sv::npos) {
        c.op = op;
        break;
      }
    }
    c.kind = CelCheck::kCapacity;
  } else if (pos = e.find("device.attributes["); pos != sv::npos) {
    size_t end = 0;
    c.domain = quoted(pos, &end);
    auto [n, after] = ident(end);
    c.name = n;
    size_t eq = e.find("==", after);
    if (eq == sv::npos) return {};
    size_t vend = 0;
    c.value = quoted(eq, &vend);
    c.op = "==";
    c.kind = CelCheck::kAttribute;
  } else if (pos = e.find("device.driver"); pos != sv::npos) {
    size_t end = 0;
    c.value = quoted(pos, &end);
    c.kind = CelCheck::kDriver;
  }
  return c;
}

bool cel_holds(const CelCheck& c, const k8s::Device& d, sv driver) {
  switch (c.kind) {
    case CelCheck::kDriver:
      return driver == c.value;
    case CelCheck::kAttribute: {
      auto it = d.attributes.find(c.name);
      if (it == d.attributes.end() || it->second.value == nullptr) return false;
      return it->second.value->text() == c.value;
    }
    case CelCheck::kCapacity: {
      auto it = d.capacity.find(c.name);
      auto want = k8s::Quantity::parse(c.value);
      if (it == d.capacity.end() || !want) return false;
      const auto cmp = it->second.value <=> *want;
      if (c.op == ">=") return cmp >= 0;
      if (c.op == ">") return cmp > 0;
      if (c.op == "<=") return cmp <= 0;
      if (c.op == "<") return cmp < 0;
      return cmp == 0;
    }
    case CelCheck::kUnknown:
      return true;
  }
  return true;
}

std::optional<Finding> Diagnoser::dra(const PodObj& p) {
  if (s_.nodes.empty()) return std::nullopt;  // snapshot-no-nodes
  Finding f;
  f.rule = "dra-claim-unsatisfiable";
  f.layer = Layer::kScheduler;
  f.severity = Severity::kCritical;
  f.object = pod_ref(p);
  // Devices already allocated to claims: driver/pool/device.
  std::set<std::string> taken;
  for (const auto& c : s_.claims) {
    const k8s::Node* results = c.v.allocation ? c.v.allocation->at({"devices", "results"}) : nullptr;
    if (results == nullptr) continue;
    for (const auto& r : results->items()) {
      const auto* d = r.find("driver");
      const auto* pl = r.find("pool");
      const auto* dv = r.find("device");
      if (d && pl && dv) taken.insert(fmt::format("{}/{}/{}", d->text(), pl->text(), dv->text()));
    }
  }
  // The generated claim names of templates, from status.resourceClaimStatuses.
  std::map<std::string, std::string> generated;
  if (const k8s::Node* st = p.doc->root->at({"status", "resourceClaimStatuses"})) {
    for (const auto& r : st->items()) {
      const auto* n = r.find("name");
      const auto* c = r.find("resourceClaimName");
      if (n && c) generated[std::string(n->text())] = std::string(c->text());
    }
  }
  // One (sub)request: satisfiable now, or why not (into out).
  const auto satisfiable = [&](sv req_name, const k8s::DeviceSubRequest& sub, Finding& out) -> bool {
    const sv cls = *sub.device_class_name;
    const Obj<k8s::DeviceClass>* dc = nullptr;
    for (const auto& d : s_.device_classes) {
      if (d.name() == cls) dc = &d;
    }
    if (dc == nullptr) {
      out.summary = fmt::format("claim request {} names DeviceClass {}, which does not exist", req_name, cls);
      out.fix.push_back("kubectl get deviceclasses");
      return false;
    }
    std::vector<CelCheck> checks;
    std::vector<std::string> exprs;
    for (const auto& sel : dc->v.selectors) checks.push_back(parse_cel(*sel.expression));
    for (const auto& sel : sub.selectors) {
      checks.push_back(parse_cel(*sel.expression));
      exprs.emplace_back(*sel.expression);
    }
    const int64_t want = sub.allocation_mode.value_or("ExactCount") == "All" ? 1 : sub.count.value_or(1);
    int64_t free_ok = 0, total = 0, ok_taken = 0;
    std::string best_seen;
    for (const auto& sl : s_.slices) {
      for (const auto& d : sl.v.devices) {
        bool driver_ok = true;
        for (const auto& c : checks) {
          if (c.kind == CelCheck::kDriver && !cel_holds(c, d, *sl.v.driver)) driver_ok = false;
        }
        if (!driver_ok) continue;
        ++total;
        bool ok = true;
        for (const auto& c : checks) {
          if (c.kind == CelCheck::kCapacity && best_seen.empty()) {
            if (auto it = d.capacity.find(c.name); it != d.capacity.end()) best_seen = c.name;
          }
          if (!cel_holds(c, d, *sl.v.driver)) ok = false;
        }
        if (!ok) continue;
        if (taken.contains(fmt::format("{}/{}/{}", *sl.v.driver, *sl.v.pool_name, d.name))) {
          ++ok_taken;
        } else {
          ++free_ok;
        }
      }
    }
    if (free_ok >= want) return true;
    if (total == 0) {
      out.summary = fmt::format(
          "no ResourceSlice publishes a device of DeviceClass {}: the DRA driver is not running "
          "or not registered",
          cls);
      out.fix.push_back("kubectl get resourceslices -o wide");
      out.fix.push_back("kubectl get pods -A -l app.kubernetes.io/name=nvidia-dra-driver-gpu");
    } else {
      out.summary = fmt::format(
          "no device satisfies claim request {}: {} wanted, {} free match ({} published devices of "
          "class {}, {} matching ones already allocated)",
          req_name, want, free_ok, total, cls, ok_taken);
      for (const auto& e : exprs) out.details.push_back(fmt::format("selector: {}", e));
      if (!best_seen.empty()) {
        std::map<std::string, int> values;
        for (const auto& sl : s_.slices) {
          for (const auto& d : sl.v.devices) {
            if (auto it = d.capacity.find(best_seen); it != d.capacity.end()) ++values[it->second->to_string()];
          }
        }
        std::vector<std::string> listed;
        for (const auto& [v, c] : values) listed.push_back(fmt::format("{} x{}", v, c));
        out.details.push_back(fmt::format("published {} capacities: {}", best_seen, fmt::join(listed, ", ")));
      }
      out.fix.push_back("kubectl get resourceslices -o yaml  # compare device attributes/capacity with the selector");
    }
    return false;
  };
  bool broken = false;
  for (const auto& rc : p.v.spec.resource_claims) {
    const k8s::ResourceClaimSpec* spec = nullptr;
    std::string claim_name;
    if (rc.resource_claim_name) claim_name = std::string(*rc.resource_claim_name);
    if (auto it = generated.find(std::string(rc.name)); it != generated.end()) claim_name = it->second;
    const Obj<k8s::ResourceClaim>* claim = nullptr;
    for (const auto& c : s_.claims) {
      if (c.ns() == p.ns() && c.name() == claim_name) claim = &c;
    }
    if (claim != nullptr) {
      if (claim->v.allocated) continue;
      spec = &claim->v.spec;
    } else if (rc.resource_claim_template_name) {
      for (const auto& t : s_.claim_templates) {
        if (t.ns() == p.ns() && t.name() == *rc.resource_claim_template_name) spec = &t.v.spec;
      }
      if (spec == nullptr) {
        broken = true;
        f.summary = fmt::format("ResourceClaimTemplate {} does not exist", *rc.resource_claim_template_name);
        continue;
      }
    } else {
      broken = true;
      f.summary = fmt::format("ResourceClaim {} does not exist", claim_name);
      continue;
    }
    for (const auto& r : spec->requests) {
      if (r.first_available.empty()) {
        if (!satisfiable(r.name, r.request, f)) broken = true;
        continue;
      }
      // DRA prioritized list: the first satisfiable alternative is allocated.
      Finding why;
      std::vector<std::string> names;
      bool any = false;
      for (const auto& alt : r.first_available) {
        names.push_back(fmt::format("{}/{}", r.name, alt.name));
        Finding attempt;
        if (satisfiable(fmt::format("{}/{}", r.name, alt.name), alt, attempt)) {
          any = true;
          break;
        }
        if (why.summary.empty()) why = std::move(attempt);
      }
      if (any) continue;
      broken = true;
      f.summary = why.summary;
      f.details.push_back(
          fmt::format("none of the firstAvailable alternatives ({}) can be allocated", fmt::join(names, ", ")));
      for (auto& d : why.details) f.details.push_back(std::move(d));
      for (auto& x : why.fix) f.fix.push_back(std::move(x));
    }
  }
  if (!broken) return std::nullopt;
  add_scheduling_evidence(p, f);
  return f;
}

// ---- runtime ----

std::optional<Finding> Diagnoser::runtime(const PodObj& p) {
  // Only a pod that is still failing: a Ready pod, or one whose containers all run, recovered, and
  // its lastState and old events are history.
  if (const auto* c = k8s::find_condition(p.v.status.conditions, "Ready"); c != nullptr && c->status == "True") {
    return std::nullopt;
  }
  const auto failing_now = [](const k8s::ContainerState& st) {
    return (st.state == "waiting" && st.reason != "ContainerCreating" && st.reason != "PodInitializing") ||
           (st.state == "terminated" && st.reason == "StartError");
  };
  if (std::none_of(p.v.status.container_statuses.begin(), p.v.status.container_statuses.end(),
                   [&](const k8s::ContainerStatus& c) { return failing_now(c.state); })) {
    return std::nullopt;
  }
  std::optional<Evidence> ev;
  for (const auto& c : p.v.status.container_statuses) {
    if (!failing_now(c.state)) continue;
    // The current state, or (CrashLoopBackOff between attempts) the attempt that just failed.
    for (const auto* st : {&c.state, &c.last_state}) {
      if (!ev && contains(st->message, "nvidia-container-cli")) {
        ev = Evidence{fmt::format("{} container {} state {} ({}) at {}", pod_ref(p), c.name, st->state, st->reason,
                                  p.doc->where(st->line)),
                      std::string(st->message)};
      }
    }
  }
  const auto* e = last_event(s_, "Pod", p.ns(), p.name(), "", "nvidia-container-cli");
  if (!ev && e == nullptr) return std::nullopt;
  Finding f;
  f.layer = Layer::kRuntime;
  f.severity = Severity::kCritical;
  f.object = pod_ref(p);
  const sv node = *p.v.spec.node_name;
  std::string msg = ev ? ev->text : std::string(e->v.message);
  if (contains(msg, "requirement error") || contains(msg, "unsatisfied condition: cuda")) {
    f.rule = "app-cuda-newer-than-driver";
    f.layer = Layer::kApp;
    f.summary = fmt::format("the image requires a newer CUDA than the driver on {} supports", node);
  } else {
    f.rule = "toolkit-init-error";
    f.summary = fmt::format(
        "the NVIDIA container runtime hook failed on {}: the toolkit ran but the driver was not ready", node);
  }
  if (ev) f.evidence.push_back(*ev);
  if (e != nullptr) f.evidence.push_back(event_evidence(*e));
  if (const auto* d = stack_pod_on(s_, node, "driver")) {
    f.details.push_back(fmt::format("driver pod {}/{} on {}: {}", d->ns(), d->name(), node, pod_status_text(d->v)));
    f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=100", d->ns(), d->name()));
  }
  if (const auto* t = stack_pod_on(s_, node, "toolkit")) {
    f.details.push_back(fmt::format("toolkit pod {}/{} on {}: {}", t->ns(), t->name(), node, pod_status_text(t->v)));
    f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=50", t->ns(), t->name()));
  }
  if (f.fix.empty()) {
    f.fix.push_back("kubectl logs -n gpu-operator -l app=nvidia-container-toolkit-daemonset --tail=50");
    f.fix.push_back(
        "# host-installed toolkit: nvidia-ctk runtime configure --runtime=containerd && systemctl restart containerd");
  }
  return f;
}

// ---- app ----

constexpr std::array<sv, 5> kCudaTooNew = {
    "CUDA driver version is insufficient for CUDA runtime version", "The NVIDIA driver on your system is too old",
    "cudaErrorInsufficientDriver",
    "unsatisfied condition: cuda>=", "forward compatibility was attempted on non supported HW"};
constexpr std::array<sv, 10> kNoGpu = {"Found no NVIDIA driver on your system",
                                       "No CUDA GPUs are available",
                                       "nvidia-smi: not found",
                                       "nvidia-smi: command not found",
                                       "executable file not found in $PATH: \"nvidia-smi\"",
                                       "couldn't communicate with the NVIDIA driver",
                                       "Could not find cuda drivers on your machine",
                                       "torch.cuda.is_available() = False",
                                       "no CUDA-capable device is detected",
                                       "CUDA available: False"};

bool looks_gpu_image(sv image) {
  const std::string l = lower(image);
  return contains_any(l, {"cuda", "nvcr.io", "vllm", "pytorch", "tensorflow", "-gpu", "tritonserver", "tgi",
                          "text-generation-inference"});
}

std::optional<Finding> Diagnoser::app(const PodObj& p, const std::optional<GpuRequest>& req) {
  if (!component(p).empty()) return std::nullopt;
  const auto logs = s_.logs_for(p.ns(), p.name());
  const auto owner = top_owner(s_, p);
  Finding f;
  f.layer = Layer::kApp;
  f.object = pod_ref(p);
  for (const auto& c : p.v.spec.containers) {
    for (const auto& e : c.env) {
      if (e.name != "NVIDIA_VISIBLE_DEVICES" || !e.value) continue;
      const sv v = *e.value;
      if (v == "void" || v == "none" || v.empty()) continue;
      f.rule = "app-visible-devices-by-hand";
      f.severity = Severity::kCritical;
      f.summary = req ? fmt::format(
                            "container {} sets NVIDIA_VISIBLE_DEVICES={} by hand: it can see GPUs other than "
                            "the one the device plugin allocated to it",
                            c.name, v)
                      : fmt::format(
                            "container {} sets NVIDIA_VISIBLE_DEVICES={} by hand instead of requesting "
                            "nvidia.com/gpu: the scheduler does not count it and it shares GPUs with pods "
                            "that were allocated them",
                            c.name, v);
      f.evidence.push_back(
          Evidence{fmt::format("{} .spec.containers[{}].env at {}", pod_ref(p), c.name, p.doc->where(e.line)),
                   fmt::format("NVIDIA_VISIBLE_DEVICES={}", v)});
      if (auto hit = find_in_logs(logs, kNoGpu)) f.evidence.push_back(log_evidence(*hit));
      f.fix.push_back(
          fmt::format("remove env NVIDIA_VISIBLE_DEVICES from container {} and set resources.limits "
                      "nvidia.com/gpu: 1",
                      c.name));
      f.fix.push_back(patch_command(owner, p.ns(),
                                    fmt::format("{{\"containers\":[{{\"name\":\"{}\",\"env\":[{{\"name\":"
                                                "\"NVIDIA_VISIBLE_DEVICES\",\"$patch\":\"delete\"}}],\"resources\":{{"
                                                "\"limits\":{{\"nvidia.com/gpu\":1}}}}}}]}}",
                                                c.name)));
      if (owner.first != "Pod") {
        f.fix.back().replace(f.fix.back().find("--type merge"), 12, "--type strategic");
      }
      return f;
    }
  }
  if (auto hit = find_in_logs(logs, kCudaTooNew)) {
    f.rule = "app-cuda-newer-than-driver";
    f.severity = Severity::kCritical;
    const sv node_name = *p.v.spec.node_name;
    f.summary = fmt::format("the container's CUDA is newer than the driver on {} supports", node_name);
    f.evidence.push_back(log_evidence(*hit));
    if (const NodeObj* node = s_.node(node_name)) {
      sv major = label(node->doc, "nvidia.com/cuda.driver-version.major");
      sv minor = label(node->doc, "nvidia.com/cuda.driver-version.minor");
      if (major.empty()) major = label(node->doc, "nvidia.com/cuda.driver.major");
      if (minor.empty()) minor = label(node->doc, "nvidia.com/cuda.driver.minor");
      sv drv = label(node->doc, "nvidia.com/cuda.driver-version.full");
      if (!major.empty()) {
        f.evidence.push_back(
            Evidence{fmt::format("node/{} labels at {}", node_name, node->doc->where(node->doc->metadata.labels_line)),
                     fmt::format("nvidia.com/cuda.driver-version: {}.{}{}", major, minor,
                                 drv.empty() ? "" : fmt::format(" (driver {})", drv))});
      }
    }
    for (const auto& c : p.v.spec.containers) f.details.push_back(fmt::format("image {}: {}", c.name, *c.image));
    f.fix.push_back(fmt::format("kubectl exec -n {} {} -- nvidia-smi  # compare 'CUDA Version' with the image's CUDA",
                                p.ns(), p.name()));
    f.fix.push_back("use an image built for the node's CUDA version, or upgrade the driver on the node pool");
    return f;
  }
  if (!req && p.v.spec.resource_claims.empty()) {
    bool gpu_image = false;
    for (const auto& c : p.v.spec.containers) gpu_image = gpu_image || looks_gpu_image(*c.image);
    auto hit = find_in_logs(logs, kNoGpu);
    if (hit && gpu_image) {
      f.rule = "app-no-gpu-requested";
      f.severity = Severity::kWarning;
      f.summary = "the pod runs a GPU image but requests no nvidia.com/gpu, so no GPU is mounted into it";
      f.evidence.push_back(log_evidence(*hit));
      const auto* c = &p.v.spec.containers.front();
      f.evidence.push_back(
          Evidence{fmt::format("{} .spec.containers[{}].resources at {}", pod_ref(p), c->name,
                               p.doc->where(c->resources.line ? c->resources.line : c->line)),
                   c->resources.limits.empty() ? "no resources.limits" : "no nvidia.com/gpu in resources.limits"});
      f.fix.push_back(patch_command(owner, p.ns(),
                                    fmt::format("{{\"containers\":[{{\"name\":\"{}\",\"resources\":{{\"limits\":{{"
                                                "\"nvidia.com/gpu\":1}}}}}}]}}",
                                                c->name)));
      if (owner.first != "Pod") f.fix.back().replace(f.fix.back().find("--type merge"), 12, "--type strategic");
      return f;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Nodes, driver logs, workload specs

void Diagnoser::node_findings(const NodeObj& n) {
  if (!is_gpu_node(n)) return;
  const sv name = n.name();
  const sv state = label(n.doc, "nvidia.com/mig.config.state");
  if (state == "failed" || state == "pending" || state == "rebooting") {
    Finding f;
    f.rule = state == "failed" ? "mig-config-failed" : "mig-config-pending";
    f.severity = state == "failed" ? Severity::kCritical : Severity::kWarning;
    f.layer = Layer::kNode;
    f.object = fmt::format("node/{}", name);
    const sv cfg = label(n.doc, "nvidia.com/mig.config");
    f.summary = state == "failed"
                    ? fmt::format(
                          "MIG Manager failed to apply the layout {} (the profile is not valid for this GPU "
                          "model, or processes outside Kubernetes hold the GPU)",
                          cfg)
                    : fmt::format("the MIG layout {} is still being applied ({}): GPU pods on the node were drained",
                                  cfg, state);
    f.evidence.push_back(Evidence{fmt::format("node/{} labels at {}", name, n.doc->where(n.doc->metadata.labels_line)),
                                  fmt::format("nvidia.com/mig.config={}, nvidia.com/mig.config.state={}", cfg, state)});
    if (sv product = label(n.doc, "nvidia.com/gpu.product"); !product.empty()) {
      f.details.push_back(fmt::format("GPU: {}", product));
    }
    if (const auto* mm = stack_pod_on(s_, name, "mig-manager")) {
      if (auto hit = find_in_logs(s_.logs_for(mm->ns(), mm->name()),
                                  {"rror", "nvalid", "failed", "Failed", "not supported", "in use"})) {
        f.evidence.push_back(log_evidence(*hit));
      }
      f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=100", mm->ns(), mm->name()));
    }
    if (state == "failed") {
      f.fix.push_back(fmt::format("kubectl label node {} nvidia.com/mig.config=<a profile valid for {}> --overwrite",
                                  name, label(n.doc, "nvidia.com/gpu.product")));
    } else {
      f.fix.push_back(fmt::format(
          "kubectl get node {} -o jsonpath='{{.metadata.labels.nvidia\\.com/mig\\.config\\.state}}' -w", name));
    }
    add(std::move(f));
  }
  if (gpu_allocatable(n) > 0) return;
  // DRA instead of the device plugin: the GPUs are published as ResourceSlices of a GPU driver
  // (gpu.nvidia.com, ...), or the GPU Operator was told not to deploy the plugin on the node.
  if (label(n.doc, "nvidia.com/gpu.deploy.device-plugin") == "false") return;
  if (std::any_of(s_.slices.begin(), s_.slices.end(), [&](const Obj<k8s::ResourceSlice>& sl) {
        return *sl.v.node_name == name && contains(*sl.v.driver, "nvidia.com") && !sl.v.devices.empty();
      })) {
    return;
  }
  not_advertised_nodes_.insert(std::string(name));
  Finding f;
  f.rule = "gpu-not-advertised";
  f.severity = Severity::kCritical;
  f.layer = Layer::kPlugin;
  f.object = fmt::format("node/{}", name);
  f.summary = "the node has NVIDIA GPUs but advertises no nvidia.com/gpu: the device plugin has not registered";
  std::vector<std::string> alloc;
  for (const auto& [k, q] : n.v.allocatable) alloc.push_back(fmt::format("\"{}\":\"{}\"", k, q->to_string()));
  int alloc_line = 0;
  for (const auto& [k, q] : n.v.allocatable) alloc_line = alloc_line == 0 ? q.line : std::min(alloc_line, q.line);
  f.evidence.push_back(Evidence{fmt::format("node/{} .status.allocatable at {}", name, n.doc->where(alloc_line)),
                                fmt::format("{{{}}}", fmt::join(alloc, ","))});
  if (const auto* v = stack_pod_on(s_, name, "validator")) {
    const auto& inits = v->v.status.init_container_statuses;
    for (const auto& st : inits) {
      const auto& s = st.state;
      if (s.state == "terminated" && s.exit_code == 0) continue;
      sv stage = st.name;
      if (auto pos = stage.find("-validation"); pos != sv::npos) stage = stage.substr(0, pos);
      f.summary += fmt::format("; the operator validator's {} stage has not passed", stage);
      f.evidence.push_back(Evidence{
          fmt::format("pod/{}/{} init container {} at {}", v->ns(), v->name(), st.name, v->doc->where(st.line)),
          fmt::format("{} {}{} (restarts {})", s.state, s.reason,
                      s.message.empty() ? "" : ": " + std::string(s.message), st.restart_count)});
      std::vector<const ContainerLog*> logs;
      for (const auto* l : s_.logs_for(v->ns(), v->name())) {
        if (l->container == st.name) logs.push_back(l);
      }
      if (auto hit = find_in_logs(logs, {"rror", "failed", "Failed", "waiting", "not ready", "No such"})) {
        f.evidence.push_back(log_evidence(*hit));
      }
      f.fix.push_back(fmt::format("kubectl logs -n {} {} -c {} --tail=50", v->ns(), v->name(), st.name));
      if (stage == "driver") {
        if (const auto* d = stack_pod_on(s_, name, "driver")) {
          f.details.push_back(fmt::format("driver pod {}/{}: {}", d->ns(), d->name(), pod_status_text(d->v)));
          f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=100", d->ns(), d->name()));
        }
      }
      break;
    }
  }
  if (const auto* dp = stack_pod_on(s_, name, "device-plugin")) {
    f.details.push_back(fmt::format("device plugin pod {}/{}: {}", dp->ns(), dp->name(), pod_status_text(dp->v)));
  } else {
    f.details.push_back("no device plugin pod runs on the node");
  }
  f.fix.push_back(fmt::format("kubectl get pods -n gpu-operator -o wide --field-selector spec.nodeName={}", name));
  add(std::move(f));
}

void Diagnoser::driver_findings() {
  std::set<std::string> seen;  // rule/node
  for (const auto& p : s_.pods) {
    const sv comp = component(p);
    if (comp.empty()) continue;
    const sv node = *p.v.spec.node_name;
    if (o_.target.kind == Target::Kind::kNode && node != o_.target.name) continue;
    if (o_.target.kind == Target::Kind::kPod || o_.target.kind == Target::Kind::kNamespace) continue;
    const auto logs = s_.logs_for(p.ns(), p.name());
    const NodeObj* n = s_.node(node);
    Finding f;
    f.layer = Layer::kDriver;
    f.severity = Severity::kCritical;
    f.object = fmt::format("node/{}", node);
    if (auto hit = find_in_logs(logs, {"Driver/library version mismatch"})) {
      f.rule = "driver-version-mismatch";
      f.summary =
          "the user-space NVIDIA libraries and the loaded kernel module are different versions (a host package "
          "upgrade, or a host driver fighting the Operator's)";
      f.evidence.push_back(log_evidence(*hit));
      f.fix.push_back(
          "pick one driver owner: host packages or the GPU Operator (driver.enabled=false when the host owns it)");
      f.fix.push_back(
          fmt::format("kubectl drain {} --ignore-daemonsets --delete-emptydir-data  # then reboot the node", node));
      f.fix.push_back(fmt::format("kubectl uncordon {}", node));
    } else if (auto sb = find_in_logs(
                   logs, {"Key was rejected by service", "Required key not available", "Secure Boot", "SecureBoot"})) {
      f.rule = "driver-secure-boot";
      f.summary = "Secure Boot is on and the NVIDIA kernel modules are unsigned: the kernel refuses to load them";
      f.evidence.push_back(log_evidence(*sb));
      f.fix.push_back(
          "use signed driver modules (precompiled, signed images) or enroll the signing key (MOK); or "
          "disable Secure Boot on the GPU node pool");
      f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=100", p.ns(), p.name()));
    } else if (comp == "driver") {
      bool crashloop = false;
      for (const auto* list : {&p.v.status.container_statuses, &p.v.status.init_container_statuses}) {
        for (const auto& c : *list) {
          if (c.state.reason == "CrashLoopBackOff") {
            crashloop = true;
            f.evidence.push_back(
                Evidence{fmt::format("{} container {} at {}", pod_ref(p), c.name, p.doc->where(c.state.line)),
                         fmt::format("waiting: CrashLoopBackOff (restarts {}){}", c.restart_count,
                                     c.state.message.empty() ? "" : ": " + std::string(c.state.message))});
          }
        }
      }
      if (!crashloop) continue;
      f.rule = "driver-kernel-crashloop";
      std::string kernel = n != nullptr ? std::string(n->v.node_info.kernel_version) : "";
      f.summary = fmt::format(
          "the driver pod is in CrashLoopBackOff: it cannot build or find kernel modules for the "
          "node's kernel {}",
          kernel.empty() ? "(unknown)" : kernel);
      if (auto kh = find_in_logs(logs, {"kernel headers", "Could not resolve Linux kernel version", "linux-headers",
                                        "Unable to locate package", "kernel-devel", "Failed to install", "rror"})) {
        f.evidence.push_back(log_evidence(*kh));
      }
      if (n != nullptr && !kernel.empty()) {
        f.evidence.push_back(Evidence{fmt::format("node/{} .status.nodeInfo at {}", node, n->doc->where()),
                                      fmt::format("kernelVersion: {}, osImage: {}", kernel, n->v.node_info.os_image)});
      }
      f.fix.push_back(
          "use a driver version that supports this kernel/OS, or precompiled driver images "
          "(driver.usePrecompiled=true); pin node kernels to a tested combination");
      f.fix.push_back(fmt::format("kubectl logs -n {} {} --previous --tail=100", p.ns(), p.name()));
    } else {
      continue;
    }
    if (!seen.insert(f.rule + "/" + std::string(node)).second) continue;
    add(std::move(f));
  }
}

// The workload that created a ReplicaSet (its Deployment) or a Job (its CronJob); the object itself
// otherwise.
std::pair<sv, sv> Diagnoser::creator_of(sv kind, sv ns, sv name) const {
  const auto strip = [](sv n) { return n.substr(0, n.rfind('-') == sv::npos ? n.size() : n.rfind('-')); };
  if (kind == "ReplicaSet") {
    if (const auto* rs = s_.workload("ReplicaSet", ns, name)) {
      for (const auto& o : rs->doc->metadata.owner_references) {
        if (o.kind == "Deployment") return {o.kind, o.name};
      }
      if (!rs->doc->metadata.owner_references.empty()) return {kind, name};
    }
    if (const auto* d = s_.workload("Deployment", ns, strip(name))) return {"Deployment", d->name()};
  } else if (kind == "Job") {
    for (const auto& j : s_.jobs) {
      if (j.ns() != ns || j.name() != name) continue;
      for (const auto& o : j.doc->metadata.owner_references) {
        if (o.kind == "CronJob") return {o.kind, o.name};
      }
      if (!j.doc->metadata.owner_references.empty()) return {kind, name};
    }
    for (const auto& c : s_.cron_jobs) {
      if (c.ns() == ns && c.name() == strip(name)) return {"CronJob", c.name()};
    }
  }
  return {kind, name};
}

void Diagnoser::spec_findings() {
  // Workload templates whose GPU requests the API server rejects, and creations quota denied.
  struct Tpl {
    const k8s::Document* doc;
    const k8s::PodTemplate* tpl;
  };
  std::vector<Tpl> tpls;
  for (const auto& w : s_.workloads) {
    if (w.doc->kind != "ReplicaSet") tpls.push_back({w.doc, &w.v.pod_template});
  }
  for (const auto& j : s_.jobs) {
    if (j.doc->metadata.owner_references.empty()) tpls.push_back({j.doc, &j.v.pod_template});
  }
  for (const auto& c : s_.cron_jobs) tpls.push_back({c.doc, &c.v.job_template.pod_template});
  std::set<std::string> quota_reported;
  for (const auto& t : tpls) {
    if (!in_scope_ns(t.doc->metadata.namespace_) || s_.has_invalid_fields(t.doc)) continue;
    const std::string obj =
        fmt::format("{}/{}/{}", lower(t.doc->kind), t.doc->metadata.namespace_, t.doc->metadata.name);
    // Events land on the ReplicaSets (<deployment>-<hash>), the Jobs of a CronJob or the object
    // itself: resolved through ownerReferences (by name minus the last "-suffix" only when the
    // ReplicaSet or Job has none in the snapshot), never by a name prefix ("vllm" is not "vllm-small").
    std::vector<const Obj<k8s::Event>*> evs;
    for (const auto& e : s_.events) {
      const auto& io = e.v.involved_object;
      if (io.namespace_ != t.doc->metadata.namespace_ || e.v.reason != "FailedCreate") continue;
      const auto [okind, oname] = creator_of(io.kind, io.namespace_, io.name);
      const bool mine = (io.kind == t.doc->kind && io.name == t.doc->metadata.name) ||
                        (okind == t.doc->kind && oname == t.doc->metadata.name);
      if (mine) evs.push_back(&e);
    }
    bool reported = false;
    for (const auto& c : t.tpl->spec.containers) {
      for (const auto& [name, q] : c.resources.limits) {
        if (!is_gpu_resource(name)) continue;
        Finding f;
        f.layer = Layer::kSpec;
        f.severity = Severity::kCritical;
        f.object = obj;
        const auto req = c.resources.requests.find(name);
        if (!q->is_integer() || (req != c.resources.requests.end() && !req->second->is_integer())) {
          f.rule = "gpu-request-fractional";
          f.summary = fmt::format(
              "container {} asks for {} {}: GPUs are whole units; fractions come from MIG slices "
              "or time-slicing replicas",
              c.name, q->to_string(), name);
          f.evidence.push_back(Evidence{fmt::format("{} limits at {}", obj, t.doc->where(q.line)),
                                        fmt::format("{}: {}", name, q->to_string())});
        } else if (req != c.resources.requests.end() && req->second.value != q.value) {
          f.rule = "gpu-request-limit-mismatch";
          f.summary = fmt::format(
              "container {} requests {} but limits {} {}: for extended resources request must "
              "equal limit",
              c.name, req->second->to_string(), q->to_string(), name);
          f.evidence.push_back(Evidence{
              fmt::format("{} requests at {}", obj, t.doc->where(req->second.line)),
              fmt::format("requests {}: {}, limits {}: {}", name, req->second->to_string(), name, q->to_string())});
        } else {
          continue;
        }
        for (const auto* e : evs) {
          if (contains(e->v.message, "Invalid value")) {
            f.evidence.push_back(event_evidence(*e));
            break;
          }
        }
        f.fix.push_back(
            fmt::format("set resources.limits {}: <whole number> (and no separate request) in {}", name, obj));
        f.fix.push_back("for a fraction of a GPU: a MIG slice (nvidia.com/mig-1g.10gb: 1) or a time-sliced replica");
        add(std::move(f));
        reported = true;
      }
    }
    if (reported) continue;
    for (const auto* e : evs) {
      if (!contains(e->v.message, "exceeded quota")) continue;
      Finding f;
      f.rule = "quota-exhausted";
      f.layer = Layer::kSpec;
      f.severity = Severity::kCritical;
      f.object = obj;
      sv msg = e->v.message;
      std::string quota_name;
      if (auto pos = msg.find("exceeded quota: "); pos != sv::npos) {
        sv rest = msg.substr(pos + 16);
        quota_name = std::string(rest.substr(0, rest.find(',')));
      }
      f.summary = fmt::format("pods are not created: ResourceQuota {} in namespace {} is used up", quota_name,
                              t.doc->metadata.namespace_);
      f.evidence.push_back(event_evidence(*e));
      for (const auto& q : s_.quotas) {
        if (q.ns() != t.doc->metadata.namespace_ || q.name() != quota_name) continue;
        for (const auto& [res, used] : q.v.status_used) {
          auto hard = q.v.status_hard.find(res);
          if (hard == q.v.status_hard.end() || !contains(res, "nvidia.com")) continue;
          f.evidence.push_back(
              Evidence{fmt::format("resourcequota/{}/{} .status at {}", q.ns(), q.name(), q.doc->where(used.line)),
                       fmt::format("{}: used {} of {}", res, used->to_string(), hard->second->to_string())});
        }
      }
      f.details.push_back("GPU pods of this namespace that hold the quota are listed by: kubectl get pods -n " +
                          std::string(t.doc->metadata.namespace_) + " --field-selector status.phase=Running");
      f.fix.push_back(fmt::format("kubectl describe resourcequota -n {} {}", t.doc->metadata.namespace_, quota_name));
      f.fix.push_back(fmt::format(
          "free GPUs in {} (finish or scale down GPU workloads), or raise the quota: kubectl patch "
          "resourcequota -n {} {} --type merge -p '{{\"spec\":{{\"hard\":{{\"requests.nvidia.com/gpu\":\"<n>\"}}}}}}'",
          t.doc->metadata.namespace_, t.doc->metadata.namespace_, quota_name));
      if (quota_reported.insert(obj).second) add(std::move(f));
      break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The production-readiness checklist

bool system_namespace(sv ns) {
  return ns.starts_with("kube-") || ns == "gpu-operator" || ns.starts_with("nvidia") || ns == "kgpu-system" ||
         ns == "monitoring" || ns == "cert-manager" || ns == "default-system";
}

void Diagnoser::checklist() {
  const bool cluster_scope = o_.target.kind == Target::Kind::kCluster;
  const auto checklist_finding = [&](const char* rule, Severity sev, std::string object,
                                     std::string summary) -> Finding& {
    Finding f;
    f.rule = rule;
    f.layer = Layer::kCluster;
    f.severity = sev;
    f.object = std::move(object);
    f.summary = std::move(summary);
    return add(std::move(f));
  };
  std::vector<const NodeObj*> gpu_nodes;
  for (const auto& n : s_.nodes) {
    if (is_gpu_node(n)) gpu_nodes.push_back(&n);
  }
  // GPU workloads: Deployments, StatefulSets, Jobs (not owned), CronJobs, bare pods.
  struct Wl {
    const k8s::Document* doc;
    const k8s::PodTemplate* tpl;
    const k8s::Workload* workload;
  };
  std::vector<Wl> wls;
  for (const auto& w : s_.workloads) {
    if ((w.doc->kind == "Deployment" || w.doc->kind == "StatefulSet") && gpu_request(w.v.pod_template.spec)) {
      wls.push_back({w.doc, &w.v.pod_template, &w.v});
    }
  }
  for (const auto& j : s_.jobs) {
    if (j.doc->metadata.owner_references.empty() && gpu_request(j.v.pod_template.spec)) {
      wls.push_back({j.doc, &j.v.pod_template, nullptr});
    }
  }
  for (const auto& c : s_.cron_jobs) {
    if (gpu_request(c.v.job_template.pod_template.spec))
      wls.push_back({c.doc, &c.v.job_template.pod_template, nullptr});
  }
  const auto obj = [](const k8s::Document* d) {
    return fmt::format("{}/{}/{}", lower(d->kind), d->metadata.namespace_, d->metadata.name);
  };
  std::set<std::string> team_namespaces;
  for (const auto& w : wls) {
    if (!system_namespace(w.doc->metadata.namespace_)) team_namespaces.insert(std::string(w.doc->metadata.namespace_));
  }
  for (const auto& p : s_.pods) {
    if (p.doc->metadata.owner_references.empty() && gpu_request(p.v.spec) && !system_namespace(p.ns())) {
      team_namespaces.insert(std::string(p.ns()));
    }
  }

  if (cluster_scope) {
    // GPU nodes tainted.
    std::vector<std::string> untainted;
    for (const auto* n : gpu_nodes) {
      const bool tainted = std::any_of(n->v.taints.begin(), n->v.taints.end(), [](const k8s::Taint& t) {
        return t.effect == "NoSchedule" || t.effect == "NoExecute";
      });
      if (!tainted) untainted.emplace_back(n->name());
    }
    if (!untainted.empty()) {
      auto& f = checklist_finding("checklist-gpu-nodes-tainted", Severity::kWarning, "cluster",
                                  fmt::format("{} of {} GPU node(s) have no NoSchedule taint: CPU pods can fill their "
                                              "CPU and memory",
                                              untainted.size(), gpu_nodes.size()));
      f.details.push_back(
          fmt::format("untainted: {}",
                      fmt::join(untainted.begin(), untainted.begin() + std::min<size_t>(untainted.size(), 10), ", ")));
      f.fix.push_back(fmt::format("kubectl taint nodes {} nvidia.com/gpu=present:NoSchedule", untainted.front()));
    }
    // Priority classes.
    int user_pcs = 0;
    for (const auto& pc : s_.priority_classes) {
      if (!pc.name().starts_with("system-")) ++user_pcs;
    }
    if (user_pcs == 0 && !wls.empty()) {
      auto& f =
          checklist_finding("checklist-priority-classes", Severity::kWarning, "cluster",
                            "no PriorityClass besides the system ones: production inference cannot preempt dev work");
      f.fix.push_back(
          "kubectl create priorityclass gpu-production --value=100000 --description='production GPU inference'");
      f.fix.push_back("kubectl create priorityclass gpu-dev --value=1000 --description='dev and batch GPU work'");
    }
    // Metrics scraped.
    bool scraped = false;
    for (const auto* m : s_.monitors) {
      const std::string txt = lower(m->metadata.name) + " " + lower(m->metadata.namespace_);
      if (contains_any(txt, {"dcgm", "kgpu", "gpu"})) scraped = true;
      if (const k8s::Node* sel = m->root->at({"spec", "selector", "matchLabels"})) {
        for (const auto& e : sel->entries()) {
          if (contains_any(lower(e.value().text()), {"dcgm", "kgpu"})) scraped = true;
        }
      }
    }
    for (const auto& svc : s_.services) {
      auto it = svc.doc->metadata.annotations.find("prometheus.io/scrape");
      if (it != svc.doc->metadata.annotations.end() && it->second == "true" &&
          contains_any(lower(svc.name()), {"dcgm", "kgpu"})) {
        scraped = true;
      }
    }
    if (!scraped && !gpu_nodes.empty()) {
      auto& f = checklist_finding("checklist-gpu-metrics-scraped", Severity::kWarning, "cluster",
                                  "no ServiceMonitor/PodMonitor (or prometheus.io/scrape Service) selects the DCGM "
                                  "exporter or kgpu agent: GPU metrics are not scraped");
      f.fix.push_back(
          "helm upgrade gpu-operator nvidia/gpu-operator -n gpu-operator --reuse-values --set "
          "dcgmExporter.serviceMonitor.enabled=true");
    }
    // Alert rules.
    struct Want {
      const char* what;
      std::initializer_list<sv> metrics;
      bool found = false;
    };
    std::array<Want, 4> wants = {
        Want{"temperature", {"DCGM_FI_DEV_GPU_TEMP"}}, Want{"memory", {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"}},
        Want{"XID errors", {"DCGM_FI_DEV_XID_ERRORS"}},
        Want{"idle allocated GPUs", {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}}};
    for (const auto& pr : s_.prometheus_rules) {
      for (const auto& g : pr.v.groups) {
        for (const auto& r : g.rules) {
          if (!r.alert) continue;
          for (auto& w : wants) w.found = w.found || contains_any(*r.expr, w.metrics);
        }
      }
    }
    std::vector<std::string> missing;
    for (const auto& w : wants) {
      if (!w.found) missing.emplace_back(w.what);
    }
    if (!missing.empty() && !gpu_nodes.empty()) {
      auto& f = checklist_finding("checklist-gpu-alerts", Severity::kWarning, "cluster",
                                  fmt::format("no alert rule for GPU {}", fmt::join(missing, ", ")));
      f.details.push_back(fmt::format("{} PrometheusRule object(s) in the snapshot", s_.prometheus_rules.size()));
      f.fix.push_back("kubectl apply -f deploy/rules/gpu-alerts.rules.yaml  # or the guide's gpu-alerts.yaml");
    }
    // One driver owner.
    for (const auto* n : gpu_nodes) {
      const auto* d = stack_pod_on(s_, n->name(), "driver");
      if (d == nullptr) continue;
      std::string host;
      if (label(n->doc, "nvidia.com/gpu.deploy.driver") == "pre-installed")
        host = "nvidia.com/gpu.deploy.driver=pre-installed";
      if (sv v = label(n->doc, "cloud.google.com/gke-gpu-driver-version"); !v.empty())
        host = fmt::format("cloud.google.com/gke-gpu-driver-version={}", v);
      if (host.empty()) continue;
      auto& f =
          checklist_finding("checklist-one-driver-owner", Severity::kCritical, fmt::format("node/{}", n->name()),
                            "two driver owners: the GPU Operator's driver pod runs on a node whose driver the host "
                            "(or the cloud provider) already installs");
      f.evidence.push_back(
          Evidence{fmt::format("node/{} labels at {}", n->name(), n->doc->where(n->doc->metadata.labels_line)), host});
      f.details.push_back(fmt::format("operator driver pod: {}/{}", d->ns(), d->name()));
      f.fix.push_back(
          "helm upgrade gpu-operator nvidia/gpu-operator -n gpu-operator --reuse-values --set driver.enabled=false");
    }
    // CUDA validator.
    bool operator_present = false;
    for (const auto& p : s_.pods) operator_present = operator_present || component(p) == "validator";
    if (operator_present) {
      for (const auto* n : gpu_nodes) {
        if (not_advertised_nodes_.contains(std::string(n->name()))) continue;
        const auto* v = stack_pod_on(s_, n->name(), "validator");
        bool ok = v != nullptr && *v->v.status.phase == "Running";
        if (ok) {
          for (const auto& st : v->v.status.init_container_statuses) {
            if (st.name == "cuda-validation" && !(st.state.state == "terminated" && st.state.exit_code == 0))
              ok = false;
          }
        }
        if (ok) continue;
        auto& f = checklist_finding("checklist-cuda-validator", Severity::kWarning, fmt::format("node/{}", n->name()),
                                    "nvidia-cuda-validator has not completed on this GPU node");
        if (v != nullptr)
          f.details.push_back(fmt::format("validator {}/{}: {}", v->ns(), v->name(), pod_status_text(v->v)));
        f.fix.push_back(
            fmt::format("kubectl get pods -n gpu-operator -o wide --field-selector spec.nodeName={}", n->name()));
      }
    }
  }

  // Namespaced items.
  for (const auto& ns : team_namespaces) {
    if (!in_scope_ns(ns)) continue;
    bool quota = false;
    for (const auto& q : s_.quotas) {
      if (q.ns() == ns && q.v.hard.contains("requests.nvidia.com/gpu")) quota = true;
    }
    if (!quota) {
      auto& f = checklist_finding("checklist-gpu-quota", Severity::kWarning, fmt::format("namespace/{}", ns),
                                  "no ResourceQuota on requests.nvidia.com/gpu in this team namespace");
      f.fix.push_back(fmt::format("kubectl create quota gpu-quota -n {} --hard=requests.nvidia.com/gpu=<n>", ns));
    }
  }
  std::vector<const k8s::Taint*> gpu_taints;
  for (const auto* n : gpu_nodes) {
    for (const auto& t : n->v.taints) {
      if (t.effect == "NoSchedule" || t.effect == "NoExecute") gpu_taints.push_back(&t);
    }
  }
  for (const auto& w : wls) {
    const sv ns = w.doc->metadata.namespace_;
    if (!in_scope_ns(ns) || system_namespace(ns)) continue;
    const auto& spec = w.tpl->spec;
    const std::string o = obj(w.doc);
    // Tolerations for the GPU taints.
    if (!gpu_taints.empty()) {
      const bool tolerates_some = std::any_of(gpu_taints.begin(), gpu_taints.end(), [&](const k8s::Taint* t) {
        return k8s::tolerates(spec.tolerations, *t);
      });
      if (!tolerates_some) {
        auto& f = checklist_finding(
            "checklist-workloads-tolerate", Severity::kWarning, o,
            fmt::format("the GPU workload tolerates none of the GPU nodes' taints (e.g. {}={}:{})",
                        gpu_taints.front()->key, gpu_taints.front()->value, gpu_taints.front()->effect));
        f.fix.push_back(patch_command(
            {std::string(w.doc->kind), std::string(w.doc->metadata.name)}, ns,
            fmt::format("{{\"tolerations\":[{{\"key\":\"{}\",\"operator\":\"Exists\",\"effect\":\"{}\"}}]}}",
                        gpu_taints.front()->key, gpu_taints.front()->effect)));
      }
    }
    // Pinned images.
    for (const auto& c : spec.containers) {
      const sv image = *c.image;
      const auto slash = image.rfind('/');
      const sv last = slash == sv::npos ? image : image.substr(slash + 1);
      const bool digest = contains(image, "@sha256:");
      const bool tagged = last.find(':') != sv::npos;
      if (digest || (tagged && !last.ends_with(":latest"))) continue;
      auto& f =
          checklist_finding("checklist-image-pinned", Severity::kWarning, o,
                            fmt::format("container {} runs image {} without a pinned version: a new release changes "
                                        "the server on the next restart",
                                        c.name, image));
      f.evidence.push_back(Evidence{fmt::format("{} image at {}", o, w.doc->where(c.image.line)), std::string(image)});
      f.fix.push_back(fmt::format("kubectl set image {}/{} -n {} {}={}:<version>", lower(w.doc->kind),
                                  w.doc->metadata.name, ns, c.name,
                                  tagged ? image.substr(0, image.size() - 7) : image));
    }
    if (w.workload == nullptr || w.doc->kind != "Deployment") continue;
    // Inference Deployments: PDB, startup probe, HPA signal.
    bool pdb = false;
    for (const auto& d : s_.pdbs) {
      if (d.ns() == ns && d.v.selector.line > 0 && d.v.selector.matches(w.tpl->metadata.labels)) pdb = true;
    }
    if (!pdb) {
      auto& f =
          checklist_finding("checklist-pdb-inference", Severity::kWarning, o,
                            "no PodDisruptionBudget covers this GPU Deployment: driver upgrades and drains can take "
                            "every replica down at once");
      f.fix.push_back(
          fmt::format("kubectl create pdb {} -n {} --selector={} --max-unavailable=1", w.doc->metadata.name, ns, [&] {
            std::vector<std::string> kv;
            for (const auto& [k, v] : w.workload->selector.match_labels) kv.push_back(fmt::format("{}={}", k, v));
            return fmt::format("{}", fmt::join(kv, ","));
          }()));
    }
    for (const auto& c : spec.containers) {
      if (c.startup_probe || !first_gpu_container(spec) || &c != first_gpu_container(spec)) continue;
      auto& f = checklist_finding("checklist-startup-probe", Severity::kWarning, o,
                                  fmt::format("GPU container {} has no startupProbe: the kubelet may kill it while the "
                                              "model is still loading",
                                              c.name));
      f.fix.push_back(
          "add a startupProbe on the health endpoint with periodSeconds: 10, failureThreshold: 60 (10 minutes)");
    }
    for (const auto& h : s_.hpas) {
      if (h.ns() != ns || h.v.scale_target_ref.name != w.doc->metadata.name) continue;
      bool cpu = false, queue = false;
      for (const auto& m : h.v.metrics) {
        if ((m.type == "Resource" || m.type == "ContainerResource") && (m.name == "cpu" || m.name == "memory"))
          cpu = true;
        if (m.type == "Pods" || m.type == "Object" || m.type == "External") queue = true;
      }
      if (cpu && !queue) {
        auto& f = checklist_finding("checklist-autoscale-queue-depth", Severity::kWarning,
                                    fmt::format("horizontalpodautoscaler/{}/{}", ns, h.name()),
                                    fmt::format("the HPA scales GPU Deployment {} on CPU: use queue depth "
                                                "(vllm:num_requests_waiting) or latency",
                                                w.doc->metadata.name));
        f.fix.push_back(
            "scale on a Pods/External metric (KEDA or the Prometheus Adapter) such as vllm:num_requests_waiting");
      }
    }
  }
}

void Diagnoser::invalid_field_findings() {
  for (const InvalidField& bad : s_.invalid_fields) {
    const k8s::Document& d = *bad.doc;
    if (d.kind == "Node") {
      if (o_.target.kind != Target::Kind::kCluster &&
          !(o_.target.kind == Target::Kind::kNode && d.metadata.name == o_.target.name)) {
        continue;
      }
    } else if (d.kind == "Pod") {
      const PodObj* p = s_.pod(d.metadata.namespace_, d.metadata.name);
      if (p == nullptr || p->doc != &d || !in_scope_pod(*p)) continue;
    } else if (o_.target.kind == Target::Kind::kPod || o_.target.kind == Target::Kind::kNode ||
               !in_scope_ns(d.metadata.namespace_)) {
      continue;
    }
    Finding f;
    f.rule = "invalid-quantity";
    f.severity = Severity::kWarning;
    f.layer = Layer::kSpec;
    f.object = d.metadata.namespace_.empty() ? fmt::format("{}/{}", lower(d.kind), d.metadata.name)
                                              : fmt::format("{}/{}/{}", lower(d.kind), d.metadata.namespace_,
                                                            d.metadata.name);
    f.summary = fmt::format("input error: {}", bad.message);
    f.details.push_back(
        "the API server rejects this value, so the object cannot be as the snapshot says (edited or corrupted "
        "input): it is not diagnosed");
    if (d.kind == "Node") {
      f.details.push_back("Pending pods are not diagnosed either: their fit depends on this node's capacity");
    }
    f.evidence.push_back(Evidence{fmt::format("{} at {}", f.object, d.where(bad.line)), bad.message});
    f.fix.push_back(d.metadata.namespace_.empty()
                        ? fmt::format("kubectl get {} {} -o json", lower(d.kind), d.metadata.name)
                        : fmt::format("kubectl get {} -n {} {} -o json", lower(d.kind), d.metadata.namespace_,
                                      d.metadata.name));
    add(std::move(f));
  }
}

std::vector<Finding> Diagnoser::run() {
  if (s_.nodes.empty()) {
    // A partial snapshot (pods of one namespace, no nodes): every fit question would answer
    // "0/0 nodes"; say what is missing once and skip the scheduler rules.
    Finding f;
    f.rule = "snapshot-no-nodes";
    f.severity = Severity::kWarning;
    f.layer = Layer::kCluster;
    f.object = "cluster";
    f.summary = "snapshot has no nodes (collect with kgpu doctor --collect): scheduling is not diagnosed";
    f.fix.push_back("kgpu doctor --collect -o snapshot.json");
    add(std::move(f));
  }
  invalid_field_findings();
  if (o_.target.kind == Target::Kind::kCluster || o_.target.kind == Target::Kind::kNode) {
    for (const auto& n : s_.nodes) {
      if (in_scope_node(n) && !s_.has_invalid_fields(n.doc)) node_findings(n);
    }
    driver_findings();
  }
  if (o_.target.kind == Target::Kind::kCluster || o_.target.kind == Target::Kind::kNamespace) spec_findings();
  const bool node_invalid = std::any_of(s_.nodes.begin(), s_.nodes.end(),
                                        [&](const NodeObj& n) { return s_.has_invalid_fields(n.doc); });
  for (const auto& p : s_.pods) {
    if (!in_scope_pod(p) || s_.has_invalid_fields(p.doc)) continue;
    // Fit answers over a node whose capacity could not be read would be wrong.
    if (node_invalid && p.v.status.phase.value_or("") == "Pending" && p.v.spec.node_name->empty()) continue;
    if (auto f = pod_finding(p)) {
      // A Pending pod whose only cause is the node's missing plugin names the node finding too.
      add(std::move(*f));
    }
  }
  if (o_.checklist && (o_.target.kind == Target::Kind::kCluster || o_.target.kind == Target::Kind::kNamespace)) {
    checklist();
  }
  sort_findings(out_);
  return std::move(out_);
}

}  // namespace

const std::vector<RuleInfo>& rule_catalog() {
  static const std::vector<RuleInfo> kRules = {
      {"invalid-quantity", Layer::kSpec, Severity::kWarning,
       "a quantity in the snapshot is not one the API server accepts (object not diagnosed)"},
      {"gpu-request-fractional", Layer::kSpec, Severity::kCritical, "GPU request is not a whole number"},
      {"gpu-request-limit-mismatch", Layer::kSpec, Severity::kCritical, "GPU request differs from its limit"},
      {"quota-exhausted", Layer::kSpec, Severity::kCritical, "ResourceQuota on GPUs used up: pods are not created"},
      {"selector-no-match", Layer::kScheduler, Severity::kCritical, "node selector / affinity matches no node"},
      {"gpu-taint-not-tolerated", Layer::kScheduler, Severity::kCritical, "GPU nodes' taint not tolerated"},
      {"gpu-node-unavailable", Layer::kNode, Severity::kCritical, "GPU nodes cordoned or NotReady: no new pods"},
      {"gpu-node-cpu-memory-full", Layer::kScheduler, Severity::kCritical, "GPU free but node CPU/memory full"},
      {"rolling-update-second-gpu", Layer::kScheduler, Severity::kCritical, "rolling update needs a second GPU"},
      {"insufficient-gpu", Layer::kScheduler, Severity::kCritical, "not enough free GPUs (with their holders)"},
      {"dra-claim-unsatisfiable", Layer::kScheduler, Severity::kCritical, "no device satisfies a DRA claim"},
      {"mig-config-failed", Layer::kNode, Severity::kCritical, "MIG configuration state failed"},
      {"mig-config-pending", Layer::kNode, Severity::kWarning, "MIG configuration still pending/rebooting"},
      {"gpu-resource-name-mismatch", Layer::kSpec, Severity::kCritical,
       "pod asks a GPU resource name the nodes do not advertise (renameByDefault)"},
      {"gpu-not-advertised", Layer::kPlugin, Severity::kCritical, "node advertises no nvidia.com/gpu"},
      {"admission-shared-request", Layer::kPlugin, Severity::kCritical, "UnexpectedAdmissionError: shared request > 1"},
      {"admission-plugin-not-registered", Layer::kPlugin, Severity::kCritical,
       "UnexpectedAdmissionError: plugin not re-registered after kubelet restart"},
      {"admission-out-of-resource", Layer::kScheduler, Severity::kCritical,
       "pod bound with nodeName rejected by the kubelet: OutOf<resource>"},
      {"toolkit-init-error", Layer::kRuntime, Severity::kCritical, "nvidia-container-cli initialization error"},
      {"driver-version-mismatch", Layer::kDriver, Severity::kCritical, "NVML driver/library version mismatch"},
      {"driver-kernel-crashloop", Layer::kDriver, Severity::kCritical, "driver pod CrashLoopBackOff (kernel)"},
      {"driver-secure-boot", Layer::kDriver, Severity::kCritical, "Secure Boot rejects unsigned modules"},
      {"app-visible-devices-by-hand", Layer::kApp, Severity::kCritical, "NVIDIA_VISIBLE_DEVICES set by hand"},
      {"app-cuda-newer-than-driver", Layer::kApp, Severity::kCritical, "image CUDA newer than the driver"},
      {"app-no-gpu-requested", Layer::kApp, Severity::kWarning, "GPU image without a GPU request"},
      {"snapshot-no-nodes", Layer::kCluster, Severity::kWarning, "snapshot has no nodes: scheduling not diagnosed"},
      {"checklist-gpu-nodes-tainted", Layer::kCluster, Severity::kWarning, "GPU nodes tainted"},
      {"checklist-workloads-tolerate", Layer::kCluster, Severity::kWarning, "GPU workloads tolerate the GPU taint"},
      {"checklist-gpu-quota", Layer::kCluster, Severity::kWarning, "requests.nvidia.com/gpu quota per team namespace"},
      {"checklist-priority-classes", Layer::kCluster, Severity::kWarning, "PriorityClasses for production vs dev"},
      {"checklist-pdb-inference", Layer::kCluster, Severity::kWarning, "PDBs on inference Deployments"},
      {"checklist-gpu-metrics-scraped", Layer::kCluster, Severity::kWarning, "GPU metrics scraped by Prometheus"},
      {"checklist-gpu-alerts", Layer::kCluster, Severity::kWarning, "alerts: temperature, memory, XID, idle"},
      {"checklist-image-pinned", Layer::kCluster, Severity::kWarning, "images pinned"},
      {"checklist-one-driver-owner", Layer::kCluster, Severity::kCritical, "exactly one driver owner per node"},
      {"checklist-startup-probe", Layer::kCluster, Severity::kWarning, "startup probes on inference"},
      {"checklist-autoscale-queue-depth", Layer::kCluster, Severity::kWarning, "autoscaling on queue depth, not CPU"},
      {"checklist-cuda-validator", Layer::kCluster, Severity::kWarning,
       "nvidia-cuda-validator completed on every GPU node"},
  };
  return kRules;
}

Result<std::vector<Finding>> diagnose(const Snapshot& snapshot, const Options& options) {
  const auto& t = options.target;
  if (t.kind == Target::Kind::kPod && snapshot.pod(t.ns, t.name) == nullptr) {
    return fail(ErrorCode::kNotFound, "pod {}/{} is not in the snapshot", t.ns, t.name);
  }
  if (t.kind == Target::Kind::kNode && snapshot.node(t.name) == nullptr) {
    return fail(ErrorCode::kNotFound, "node {} is not in the snapshot", t.name);
  }
  if (t.kind == Target::Kind::kNamespace) {
    bool found = std::any_of(snapshot.namespaces.begin(), snapshot.namespaces.end(),
                             [&](const auto& n) { return n.name() == t.ns; }) ||
                 std::any_of(snapshot.pods.begin(), snapshot.pods.end(), [&](const auto& p) { return p.ns() == t.ns; });
    if (!found) return fail(ErrorCode::kNotFound, "namespace {} is not in the snapshot", t.ns);
  }
  return Diagnoser(snapshot, options).run();
}

}  // namespace kgpu::doctor
