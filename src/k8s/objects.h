// Typed views of the Kubernetes kinds that kgpu's lint and doctor rules read, decoded from a
// Document's tree.
//
// Each as_<kind>() returns nullopt when the document is of another kind (unknown kinds are only
// ever seen as Documents). A field of the wrong type or a malformed quantity does not fail the
// view: the field is left absent and an Issue (line, message) is added to the view's `issues`.
//
// Fields carry the line of their key (Field<T>::line, 0 when the field is absent); sequence
// elements carry the line they start on. Strings are views into the Document's tree: a view is
// valid while its Document (or a copy of it) lives. Views are plain values, safe to read from
// several threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/document.h"
#include "k8s/quantity.h"

namespace kgpu::k8s {

template <typename T>
struct Field {
  T value{};
  int line = 0;  // of the key; 0 = absent

  explicit operator bool() const { return line > 0; }
  const T& operator*() const { return value; }
  const T* operator->() const { return &value; }
  T value_or(T fallback) const { return line > 0 ? value : fallback; }
};

using Text = Field<std::string_view>;
using Int = Field<int64_t>;
using Bool = Field<bool>;
// Sorted flat maps (document.h): one exact-size allocation, not a tree node per entry.
using QuantityMap = FlatMap<Field<Quantity>>;
using TextMap = FlatMap<Text>;

// An optional sub-struct kept on the heap: 8 bytes when absent (std::optional would hold its full
// size in every object), for parts most objects lack. Owns its value; copies are deep. The
// std::optional interface the views use: explicit bool, *, ->, has_value, assignment of a value.
template <typename T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(const Boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  Boxed& operator=(T v) {
    p_ = std::make_unique<T>(std::move(v));
    return *this;
  }

  explicit operator bool() const { return p_ != nullptr; }
  bool has_value() const { return p_ != nullptr; }
  const T& operator*() const { return *p_; }
  const T* operator->() const { return p_.get(); }
  T& operator*() { return *p_; }
  T* operator->() { return p_.get(); }
  void reset() { p_.reset(); }

 private:
  std::unique_ptr<T> p_;
};

struct Issue {
  int line = 0;
  std::string message;  // names the field: "spec.containers[0].resources.limits.memory: invalid quantity '1GB' ..."
  // A quantity field holding something the API server rejects (not a quantity, malformed, or out
  // of the range Quantity keeps): the object as written cannot exist in a cluster.
  bool invalid_quantity = false;
};

struct IntOrString {
  bool is_string = false;
  int64_t int_value = 0;
  std::string_view string_value;  // "50%"
};

// -----------------------------------------------------------------------------------------------
// Selectors, taints and tolerations

struct LabelSelectorRequirement {
  std::string_view key;
  std::string_view op;  // In | NotIn | Exists | DoesNotExist
  std::vector<std::string_view> values;
  int line = 0;
};

struct LabelSelector {
  StringMap match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;
  int line = 0;  // 0 = no selector

  // metav1.LabelSelectorAsSelector semantics: every matchLabels pair and every expression must
  // hold; an empty selector matches everything; an unknown operator matches nothing. Whether an
  // absent selector (line == 0) selects all or nothing depends on the kind: check it first.
  bool matches(const StringMap& labels) const;
};

struct NodeSelectorRequirement {
  std::string_view key;
  std::string_view op;  // In | NotIn | Exists | DoesNotExist | Gt | Lt
  std::vector<std::string_view> values;
  int line = 0;
};

struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;  // on node labels
  std::vector<NodeSelectorRequirement> match_fields;       // metadata.name only
  int line = 0;
};

// A node matches a term when all its requirements hold; a term without requirements matches no
// node. Terms are ORed: matches_any() is false for an empty list.
bool matches(const NodeSelectorTerm& term, const StringMap& node_labels, std::string_view node_name);
bool matches_any(std::span<const NodeSelectorTerm> terms, const StringMap& node_labels, std::string_view node_name);
// spec.nodeSelector: every pair present in the labels.
bool matches_node_selector(const StringMap& node_selector, const StringMap& node_labels);

