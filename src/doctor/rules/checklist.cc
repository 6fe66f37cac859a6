// The guide's production-readiness checklist, per cluster and per team namespace.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

#include "doctor/diagnoser.h"
#include "lint/lint.h"
#include "lint/rules.h"

namespace kgpu::doctor::detail {

void Diagnoser::checklist() {
  const bool cluster_scope = o_.target.kind == Target::Kind::kCluster;
  const auto checklist_finding = [&](RuleId rule, std::string object, std::string summary) -> Finding& {
    Finding f = make_finding(rule, std::move(object));
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
    return fmt::format("{}/{}/{}", ascii_lower(d->kind), d->metadata.namespace_, d->metadata.name);
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
      auto& f = checklist_finding(RuleId::kChecklistGpuNodesTainted, "cluster",
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
          checklist_finding(RuleId::kChecklistPriorityClasses, "cluster",
                            "no PriorityClass besides the system ones: production inference cannot preempt dev work");
      f.fix.push_back(
          "kubectl create priorityclass gpu-production --value=100000 --description='production GPU inference'");
      f.fix.push_back("kubectl create priorityclass gpu-dev --value=1000 --description='dev and batch GPU work'");
    }
    // Metrics scraped.
    bool scraped = false;
    for (const auto* m : s_.monitors) {
      const std::string txt = ascii_lower(m->metadata.name) + " " + ascii_lower(m->metadata.namespace_);
      if (contains_any(txt, {"dcgm", "kgpu", "gpu"})) scraped = true;
      if (const k8s::Value* sel = m->root->at({"spec", "selector", "matchLabels"})) {
        for (const auto& e : sel->entries()) {
          if (contains_any(ascii_lower(e.value().text()), {"dcgm", "kgpu"})) scraped = true;
        }
      }
    }
    for (const auto& svc : s_.services) {
      auto it = svc.doc->metadata.annotations.find("prometheus.io/scrape");
      if (it != svc.doc->metadata.annotations.end() && it->second == "true" &&
          contains_any(ascii_lower(svc.name()), {"dcgm", "kgpu"})) {
        scraped = true;
      }
    }
    if (!scraped && !gpu_nodes.empty()) {
      auto& f = checklist_finding(RuleId::kChecklistGpuMetricsScraped, "cluster",
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
      auto& f = checklist_finding(RuleId::kChecklistGpuAlerts, "cluster",
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
          checklist_finding(RuleId::kChecklistOneDriverOwner, fmt::format("node/{}", n->name()),
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
        auto& f = checklist_finding(RuleId::kChecklistCudaValidator, fmt::format("node/{}", n->name()),
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
      auto& f = checklist_finding(RuleId::kChecklistGpuQuota, fmt::format("namespace/{}", ns),
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
            RuleId::kChecklistWorkloadsTolerate, o,
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
      const bool tagged = last.find(':') != sv::npos;
      if (lint::image_pinned(image)) continue;  // lint's GPU014: the same answer on the same manifest
      auto& f =
          checklist_finding(RuleId::kChecklistImagePinned, o,
                            fmt::format("container {} runs image {} without a pinned version: a new release changes "
                                        "the server on the next restart",
                                        c.name, image));
      f.evidence.push_back(Evidence{fmt::format("{} image at {}", o, w.doc->where(c.image.line)), std::string(image)});
      f.fix.push_back(fmt::format("kubectl set image {}/{} -n {} {}={}:<version>", ascii_lower(w.doc->kind),
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
          checklist_finding(RuleId::kChecklistPdbInference, o,
                            "no PodDisruptionBudget covers this GPU Deployment: driver upgrades and drains can take "
                            "every replica down at once");
      f.fix.push_back(
          fmt::format("kubectl create pdb {} -n {} --selector={} --max-unavailable=1", w.doc->metadata.name, ns, [&] {
            std::vector<std::string> kv;
            for (const auto& [k, v] : w.workload->selector.match_labels) kv.push_back(fmt::format("{}={}", k, v));
            return fmt::format("{}", fmt::join(kv, ","));
          }()));
    }
    // lint's GPU010: an inference server's startup probe must cover model loading.
    const int min_budget_s = lint::Options{}.min_startup_budget_s;
    for (const auto& c : spec.containers) {
      if (!lint::is_inference_server(c) || lint::startup_probe_sufficient(c, min_budget_s)) continue;
      auto& f = checklist_finding(
          RuleId::kChecklistStartupProbe, o,
          c.startup_probe ? fmt::format("GPU container {} has a startupProbe of {} s, under the {} s a model takes to "
                                        "load: the kubelet may kill it while the model is still loading",
                                        c.name, lint::startup_budget_s(*c.startup_probe), min_budget_s)
                          : fmt::format("GPU container {} has no startupProbe: the kubelet may kill it while the "
                                        "model is still loading",
                                        c.name));
      f.fix.push_back(
          "add a startupProbe on the health endpoint with periodSeconds: 10, failureThreshold: 60 (10 minutes)");
    }
    for (const auto& h : s_.hpas) {
      if (h.ns() != ns || h.v.scale_target_ref.name != w.doc->metadata.name) continue;
      // lint's GPU015: an inference server's HPA on CPU or memory (or the default CPU metric).
      if (lint::has_inference_server(spec) && lint::scales_on_cpu_or_memory(h.v)) {
        auto& f = checklist_finding(RuleId::kChecklistAutoscaleQueueDepth,
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

}  // namespace kgpu::doctor::detail
