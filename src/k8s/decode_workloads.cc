// Views of workloads and what manages them: Deployment/StatefulSet/DaemonSet/ReplicaSet, Job,
// CronJob, PodDisruptionBudget, HorizontalPodAutoscaler (k8s/objects.h).
#include "k8s/decode.h"

namespace kgpu::k8s {

using namespace detail;  // NOLINT: the shared decoder (k8s/decode.h)

namespace {

Job decode_job(Decoder& d, const Value* root, std::string_view path) {
  Job j;
  const Value* spec = d.map(root, "spec", path);
  const std::string p = fmt::format("{}.spec", path);
  j.parallelism = d.integer(spec, "parallelism", p);
  j.completions = d.integer(spec, "completions", p);
  j.backoff_limit = d.integer(spec, "backoffLimit", p);
  j.active_deadline_seconds = d.integer(spec, "activeDeadlineSeconds", p);
  j.ttl_seconds_after_finished = d.integer(spec, "ttlSecondsAfterFinished", p);
  j.completion_mode = d.text(spec, "completionMode", p);
  j.suspend = d.boolean(spec, "suspend", p);
  j.selector = decode_label_selector(d, spec, "selector", p);
  j.pod_template = decode_template(d, spec, p);
  if (const Value* status = d.map(root, "status", path)) {
    const std::string sp = fmt::format("{}.status", path);
    j.status.active = d.integer(status, "active", sp);
    j.status.succeeded = d.integer(status, "succeeded", sp);
    j.status.failed = d.integer(status, "failed", sp);
    j.status.conditions = decode_conditions(d, status, sp);
    j.status.start_time = d.text(status, "startTime", sp);
    j.status.completion_time = d.text(status, "completionTime", sp);
  }
  return j;
}

}  // namespace

std::optional<Workload> as_workload(const Document& doc) {
  const bool deployment = is_kind(doc, "Deployment");
  if (!deployment && !is_kind(doc, "StatefulSet") && !is_kind(doc, "DaemonSet") && !is_kind(doc, "ReplicaSet")) {
    return std::nullopt;
  }
  Workload w;
  Decoder d(&w.issues);
  const Value* spec = d.map(doc.root, "spec", "");
  w.replicas = d.integer(spec, "replicas", ".spec");
  w.selector = decode_label_selector(d, spec, "selector", ".spec");
  const char* strategy = deployment ? "strategy" : "updateStrategy";
  if (const Value* s = d.map(spec, strategy, ".spec"))
    w.strategy_type = d.text(s, "type", fmt::format(".spec.{}", strategy));
  w.pod_template = decode_template(d, spec, ".spec");
  return w;
}

std::optional<Job> as_job(const Document& doc) {
  if (!is_kind(doc, "Job")) return std::nullopt;
  std::vector<Issue> issues;
  Decoder d(&issues);
  Job j = decode_job(d, doc.root, "");
  j.issues = std::move(issues);
  return j;
}

std::optional<CronJob> as_cron_job(const Document& doc) {
  if (!is_kind(doc, "CronJob")) return std::nullopt;
  CronJob c;
  Decoder d(&c.issues);
  const Value* spec = d.map(doc.root, "spec", "");
  c.schedule = d.text(spec, "schedule", ".spec");
  c.concurrency_policy = d.text(spec, "concurrencyPolicy", ".spec");
  c.suspend = d.boolean(spec, "suspend", ".spec");
  c.starting_deadline_seconds = d.integer(spec, "startingDeadlineSeconds", ".spec");
  if (const Entry* jt = Decoder::entry(spec, "jobTemplate")) {
    c.job_template_line = jt->key_line();
    c.job_template = decode_job(d, &jt->value(), ".spec.jobTemplate");
  }
  return c;
}

std::optional<PodDisruptionBudget> as_pod_disruption_budget(const Document& doc) {
  if (!is_kind(doc, "PodDisruptionBudget")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  PodDisruptionBudget p;
  const Value* spec = d.map(doc.root, "spec", "");
  p.min_available = d.int_or_string(spec, "minAvailable", ".spec");
  p.max_unavailable = d.int_or_string(spec, "maxUnavailable", ".spec");
  p.selector = decode_label_selector(d, spec, "selector", ".spec");
  p.unhealthy_pod_eviction_policy = d.text(spec, "unhealthyPodEvictionPolicy", ".spec");
  const Value* status = d.map(doc.root, "status", "");
  p.disruptions_allowed = d.integer(status, "disruptionsAllowed", ".status");
  p.current_healthy = d.integer(status, "currentHealthy", ".status");
  p.desired_healthy = d.integer(status, "desiredHealthy", ".status");
  p.expected_pods = d.integer(status, "expectedPods", ".status");
  return p;
}

std::optional<HorizontalPodAutoscaler> as_horizontal_pod_autoscaler(const Document& doc) {
  if (!is_kind(doc, "HorizontalPodAutoscaler")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  HorizontalPodAutoscaler h;
  const Value* spec = d.map(doc.root, "spec", "");
  const Value* ref = Decoder::child(spec, "scaleTargetRef");
  h.scale_target_ref = {Decoder::str(ref, "apiVersion"), Decoder::str(ref, "kind"), Decoder::str(ref, "name")};
  h.min_replicas = d.integer(spec, "minReplicas", ".spec");
  h.max_replicas = d.integer(spec, "maxReplicas", ".spec");
  for (const Value& m : d.seq(spec, "metrics", ".spec")) {
    MetricSpec ms;
    ms.type = Decoder::str(&m, "type");
    ms.line = m.line();
    // The source's key is the type with a lower-case first letter: resource, containerResource, pods, object, external.
    for (const char* key : {"resource", "containerResource", "pods", "object", "external"}) {
      const Value* src = Decoder::child(&m, key);
      if (src == nullptr) continue;
      ms.name = Decoder::str(src, "name");
      if (ms.name.empty()) ms.name = Decoder::str(Decoder::child(src, "metric"), "name");
      ms.target_type = Decoder::str(Decoder::child(src, "target"), "type");
      break;
    }
    h.metrics.push_back(ms);
  }
  if (const Entry* cpu = Decoder::entry(spec, "targetCPUUtilizationPercentage")) {
    h.metrics.push_back(MetricSpec{"Resource", "cpu", "Utilization", cpu->key_line()});
  }
  return h;
}

}  // namespace kgpu::k8s
