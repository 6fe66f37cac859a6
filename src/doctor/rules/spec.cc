// Spec layer: what the API server rejects when a workload creates its pods (validation of GPU
// requests, quota), and snapshot values no API server would accept (input errors).
#include <fmt/format.h>

#include <cctype>
#include <set>

#include "doctor/diagnoser.h"
#include "k8s/gpu_resources.h"

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
    set_rule(f, RuleId::kInvalidQuantity);
    f.object = d.metadata.namespace_.empty() ? fmt::format("{}/{}", ascii_lower(d.kind), d.metadata.name)
                                              : fmt::format("{}/{}/{}", ascii_lower(d.kind), d.metadata.namespace_,
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
                        ? fmt::format("kubectl get {} {} -o json", ascii_lower(d.kind), d.metadata.name)
                        : fmt::format("kubectl get {} -n {} {} -o json", ascii_lower(d.kind), d.metadata.namespace_,
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

namespace {

// The first GPU resource a message names ("requests[nvidia.com/gpu]", "nvidia.com/gpu limit",
// "requests.nvidia.com/gpu=2"), or "".
std::string gpu_resource_in(sv msg) {
  for (size_t pos = msg.find("nvidia.com/"); pos != sv::npos; pos = msg.find("nvidia.com/", pos + 1)) {
    size_t end = pos;
    while (end < msg.size() && (std::isalnum(static_cast<unsigned char>(msg[end])) || msg[end] == '.' ||
                                msg[end] == '/' || msg[end] == '-' || msg[end] == '_')) {
      ++end;
    }
    sv name = msg.substr(pos, end - pos);
    while (name.ends_with('.')) name.remove_suffix(1);
    if (k8s::is_gpu_device_resource(name)) return std::string(name);
  }
  return {};
}

// The spec rule a FailedCreate message supports, with the GPU resource it names: the API server's
// validation ("Pod \"x\" is invalid: ..."), ResourceQuota and LimitRanger admission ("pods \"x\" is
// forbidden: ..."). Validation wordings of k8s.io/kubernetes pkg/apis/core/validation (both the
// current "limit of N" and the older form without it).
std::optional<std::pair<RuleId, std::string>> classify_failed_create(sv msg) {
  std::string res = gpu_resource_in(msg);
  if (contains(msg, "exceeded quota")) return std::pair{RuleId::kQuotaExhausted, res};
  if (contains(msg, "Limit must be set for non overcommitable resources")) {
    return std::pair{RuleId::kGpuLimitMissing, res};
  }
  if (res.empty()) return std::nullopt;
  if (contains(msg, "must be equal to " + res + " limit") ||
      contains(msg, "must be less than or equal to " + res + " limit")) {
    return std::pair{RuleId::kGpuRequestLimitMismatch, res};
  }
  if (contains(msg, "must be an integer") || contains(msg, "must be greater than or equal to 0")) {
    return std::pair{RuleId::kGpuRequestFractional, res};
  }
  if (contains(msg, res + " usage per ") || contains(msg, res + " limit to request ratio per ")) {
    return std::pair{RuleId::kLimitrangeExceeded, res};
  }
  return std::nullopt;
}

// A ReplicaSet's name is its Deployment's name, "-" and the pod-template hash (digits and the
// consonants Kubernetes' SafeEncodeString uses).
bool looks_like_template_hash(sv s) {
  return s.size() >= 5 && s.size() <= 10 && s.find_first_not_of("bcdfghjklmnpqrstvwxz0123456789") == sv::npos;
}

}  // namespace

void Diagnoser::spec_findings() {
  // Workload templates whose GPU requests the API server rejects; then the FailedCreate events of
  // workloads (validation, quota, LimitRange), diagnosed from the event and whatever of its owner
  // chain is in the snapshot (often none: `kubectl get events`).
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
  const auto obj_of = [](sv kind, sv ns, sv name) { return fmt::format("{}/{}/{}", ascii_lower(kind), ns, name); };
  // Events land on the ReplicaSets (<deployment>-<hash>), the Jobs of a CronJob or the object
  // itself: resolved through ownerReferences (by name minus the last "-suffix" only when the
  // ReplicaSet or Job has none in the snapshot), never by a name prefix ("vllm" is not "vllm-small").
  const auto events_of = [&](const k8s::Document* doc) {
    std::vector<const Obj<k8s::Event>*> evs;
    for (const auto& e : s_.events) {
      const auto& io = e.v.involved_object;
      if (io.namespace_ != doc->metadata.namespace_ || e.v.reason != "FailedCreate") continue;
      const auto [okind, oname] = creator_of(io.kind, io.namespace_, io.name);
      const bool mine = (io.kind == doc->kind && io.name == doc->metadata.name) ||
                        (okind == doc->kind && oname == doc->metadata.name);
      if (mine) evs.push_back(&e);
    }
    return evs;
  };
  std::set<std::string> reported;  // workloads with a spec finding: one cause per workload
  for (const auto& t : tpls) {
    if (!in_scope_ns(t.doc->metadata.namespace_) || s_.has_invalid_fields(t.doc)) continue;
    const std::string obj = obj_of(t.doc->kind, t.doc->metadata.namespace_, t.doc->metadata.name);
    const auto evs = events_of(t.doc);
    for (const auto& c : t.tpl->spec.containers) {
      for (const auto& [name, q] : c.resources.requests) {
        if (!k8s::is_gpu_device_resource(name) || c.resources.limits.contains(name)) continue;
        Finding f = make_finding(RuleId::kGpuLimitMissing, obj);
        f.summary = fmt::format(
            "container {} requests {} {} without a limit: extended resources are set in limits (the request "
            "defaults to the limit); the API server rejects a request alone",
            c.name, q->to_string(), name);
        f.evidence.push_back(Evidence{fmt::format("{} requests at {}", obj, t.doc->where(q.line)),
                                      fmt::format("{}: {}", name, q->to_string())});
        for (const auto* e : evs) {
          if (contains(e->v.message, "Limit must be set")) {
            f.evidence.push_back(event_evidence(*e));
            break;
          }
        }
        f.fix.push_back(fmt::format("move {} from resources.requests to resources.limits in {}", name, obj));
        add(std::move(f));
        reported.insert(obj);
      }
      for (const auto& [name, q] : c.resources.limits) {
        if (!k8s::is_gpu_device_resource(name)) continue;
        Finding f;
        f.object = obj;
        const auto req = c.resources.requests.find(name);
        if (!q->is_integer() || (req != c.resources.requests.end() && !req->second->is_integer())) {
          set_rule(f, RuleId::kGpuRequestFractional);
          f.summary = fmt::format(
              "container {} asks for {} {}: GPUs are whole units; fractions come from MIG slices "
              "or time-slicing replicas",
              c.name, q->to_string(), name);
          f.evidence.push_back(Evidence{fmt::format("{} limits at {}", obj, t.doc->where(q.line)),
                                        fmt::format("{}: {}", name, q->to_string())});
        } else if (req != c.resources.requests.end() && req->second.value != q.value) {
          set_rule(f, RuleId::kGpuRequestLimitMismatch);
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
        reported.insert(obj);
      }
    }
  }
  std::set<sv> rs_namespaces;  // namespaces whose ReplicaSets are in the snapshot
  for (const auto& w : s_.workloads) {
    if (w.doc->kind == "ReplicaSet") rs_namespaces.insert(w.ns());
  }
  for (const auto& e : s_.events) {
    const auto& io = e.v.involved_object;
    if (e.v.reason != "FailedCreate" || !in_scope_ns(io.namespace_)) continue;
    const auto rejection = classify_failed_create(e.v.message);
    if (!rejection) continue;
    const auto& [rule, resource] = *rejection;
    // The workload to fix: the creator in the snapshot, else (neither the ReplicaSet nor its
    // Deployment collected) the Deployment its name implies.
    auto [kind, name] = creator_of(io.kind, io.namespace_, io.name);
    std::string inferred;
    if (kind == "ReplicaSet" && s_.workload("ReplicaSet", io.namespace_, io.name) == nullptr) {
      // With the namespace's ReplicaSets collected, a missing one was deleted: its events are history.
      if (rs_namespaces.contains(io.namespace_)) continue;
      if (const auto dash = name.rfind('-'); dash != sv::npos && looks_like_template_hash(name.substr(dash + 1))) {
        inferred = fmt::format("deployment {} inferred from the ReplicaSet's name (neither is in the snapshot)",
                               name.substr(0, dash));
        kind = "Deployment";
        name = name.substr(0, dash);
      }
    }
    const k8s::Document* tpl = nullptr;
    for (const auto& t : tpls) {
      if (t.doc->kind == kind && t.doc->metadata.namespace_ == io.namespace_ && t.doc->metadata.name == name) {
        tpl = t.doc;
      }
    }
    if (tpl != nullptr && s_.has_invalid_fields(tpl)) continue;
    // A quota on CPU or memory is not a GPU problem: the message names the GPU resource, or the
    // workload (in the snapshot) is one whose pods were denied.
    if (rule == RuleId::kQuotaExhausted && resource.empty() && tpl == nullptr) continue;
    const std::string obj = obj_of(kind, io.namespace_, name);
    if (!reported.insert(obj).second) continue;
    Finding f = make_finding(rule, obj);
    f.evidence.push_back(event_evidence(e));
    if (!inferred.empty()) f.details.push_back(inferred);
    const sv ns = io.namespace_;
    const std::string res = resource.empty() ? "the GPU resource" : resource;
    switch (rule) {
      case RuleId::kQuotaExhausted: {
        sv msg = e.v.message;
        std::string quota_name;
        if (auto pos = msg.find("exceeded quota: "); pos != sv::npos) {
          sv rest = msg.substr(pos + 16);
          quota_name = std::string(rest.substr(0, rest.find(',')));
        }
        f.summary = fmt::format("pods are not created: ResourceQuota {} in namespace {} is used up", quota_name, ns);
        for (const auto& q : s_.quotas) {
          if (q.ns() != ns || q.name() != quota_name) continue;
          for (const auto& [r, used] : q.v.status_used) {
            auto hard = q.v.status_hard.find(r);
            if (hard == q.v.status_hard.end() || !contains(r, "nvidia.com")) continue;
            f.evidence.push_back(
                Evidence{fmt::format("resourcequota/{}/{} .status at {}", q.ns(), q.name(), q.doc->where(used.line)),
                         fmt::format("{}: used {} of {}", r, used->to_string(), hard->second->to_string())});
          }
        }
        f.details.push_back("GPU pods of this namespace that hold the quota are listed by: kubectl get pods -n " +
                            std::string(ns) + " --field-selector status.phase=Running");
        f.fix.push_back(fmt::format("kubectl describe resourcequota -n {} {}", ns, quota_name));
        f.fix.push_back(
            fmt::format("free GPUs in {} (finish or scale down GPU workloads), or raise the quota: kubectl patch "
                        "resourcequota -n {} {} --type merge -p "
                        "'{{\"spec\":{{\"hard\":{{\"requests.nvidia.com/gpu\":\"<n>\"}}}}}}'",
                        ns, ns, quota_name));
        break;
      }
      case RuleId::kGpuRequestFractional:
        f.summary = fmt::format(
            "the API server rejects the pods of {}: {} must be a whole number (fractions of a GPU come from MIG "
            "slices or time-slicing replicas)",
            obj, res);
        f.fix.push_back(
            fmt::format("set resources.limits {}: <whole number> (and no separate request) in {}", res, obj));
        f.fix.push_back("for a fraction of a GPU: a MIG slice (nvidia.com/mig-1g.10gb: 1) or a time-sliced replica");
        break;
      case RuleId::kGpuRequestLimitMismatch:
        f.summary = fmt::format(
            "the API server rejects the pods of {}: the {} request differs from its limit (extended resources "
            "cannot be overcommitted: request must equal limit)",
            obj, res);
        f.fix.push_back(
            fmt::format("set resources.limits {}: <whole number> (and no separate request) in {}", res, obj));
        break;
      case RuleId::kGpuLimitMissing:
        f.summary = fmt::format(
            "the API server rejects the pods of {}: {} is requested without a limit (Limit must be set for non "
            "overcommitable resources)",
            obj, res);
        f.fix.push_back(fmt::format("move {} from resources.requests to resources.limits in {}", res, obj));
        break;
      case RuleId::kLimitrangeExceeded:
        f.summary =
            fmt::format("the API server rejects the pods of {}: a LimitRange in namespace {} bounds {}", obj, ns, res);
        f.fix.push_back(fmt::format("kubectl describe limitrange -n {}", ns));
        f.fix.push_back(fmt::format(
            "ask for {} within the LimitRange's min/max in {}, or change the LimitRange with the namespace's owner",
            res, obj));
        break;
      default:
        break;
    }
    add(std::move(f));
  }
}

}  // namespace kgpu::doctor::detail
