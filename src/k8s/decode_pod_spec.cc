// Decoding of pod specs and the pieces several kinds embed (k8s/decode.h): label selectors,
// node affinity, containers, probes, volumes, conditions, container statuses, pod templates.
#include "k8s/decode.h"

namespace kgpu::k8s::detail {

namespace {

std::vector<NodeSelectorRequirement> node_requirements(const Value* term, std::string_view key) {
  std::vector<NodeSelectorRequirement> out;
  const Value* list = Decoder::child(term, key);
  if (list == nullptr) return out;
  for (const Value& r : list->items()) {
    out.push_back(NodeSelectorRequirement{Decoder::str(&r, "key"), Decoder::str(&r, "operator"),
                                          Decoder::views(&r, "values"), r.line()});
  }
  return out;
}

Probe decode_probe(Decoder& d, const Entry& e, std::string_view path) {
  Probe p;
  p.line = e.key_line();
  const std::string sub = fmt::format("{}.{}", path, e.key());
  const Value* m = &e.value();
  p.initial_delay_seconds = d.integer(m, "initialDelaySeconds", sub);
  p.period_seconds = d.integer(m, "periodSeconds", sub);
  p.timeout_seconds = d.integer(m, "timeoutSeconds", sub);
  p.failure_threshold = d.integer(m, "failureThreshold", sub);
  p.success_threshold = d.integer(m, "successThreshold", sub);
  return p;
}

Container decode_container(Decoder& d, const Value& c, const std::string& path) {
  Container out;
  out.line = c.line();
  out.raw = &c;
  out.name = Decoder::str(&c, "name");
  out.image = d.text(&c, "image", path);
  out.command = d.texts(&c, "command", path);
  out.args = d.texts(&c, "args", path);
  out.restart_policy = d.text(&c, "restartPolicy", path);
  size_t i = 0;
  const std::span<const Value> env = d.seq(&c, "env", path);
  out.env.reserve(env.size());
  for (const Value& e : env) {
    const std::string sub = fmt::format("{}.env[{}]", path, i++);
    EnvVar v;
    v.name = Decoder::str(&e, "name");
    v.value = d.text(&e, "value", sub);
    v.value_from = Decoder::entry(&e, "valueFrom") != nullptr;
    v.line = e.line();
    out.env.push_back(v);
  }
  if (const Entry* r = Decoder::entry(&c, "resources")) {
    out.resources.line = r->key_line();
    const std::string sub = path + ".resources";
    const Value* m = d.map(&c, "resources", path);
    out.resources.requests = d.quantities(m, "requests", sub);
    out.resources.limits = d.quantities(m, "limits", sub);
    for (const Value& claim : d.seq(m, "claims", sub)) {
      out.resources.claims.push_back(Text{Decoder::str(&claim, "name"), claim.line()});
    }
  }
  const std::span<const Value> mounts = d.seq(&c, "volumeMounts", path);
  out.volume_mounts.reserve(mounts.size());
  for (const Value& m : mounts) {
    VolumeMount v{Decoder::str(&m, "name"), Decoder::str(&m, "mountPath"), false, m.line()};
    if (const Value* ro = Decoder::child(&m, "readOnly")) v.read_only = ro->as_bool().value_or(false);
    out.volume_mounts.push_back(v);
  }
  if (const Value* sc = d.map(&c, "securityContext", path)) {
    out.privileged = d.boolean(sc, "privileged", path + ".securityContext");
  }
  for (const auto& [key, probe] :
       {std::pair{"startupProbe", &out.startup_probe}, std::pair{"readinessProbe", &out.readiness_probe},
        std::pair{"livenessProbe", &out.liveness_probe}}) {
    if (const Entry* e = Decoder::entry(&c, key); e != nullptr && d.map(&c, key, path) != nullptr) {
      *probe = decode_probe(d, *e, path);
    }
  }
  return out;
}

Volume decode_volume(Decoder& d, const Value& v, const std::string& path) {
  Volume out;
  out.line = v.line();
  out.raw = &v;
  out.name = Decoder::str(&v, "name");
  if (const Value* h = d.map(&v, "hostPath", path)) out.host_path = d.text(h, "path", path + ".hostPath");
  if (const Entry* e = v.find_entry("emptyDir")) {
    out.empty_dir = true;
    if (e->value().is_map()) {
      out.empty_dir_medium = d.text(&e->value(), "medium", path + ".emptyDir");
      if (const Entry* s = Decoder::entry(&e->value(), "sizeLimit")) {
        out.empty_dir_size_limit = d.quantity(*s, path + ".emptyDir");
      }
    }
  }
  if (const Value* p = d.map(&v, "persistentVolumeClaim", path)) {
    out.persistent_volume_claim = d.text(p, "claimName", path + ".persistentVolumeClaim");
  }
  if (const Value* s = d.map(&v, "secret", path)) out.secret = d.text(s, "secretName", path + ".secret");
  if (const Value* c = d.map(&v, "configMap", path)) out.config_map = d.text(c, "name", path + ".configMap");
  return out;
}

ContainerState decode_state(const Value* parent, std::string_view key) {
  ContainerState out;
  const Entry* e = Decoder::entry(parent, key);
  if (e == nullptr) return out;
  out.line = e->key_line();
  for (const Entry& s : e->value().entries()) {
    if (s.value().is_null()) continue;
    out.state = s.key();
    out.reason = Decoder::str(&s.value(), "reason");
    out.message = Decoder::str(&s.value(), "message");
    if (const Value* code = Decoder::child(&s.value(), "exitCode")) out.exit_code = code->as_int();
    break;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
LabelSelector decode_label_selector(Decoder& d, const Value* parent, std::string_view key, std::string_view path) {
  LabelSelector s;
  const Entry* e = Decoder::entry(parent, key);
  if (e == nullptr) return s;
  s.line = e->key_line();
  const Value* m = d.map(parent, key, path);
  if (m == nullptr) return s;
  const std::string sub = fmt::format("{}.{}", path, key);
  s.match_labels = d.strings(m, "matchLabels", sub);
  for (const Value& r : d.seq(m, "matchExpressions", sub)) {
    s.match_expressions.push_back(LabelSelectorRequirement{Decoder::str(&r, "key"), Decoder::str(&r, "operator"),
                                                           Decoder::views(&r, "values"), r.line()});
  }
  return s;
}

std::vector<Condition> decode_conditions(Decoder& d, const Value* parent, std::string_view path) {
  std::vector<Condition> out;
  const std::span<const Value> items = d.seq(parent, "conditions", path);
  out.reserve(items.size());
  for (const Value& c : items) {
    out.push_back(Condition{Decoder::str(&c, "type"), Decoder::str(&c, "status"), Decoder::str(&c, "reason"),
                            Decoder::str(&c, "message"), Decoder::str(&c, "lastTransitionTime"), c.line()});
  }
  return out;
}

PodSpec decode_pod_spec(Decoder& d, const Value* parent, std::string_view path) {
  PodSpec s;
  const Entry* se = Decoder::entry(parent, "spec");
  const Value* spec = d.map(parent, "spec", path);
  if (se == nullptr || spec == nullptr) return s;
  s.line = se->key_line();
  const std::string p = fmt::format("{}.spec", path);
  s.node_name = d.text(spec, "nodeName", p);
  s.node_selector = d.strings(spec, "nodeSelector", p, &s.node_selector_line);
  s.affinity = d.map(spec, "affinity", p);
  if (s.affinity != nullptr) {
    const Value* terms =
        s.affinity->at({"nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"});
    if (terms != nullptr) {
      for (const Value& t : terms->items()) {
        s.required_node_affinity.push_back(NodeSelectorTerm{node_requirements(&t, "matchExpressions"),
                                                            node_requirements(&t, "matchFields"), t.line()});
      }
    }
  }
  size_t i = 0;
  const std::span<const Value> tolerations = d.seq(spec, "tolerations", p);
  s.tolerations.reserve(tolerations.size());
  for (const Value& t : tolerations) {
    const std::string sub = fmt::format("{}.tolerations[{}]", p, i++);
    Toleration tol{Decoder::str(&t, "key"),
                   Decoder::str(&t, "operator"),
                   Decoder::str(&t, "value"),
                   Decoder::str(&t, "effect"),
                   d.integer(&t, "tolerationSeconds", sub),
                   t.line()};
    s.tolerations.push_back(tol);
  }
  i = 0;
  const std::span<const Value> containers = d.seq(spec, "containers", p);
  s.containers.reserve(containers.size());
  for (const Value& c : containers) {
    s.containers.push_back(decode_container(d, c, fmt::format("{}.containers[{}]", p, i++)));
  }
  i = 0;
  const std::span<const Value> init_containers = d.seq(spec, "initContainers", p);
  s.init_containers.reserve(init_containers.size());
  for (const Value& c : init_containers) {
    s.init_containers.push_back(decode_container(d, c, fmt::format("{}.initContainers[{}]", p, i++)));
  }
  i = 0;
  const std::span<const Value> volumes = d.seq(spec, "volumes", p);
  s.volumes.reserve(volumes.size());
  for (const Value& v : volumes)
    s.volumes.push_back(decode_volume(d, v, fmt::format("{}.volumes[{}]", p, i++)));
  s.priority_class_name = d.text(spec, "priorityClassName", p);
  s.priority = d.integer(spec, "priority", p);
  for (const Value& c : d.seq(spec, "resourceClaims", p)) {
    PodResourceClaim rc;
    rc.name = Decoder::str(&c, "name");
    rc.resource_claim_name = d.text(&c, "resourceClaimName", p + ".resourceClaims");
    rc.resource_claim_template_name = d.text(&c, "resourceClaimTemplateName", p + ".resourceClaims");
    // v1alpha2-era pods nested the two names under `source:`.
    if (const Value* src = Decoder::child(&c, "source")) {
      if (!rc.resource_claim_name)
        rc.resource_claim_name = d.text(src, "resourceClaimName", p + ".resourceClaims.source");
      if (!rc.resource_claim_template_name) {
        rc.resource_claim_template_name = d.text(src, "resourceClaimTemplateName", p + ".resourceClaims.source");
      }
    }
    rc.line = c.line();
    s.resource_claims.push_back(rc);
  }
  s.runtime_class_name = d.text(spec, "runtimeClassName", p);
  s.restart_policy = d.text(spec, "restartPolicy", p);
  s.scheduler_name = d.text(spec, "schedulerName", p);
  s.overhead = d.quantities(spec, "overhead", p);
  return s;
}

std::vector<ContainerStatus> decode_statuses(Decoder& d, const Value* status, std::string_view key,
                                             std::string_view path) {
  std::vector<ContainerStatus> out;
  const std::span<const Value> items = d.seq(status, key, path);
  out.reserve(items.size());
  for (const Value& c : items) {
    ContainerStatus s;
    s.name = Decoder::str(&c, "name");
    if (const Value* r = Decoder::child(&c, "ready")) s.ready = r->as_bool().value_or(false);
    if (const Value* r = Decoder::child(&c, "restartCount")) s.restart_count = r->as_int().value_or(0);
    s.image = Decoder::str(&c, "image");
    s.state = decode_state(&c, "state");
    s.last_state = decode_state(&c, "lastState");
    s.line = c.line();
    out.push_back(s);
  }
  return out;
}

PodTemplate decode_template(Decoder& d, const Value* parent, std::string_view path) {
  PodTemplate t;
  const Entry* e = Decoder::entry(parent, "template");
  const Value* m = d.map(parent, "template", path);
  if (e == nullptr || m == nullptr) return t;
  t.line = e->key_line();
  if (const Entry* meta = Decoder::entry(m, "metadata")) t.metadata = decode_meta(&meta->value(), meta->key_line());
  t.spec = decode_pod_spec(d, m, fmt::format("{}.template", path));
  return t;
}

}  // namespace kgpu::k8s::detail