struct Taint {
  std::string_view key;
  std::string_view value;
  std::string_view effect;  // NoSchedule | PreferNoSchedule | NoExecute
  int line = 0;
};

struct Toleration {
  std::string_view key;  // "" with Exists: every key
  std::string_view op;   // "" (= Equal) | Equal | Exists
  std::string_view value;
  std::string_view effect;  // "" = every effect
  Int toleration_seconds;
  int line = 0;
};

// k8s::toleration_tolerates (k8s/predicates.h): v1.Toleration.ToleratesTaint, and an empty key
// only with Exists (API validation).
bool tolerates(const Toleration& toleration, const Taint& taint);
bool tolerates(std::span<const Toleration> tolerations, const Taint& taint);
// The first NoSchedule/NoExecute taint none of `tolerations` tolerates (what the scheduler's
// TaintToleration filter rejects on), or nullptr.
const Taint* first_untolerated(std::span<const Taint> taints, std::span<const Toleration> tolerations);

// -----------------------------------------------------------------------------------------------
// Pods

struct Condition {
  std::string_view type;
  std::string_view status;  // "True" | "False" | "Unknown"
  std::string_view reason;
  std::string_view message;
  std::string_view last_transition_time;
  int line = 0;
};

// The condition of that type, or nullptr.
const Condition* find_condition(std::span<const Condition> conditions, std::string_view type);

struct EnvVar {
  std::string_view name;
  Text value;               // `value:` as written
  bool value_from = false;  // `valueFrom:` present
  int line = 0;
};

struct ResourceRequirements {
  QuantityMap requests;
  QuantityMap limits;
  std::vector<Text> claims;  // resources.claims[].name
  int line = 0;              // of `resources:`
};

struct VolumeMount {
  std::string_view name;
  std::string_view mount_path;
  bool read_only = false;
  int line = 0;
};

struct Probe {
  Int initial_delay_seconds;
  Int period_seconds;
  Int timeout_seconds;
  Int failure_threshold;
  Int success_threshold;
  int line = 0;  // of the probe's key
};

struct Container {
  std::string_view name;
  Text image;
  std::vector<Text> command;
  std::vector<Text> args;
  std::vector<EnvVar> env;
  ResourceRequirements resources;
  std::vector<VolumeMount> volume_mounts;
  Bool privileged;  // securityContext.privileged
  Boxed<Probe> startup_probe;
  Boxed<Probe> readiness_probe;
  Boxed<Probe> liveness_probe;
  Text restart_policy;  // init containers: "Always" = sidecar
  int line = 0;
  const Value* raw = nullptr;

  bool is_sidecar() const { return restart_policy.value == "Always"; }
};

// requests with the API server's defaulting: a resource in limits but not in requests is requested
// at its limit.
QuantityMap effective_requests(const Container& container);

struct Volume {
  std::string_view name;
  Text host_path;  // hostPath.path
  bool empty_dir = false;
  Text empty_dir_medium;  // "" | Memory
  Field<Quantity> empty_dir_size_limit;
  Text persistent_volume_claim;  // claimName
  Text secret;                   // secretName
  Text config_map;               // name
  int line = 0;
  const Value* raw = nullptr;
};

struct PodResourceClaim {
  std::string_view name;
  Text resource_claim_name;
  Text resource_claim_template_name;
  int line = 0;
};

struct PodSpec {
  Text node_name;
  StringMap node_selector;
  int node_selector_line = 0;
  const Value* affinity = nullptr;  // raw
  // affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
  std::vector<NodeSelectorTerm> required_node_affinity;
  std::vector<Toleration> tolerations;
  std::vector<Container> containers;
  std::vector<Container> init_containers;
  std::vector<Volume> volumes;
  Text priority_class_name;
  Int priority;
  std::vector<PodResourceClaim> resource_claims;
  Text runtime_class_name;
  Text restart_policy;
  Text scheduler_name;
  QuantityMap overhead;
  int line = 0;  // of `spec:`
};

