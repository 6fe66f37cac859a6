// Internal to kgpu_doctor: the Diagnoser that diagnose() runs, and the helpers its rules share.
// One file per layer defines the Diagnoser's rules for that layer (src/doctor/rules/*.cc); the
// driver (diagnoser.cc) walks the targets and calls them. Not a public API: include diagnose.h.
//
// Ownership: a Diagnoser borrows the Snapshot and Options for its one run(); every pointer and
// view a helper returns points into the Snapshot. Threads: one Diagnoser per thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "doctor/diagnose.h"

namespace kgpu::doctor::detail {

using PodObj = Obj<k8s::Pod>;
using NodeObj = Obj<k8s::KubeNode>;
using sv = std::string_view;

// ---- Text and evidence (evidence.cc) ----

bool contains(sv haystack, sv needle);
bool contains_any(sv haystack, std::span<const sv> needles);
bool contains_any(sv haystack, std::initializer_list<sv> needles);
// "3d4h", "2h5m", "7m".
std::string age(int64_t seconds);
std::string pod_ref(const PodObj& p);  // "pod/<ns>/<name>"

Evidence event_evidence(const Obj<k8s::Event>& e);
// The latest event about the object with that reason (any reason when empty) whose message
// contains `needle` (any message when empty).
const Obj<k8s::Event>* last_event(const Snapshot& s, sv kind, sv ns, sv name, sv reason, sv needle = {});

struct LogHit {
  const ContainerLog* log = nullptr;
  int line = 0;
  sv text;
};
// The first log line (in `logs` order) containing any of `needles`.
std::optional<LogHit> find_in_logs(std::span<const ContainerLog* const> logs, std::span<const sv> needles);
std::optional<LogHit> find_in_logs(std::span<const ContainerLog* const> logs, std::initializer_list<sv> needles);
Evidence log_evidence(const LogHit& h);

// A command that applies `spec_json` (a pod spec merge patch) to the owner ({kind, name}) of a pod.
std::string patch_command(const std::pair<std::string, std::string>& owner, sv ns, const std::string& spec_json);

// ---- Predicates over snapshot objects (predicates.cc) ----

struct GpuRequest {
  std::string resource;
  k8s::Quantity quantity;
};
// The pod's first non-zero GPU resource and its effective request, if any.
std::optional<GpuRequest> gpu_request(const k8s::PodSpec& spec);

sv label(const k8s::Document* doc, sv key);
bool is_gpu_node(const NodeObj& n);
int64_t gpu_allocatable(const NodeObj& n);
// GPU operator / kgpu component of a pod, by its name or app label: "driver", "toolkit",
// "device-plugin", "validator", "cuda-validator", "mig-manager", "dcgm-exporter", "kgpu-agent", "".
sv component(const PodObj& p);
const PodObj* stack_pod_on(const Snapshot& s, sv node, sv comp);
// "Running", "CrashLoopBackOff", "Init:CrashLoopBackOff", "Init:1/4" ... as kubectl prints.
std::string pod_status_text(const k8s::Pod& p);
// The controller at the top of a pod's owner chain: ("Deployment", name) through a ReplicaSet
// named <deployment>-<hash>, else the direct controller, else ("Pod", name).
std::pair<std::string, std::string> top_owner(const Snapshot& s, const PodObj& p);
const k8s::Container* first_gpu_container(const k8s::PodSpec& spec);
bool system_namespace(sv ns);

// ---- The diagnosis ----

class Diagnoser {
 public:
  Diagnoser(const Snapshot& s, const Options& o) : s_(s), o_(o) {}

  std::vector<Finding> run();

 private:
  // diagnoser.cc: scope and the per-pod walk through the layers.
  bool in_scope_pod(const PodObj& p) const;
  bool in_scope_node(const NodeObj& n) const;
  bool in_scope_ns(sv ns) const;
  std::optional<Finding> pod_finding(const PodObj& p);

  // rules/spec.cc: what the API server rejects (validation, quota) and input errors.
  void invalid_field_findings();
  void spec_findings();
  std::pair<sv, sv> creator_of(sv kind, sv ns, sv name) const;

  // rules/scheduler.cc: Pending pods and pods the kubelet rejected for lack of a resource.
  std::optional<Finding> admission_out_of(const PodObj& p, const GpuRequest& req);
  std::optional<Finding> scheduling(const PodObj& p, const GpuRequest& req);
  void add_scheduling_evidence(const PodObj& p, Finding& f);

  // rules/dra.cc: Pending pods with DRA claims.
  std::optional<Finding> dra(const PodObj& p);

  // rules/node.cc: the node's own state (MIG configuration).
  void node_findings(const NodeObj& n);
  void remediation_findings(const NodeObj& n);  // in node.cc

  // rules/plugin.cc: the device plugin's registration and the kubelet's device admission.
  void plugin_findings(const NodeObj& n);
  std::optional<Finding> admission(const PodObj& p);
  // The kubelet's UnexpectedAdmissionError ("Allocate failed due to ..."): `p` when the pod is in
  // the snapshot, nullptr when only its event is.
  Finding admission_rejected(sv ns, sv name, sv node, sv message, Evidence evidence, const PodObj* p);

  // rules/driver.cc: the NVIDIA driver on the node, from the GPU stack's pods and logs.
  void driver_findings();

  // rules/runtime.cc: the container runtime hook.
  std::optional<Finding> runtime(const PodObj& p);

  // rules/app.cc: the workload's own container.
  std::optional<Finding> app(const PodObj& p, const std::optional<GpuRequest>& req);
  // A model server killed by its liveness/startup probe while it loads: `p` when the pod is in the
  // snapshot, nullptr when only its events are.
  std::optional<Finding> probe_killed(sv ns, sv name, const PodObj* p);

  // rules/pod_events.cc: pods known only from their events (the pod itself is not in the snapshot).
  void pod_event_findings();
  std::optional<Finding> pod_event_finding(sv ns, sv name);

  // rules/checklist.cc: the production-readiness checklist.
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
  // rules/scheduler.cc
  const Holders& holders(const std::string& resource);
  std::map<std::string, Holders> holders_;

  const Snapshot& s_;
  const Options& o_;
  std::vector<Finding> out_;
  std::set<std::string> not_advertised_nodes_;
};

}  // namespace kgpu::doctor::detail
