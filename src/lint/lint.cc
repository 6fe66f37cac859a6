// lint(): every document through its kind's checks, findings sorted; input_errors().
#include <tuple>

#include "lint/checks.h"

namespace kgpu::lint {

namespace {

void lint_document(const k8s::Document& doc, const std::set<std::string_view>& disabled, const Options& options,
                   const std::vector<TargetKey>& inference, const std::vector<TargetKey>& scaled,
                   std::vector<Finding>* out) {
  Emitter e(doc, disabled, out);
  if (auto pod = k8s::as_pod(doc)) {
    check_pod(e, pod_context(doc, pod->spec), options);
  } else if (auto w = k8s::as_workload(doc)) {
    check_pod(e, pod_context(doc, w->pod_template.spec), options);
    check_deployment(e, *w, scaled);
  } else if (auto job = k8s::as_job(doc)) {
    check_pod(e, pod_context(doc, job->pod_template.spec), options);
    check_job(e, *job, spec_key_line(doc), "Job");
  } else if (auto cron = k8s::as_cron_job(doc)) {
    check_pod(e, pod_context(doc, cron->job_template.pod_template.spec), options);
    const int line = key_line(doc.root->at({"spec", "jobTemplate"}), "spec");
    check_job(e, cron->job_template, line > 0 ? line : cron->job_template_line, "CronJob job template");
  } else if (auto cm = k8s::as_config_map(doc)) {
    check_time_slicing(e, *cm);
  } else if (auto pr = k8s::as_prometheus_rule(doc)) {
    check_alerts(e, *pr);
  } else if (auto hpa = k8s::as_horizontal_pod_autoscaler(doc)) {
    check_hpa(e, *hpa, inference);
  } else if (doc.kind == "ResourceQuota") {
    check_quota(e);
  } else {
    check_dra(e);
  }
}

}  // namespace

std::vector<k8s::LoadError> input_errors(std::span<const k8s::Document> docs) {
  std::vector<k8s::LoadError> out;
  for (const k8s::Document& doc : docs) {
    for (k8s::Issue& issue : k8s::quantity_issues(doc)) {
      const std::string object = doc.metadata.namespace_.empty()
                                     ? fmt::format("{} {}", doc.kind, doc.metadata.name)
                                     : fmt::format("{} {}/{}", doc.kind, doc.metadata.namespace_, doc.metadata.name);
      out.push_back(k8s::LoadError{std::string(doc.source), issue.line > 0 ? issue.line : doc.line,
                                   fmt::format("{}: {}", object, issue.message)});
    }
  }
  return out;
}

std::vector<Finding> lint(std::span<const k8s::Document> docs, const Options& options) {
  std::set<std::string_view> disabled;
  for (const std::string& d : options.disabled) {
    if (const RuleInfo* r = find_rule(d)) disabled.insert(r->id);
  }
  const std::vector<TargetKey> inference = inference_targets(docs);
  const std::vector<TargetKey> scaled = multi_replica_targets(docs);
  std::vector<Finding> out;
  for (const k8s::Document& doc : docs) lint_document(doc, disabled, options, inference, scaled, &out);
  std::sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.file, a.line, a.rule->id, a.message) < std::tie(b.file, b.line, b.rule->id, b.message);
  });
  return out;
}

}  // namespace kgpu::lint