// The pod's request for `resource` as the scheduler computes it: max(sum over containers and
// sidecars, each init container plus the sidecars started before it) + overhead, with
// effective_requests() defaulting. Pod-level `spec.resources` (alpha) is not considered.
Quantity pod_request(const PodSpec& spec, std::string_view resource);
// The same for every resource named anywhere in the pod.
std::map<std::string, Quantity, std::less<>> pod_requests(const PodSpec& spec);

struct ContainerState {
  std::string_view state;  // waiting | running | terminated | "" (none)
  std::string_view reason;
  std::string_view message;
  std::optional<int64_t> exit_code;
  int line = 0;
};

struct ContainerStatus {
  std::string_view name;
  bool ready = false;
  int64_t restart_count = 0;
  std::string_view image;
  ContainerState state;
  ContainerState last_state;
  int line = 0;
};

struct PodStatus {
  Text phase;
  Text reason;
  Text message;
  std::vector<Condition> conditions;
  std::vector<ContainerStatus> container_statuses;
  std::vector<ContainerStatus> init_container_statuses;
  Text nominated_node_name;
  Text start_time;
  int line = 0;
};

struct Pod {
  PodSpec spec;
  PodStatus status;
  std::vector<Issue> issues;
};

struct PodTemplate {
  ObjectMeta metadata;  // labels/annotations of the template
  PodSpec spec;
  int line = 0;  // of `template:`
};

std::optional<Pod> as_pod(const Document& doc);

// -----------------------------------------------------------------------------------------------
// Workloads

// Deployment, StatefulSet, DaemonSet, ReplicaSet.
struct Workload {
  Int replicas;
  LabelSelector selector;
  Text strategy_type;  // strategy.type (Deployment) / updateStrategy.type (StatefulSet, DaemonSet)
  PodTemplate pod_template;
  std::vector<Issue> issues;
};

std::optional<Workload> as_workload(const Document& doc);

struct JobStatus {
  Int active;
  Int succeeded;
  Int failed;
  std::vector<Condition> conditions;
  Text start_time;
  Text completion_time;
};

struct Job {
  Int parallelism;
  Int completions;
  Int backoff_limit;
  Int active_deadline_seconds;
  Int ttl_seconds_after_finished;
  Text completion_mode;
  Bool suspend;
  LabelSelector selector;
  PodTemplate pod_template;
  JobStatus status;
  std::vector<Issue> issues;
};

std::optional<Job> as_job(const Document& doc);

struct CronJob {
  Text schedule;
  Text concurrency_policy;
  Bool suspend;
  Int starting_deadline_seconds;
  Job job_template;  // spec.jobTemplate.spec; its issues are the CronJob's
  int job_template_line = 0;
  std::vector<Issue> issues;
};

std::optional<CronJob> as_cron_job(const Document& doc);

// -----------------------------------------------------------------------------------------------
// Nodes and events

struct NodeSystemInfo {
  std::string_view kernel_version;
  std::string_view container_runtime_version;
  std::string_view kubelet_version;
  std::string_view os_image;
  std::string_view architecture;
  std::string_view operating_system;
};

// A Node object (kind: Node); labels are in the Document's metadata.
struct KubeNode {
  std::vector<Taint> taints;
  Bool unschedulable;
  QuantityMap capacity;
  QuantityMap allocatable;
  std::vector<Condition> conditions;
  NodeSystemInfo node_info;
  std::vector<Issue> issues;
};

std::optional<KubeNode> as_node(const Document& doc);

struct ObjectReference {
  std::string_view api_version;
  std::string_view kind;
  std::string_view name;
  std::string_view namespace_;
  std::string_view uid;
  std::string_view field_path;
};

