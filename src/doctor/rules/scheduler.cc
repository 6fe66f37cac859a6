// Scheduler layer: why a Pending GPU pod does not fit (recomputed with the scheduler's filters over
// the snapshot), who holds the GPUs, and pods bound by hand that the kubelet rejected (OutOf<resource>).
#include <fmt/format.h>

#include <algorithm>

#include "doctor/diagnoser.h"
#include "k8s/gpu_resources.h"
#include "framework/k8s_adapter.h"

namespace kgpu::doctor::detail {

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

// A pod bound by hand (spec.nodeName) skips the scheduler; the kubelet's admission then rejects it
// with reason OutOf<resource> when the node's GPUs (or CPU, memory) are taken.
std::optional<Finding> Diagnoser::admission_out_of(const PodObj& p, const GpuRequest& req) {
  const sv node_name = *p.v.spec.node_name;
  const sv resource = sv(*p.v.status.reason).substr(5);
  Finding f;
  set_rule(f, RuleId::kAdmissionOutOfResource);
  f.object = pod_ref(p);
  f.summary = fmt::format(
      "the kubelet on {} rejected the pod (OutOf{}): it names its node in spec.nodeName, which skips the "
      "scheduler, and the node had no free {}",
      node_name, resource, resource);
  f.evidence.push_back(Evidence{
      fmt::format("{} .status (reason {}) at {}", pod_ref(p), *p.v.status.reason, p.doc->where(p.v.status.reason.line)),
      std::string(*p.v.status.message)});
  if (const NodeObj* node = s_.node(node_name); node != nullptr && k8s::is_gpu_device_resource(resource)) {
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
  f.object = pod_ref(p);
  const auto owner = top_owner(s_, p);
  if (!req.quantity.is_integer() || req.quantity.is_negative()) {
    set_rule(f, RuleId::kGpuRequestFractional);
    f.summary = fmt::format("the pod requests {} {}: extended resources must be whole numbers",
                            req.quantity.to_string(), req.resource);
    return f;
  }
  const sched::Cluster& cluster = s_.cluster(req.resource);
  const sched::Pod spod = sched::pod_from_k8s(*p.doc, p.v, req.resource);
  const sched::FitReport fit = sched::explain_fit(spod, cluster);
  using sched::FitCode;
  const auto code = [&](size_t i) { return fit.status[i].code; };
  if (fit.outcome.feasible > 0) return std::nullopt;  // fits now: the scheduler's next attempt places it
  f.details.push_back(fmt::format("kgpu's scheduler filters over the snapshot: {}", fit.outcome.message()));
  add_scheduling_evidence(p, f);

  const size_t n = cluster.nodes().size();
  std::vector<size_t> past_selector, past_taint;
  for (size_t i = 0; i < n; ++i) {
    if (code(i) == FitCode::kNodeAffinity) continue;
    past_selector.push_back(i);
    if (code(i) != FitCode::kUntoleratedTaint && code(i) != FitCode::kUnschedulable) past_taint.push_back(i);
  }
  const auto has_gpu = [&](size_t i) { return cluster.node(i).gpus() > 0; };

  if (past_selector.empty()) {
    set_rule(f, RuleId::kSelectorNoMatch);
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
  // The taint the TaintToleration filter rejected node i on (the scheduler model keeps the
  // node's taints in order, so its index is the snapshot's), or nullptr.
  const auto untolerated = [&](size_t i) -> const k8s::Taint* {
    const sched::FitStatus& st = fit.status[i];
    const auto& taints = s_.nodes[i].v.taints;
    if (st.code != FitCode::kUntoleratedTaint || st.taint < 0 || static_cast<size_t>(st.taint) >= taints.size())
      return nullptr;
    return &taints[static_cast<size_t>(st.taint)];
  };
  const auto node_state = [&](size_t i) -> const k8s::Taint* {
    const k8s::Taint* t = untolerated(i);
    return t != nullptr && t->key.starts_with("node.kubernetes.io/") ? t : nullptr;
  };
  if (std::none_of(past_taint.begin(), past_taint.end(), has_gpu)) {
    std::vector<size_t> unavailable;
    for (size_t i : past_selector) {
      if (has_gpu(i) && (code(i) == FitCode::kUnschedulable || node_state(i) != nullptr)) unavailable.push_back(i);
    }
    if (!unavailable.empty()) {
      set_rule(f, RuleId::kGpuNodeUnavailable);
      f.summary = "the GPU nodes the pod may use are cordoned or not ready: they take no new pods";
      for (size_t i : unavailable) {
        const NodeObj& node = s_.nodes[i];
        const sv name = node.name();
        if (code(i) == FitCode::kUnschedulable) {
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
    set_rule(f, RuleId::kGpuTaintNotTolerated);
    f.summary = "every node with a free-able GPU that matches the selector has a taint the pod does not tolerate";
    std::string key, value, effect;
    for (size_t i : past_selector) {
      const k8s::Taint* t = has_gpu(i) ? untolerated(i) : nullptr;
      if (t == nullptr) continue;
      const NodeObj& node = s_.nodes[i];
      if (key.empty()) key = t->key, value = t->value, effect = t->effect;
      f.evidence.push_back(Evidence{fmt::format("node/{} .spec.taints at {}", node.name(), node.doc->where(t->line)),
                                    fmt::format("{}={}:{}", t->key, t->value, t->effect)});
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
        if (k8s::is_gpu_device_resource(name) && name != req.resource && q->value() > 0) {
          other[std::string(name)].emplace_back(s_.nodes[i].name());
        }
      }
    }
    if (!other.empty()) {
      set_rule(f, RuleId::kGpuResourceNameMismatch);
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
    set_rule(f, RuleId::kGpuNotAdvertised);
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
    const sched::FitStatus& st = fit.status[i];
    if (st.code == FitCode::kInsufficient && (sv(st.resource) == "cpu" || sv(st.resource) == "memory") &&
        cluster.node(i).full_free_gpus() >= spod.num_gpu) {
      blocked.push_back(i);
    }
  }
  if (!blocked.empty()) {
    candidates = blocked;
    set_rule(f, RuleId::kGpuNodeCpuMemoryFull);
    f.summary = "the GPU nodes have free GPUs but not enough free CPU or memory for the pod: non-GPU pods fill them";
    for (size_t i : candidates) {
      const NodeObj& node = s_.nodes[i];
      int cpu_pods = 0;
      for (size_t k : s_.pods_on(node.name())) {
        const auto& q = s_.pods[k];
        if (sched::holds_node_resources(q.v) && !gpu_request(q.v.spec) && component(q).empty()) ++cpu_pods;
      }
      f.details.push_back(fmt::format("{}: {} ({} non-GPU pods on it; GPU node taint: {})", node.name(),
                                      fit.status[i].message(cluster.node(i)), cpu_pods,
                                      node.v.taints.empty() ? "none" : "present"));
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
    set_rule(f, RuleId::kRollingUpdateSecondGpu);
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
  set_rule(f, RuleId::kInsufficientGpu);
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
      f.fix.push_back(fmt::format("kubectl scale {} -n {} {} --replicas=0", ascii_lower(ho.first), h.pod->ns(), ho.second));
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
      const std::string lname = ascii_lower(q.name()) + " " + ascii_lower(label(q.doc, "app")) + " " +
                                ascii_lower(q.v.spec.containers.empty() ? "" : q.v.spec.containers[0].image.value);
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

}  // namespace kgpu::doctor::detail
