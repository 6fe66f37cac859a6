// Spec layer: what the API server rejects when a workload creates its pods (validation of GPU
// requests, quota), and snapshot values no API server would accept (input errors).
#include <fmt/format.h>

#include <set>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

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

}  // namespace kgpu::doctor::detail