// core/v1 Event, or events.k8s.io/v1 Event mapped onto the same fields (regarding -> involved_object,
// note -> message, series.count or deprecatedCount -> count, reportingController -> source_component).
struct Event {
  ObjectReference involved_object;
  std::string_view reason;
  std::string_view message;
  std::string_view type;  // Normal | Warning
  int64_t count = 0;
  std::string_view first_timestamp;
  std::string_view last_timestamp;
  std::string_view event_time;
  std::string_view source_component;
  std::string_view source_host;
};

std::optional<Event> as_event(const Document& doc);

// -----------------------------------------------------------------------------------------------
// Policy, quota, configuration and services

struct ResourceQuota {
  QuantityMap hard;         // spec.hard
  QuantityMap status_hard;  // status.hard
  QuantityMap status_used;  // status.used
  std::vector<std::string_view> scopes;
  std::vector<Issue> issues;
};

std::optional<ResourceQuota> as_resource_quota(const Document& doc);

struct PriorityClass {
  Int value;
  Bool global_default;
  Text preemption_policy;  // PreemptLowerPriority | Never
};

std::optional<PriorityClass> as_priority_class(const Document& doc);

struct PodDisruptionBudget {
  Field<IntOrString> min_available;
  Field<IntOrString> max_unavailable;
  LabelSelector selector;
  Text unhealthy_pod_eviction_policy;
  Int disruptions_allowed;  // status
  Int current_healthy;
  Int desired_healthy;
  Int expected_pods;
};

std::optional<PodDisruptionBudget> as_pod_disruption_budget(const Document& doc);

struct ConfigMap {
  TextMap data;
  std::vector<std::string_view> binary_data_keys;
};

std::optional<ConfigMap> as_config_map(const Document& doc);

struct Namespace {
  Text phase;
};

std::optional<Namespace> as_namespace(const Document& doc);

struct ServicePort {
  std::string_view name;
  int64_t port = 0;
  IntOrString target_port;
  std::string_view protocol;
  int line = 0;
};

struct Service {
  Text type;  // ClusterIP (default) | NodePort | LoadBalancer | ExternalName
  StringMap selector;
  int selector_line = 0;
  std::vector<ServicePort> ports;
  Text cluster_ip;
};

std::optional<Service> as_service(const Document& doc);

struct PersistentVolumeClaim {
  Text storage_class_name;
  std::vector<Text> access_modes;
  Field<Quantity> storage;  // spec.resources.requests.storage
  Text volume_name;
  Text volume_mode;
  Text phase;  // status
  std::vector<Issue> issues;
};

std::optional<PersistentVolumeClaim> as_persistent_volume_claim(const Document& doc);

struct CrossVersionObjectReference {
  std::string_view api_version;
  std::string_view kind;
  std::string_view name;
};

struct MetricSpec {
  std::string_view type;         // Resource | ContainerResource | Pods | Object | External
  std::string_view name;         // resource name or metric name
  std::string_view target_type;  // Utilization | Value | AverageValue
  int line = 0;
};

// autoscaling/v2 (v1's targetCPUUtilizationPercentage appears as a Resource "cpu" metric).
struct HorizontalPodAutoscaler {
  CrossVersionObjectReference scale_target_ref;
  Int min_replicas;
  Int max_replicas;
  std::vector<MetricSpec> metrics;
};

std::optional<HorizontalPodAutoscaler> as_horizontal_pod_autoscaler(const Document& doc);

struct PrometheusRuleEntry {
  Text alert;
  Text record;
  Text expr;
  Text for_;
  StringMap labels;
  StringMap annotations;
  int line = 0;
};

struct PrometheusRuleGroup {
  std::string_view name;
  Text interval;
  std::vector<PrometheusRuleEntry> rules;
  int line = 0;
};

// monitoring.coreos.com/v1 PrometheusRule.
struct PrometheusRule {
  std::vector<PrometheusRuleGroup> groups;
};

std::optional<PrometheusRule> as_prometheus_rule(const Document& doc);

// -----------------------------------------------------------------------------------------------
// Dynamic resource allocation (resource.k8s.io v1, v1beta2, v1beta1; the Document keeps apiVersion)

struct CelSelector {
  Text expression;  // selectors[].cel.expression
  int line = 0;
};

struct DeviceSubRequest {
  std::string_view name;
  Text device_class_name;
  std::vector<CelSelector> selectors;
  Text allocation_mode;  // ExactCount (default) | All
  Int count;
  std::vector<Toleration> tolerations;  // of device taints (v1 tolerations[])
  int line = 0;
};

struct DeviceRequest {
  std::string_view name;
  // v1/v1beta2 `exactly:`, or v1beta1's fields at the request level (`exactly` is false then).
  bool exactly = false;
  DeviceSubRequest request;  // name is the request's
  Bool admin_access;
  std::vector<DeviceSubRequest> first_available;
  int line = 0;
};

struct DeviceConstraint {
  std::vector<std::string_view> requests;
  Text match_attribute;
  int line = 0;
};

struct ResourceClaimSpec {
  std::vector<DeviceRequest> requests;
  std::vector<DeviceConstraint> constraints;
  const Value* config = nullptr;  // raw devices.config
  int line = 0;
};

struct ResourceClaim {
  ResourceClaimSpec spec;
  bool allocated = false;  // status.allocation present
  const Value* allocation = nullptr;
  std::vector<std::string_view> reserved_for;  // status.reservedFor[].name
};

// kind ResourceClaim; for ResourceClaimTemplate the claim spec is at spec.spec and the template's
// metadata at spec.metadata.
std::optional<ResourceClaim> as_resource_claim(const Document& doc);

struct ResourceClaimTemplate {
  ObjectMeta claim_metadata;
  ResourceClaimSpec spec;
};

std::optional<ResourceClaimTemplate> as_resource_claim_template(const Document& doc);

struct DeviceClass {
  std::vector<CelSelector> selectors;
  Text extended_resource_name;
  const Value* config = nullptr;
};

std::optional<DeviceClass> as_device_class(const Document& doc);

struct DeviceAttribute {
  std::string_view type;  // int | bool | string | version
  const Value* value = nullptr;
  int line = 0;
};

// KEP-4815 partitionable devices: a named set of counters (spec.sharedCounters[]), or what a
// device consumes of one (spec.devices[].consumesCounters[]); counters.<name>.value.
struct CounterSet {
  std::string_view name;  // the set's name, or for a consumption the set it consumes from (counterSet)
  QuantityMap counters;
  int line = 0;
};

struct Device {
  std::string_view name;
  std::map<std::string_view, DeviceAttribute, std::less<>> attributes;
  QuantityMap capacity;  // capacity.<name>.value (v1beta1+), or the plain quantity (v1alpha3)
  std::vector<Taint> taints;  // DeviceTaints (effect NoSchedule | NoExecute | None)
  std::vector<CounterSet> consumes_counters;
  int line = 0;
};

struct ResourceSlice {
  Text driver;
  Text node_name;
  Bool all_nodes;
  Text pool_name;
  Int pool_generation;
  Int pool_resource_slice_count;
  std::vector<Device> devices;  // v1beta1's devices[].basic is flattened
  std::vector<CounterSet> shared_counters;
  std::vector<Issue> issues;
};

std::optional<ResourceSlice> as_resource_slice(const Document& doc);

// The invalid_quantity issues of `doc`'s view (Pod, workloads, Job, CronJob, Node, ResourceQuota,
// PersistentVolumeClaim, ResourceSlice; none for other kinds), in source order.
std::vector<Issue> quantity_issues(const Document& doc);

}  // namespace kgpu::k8s
