#include "k8s/objects.h"

#include <algorithm>
#include <charconv>

#include "common/strings.h"

namespace kgpu::k8s {
namespace {

// Field decoding with issues: a field of the wrong type is left absent and reported.
class Decoder {
 public:
  explicit Decoder(std::vector<Issue>* issues) : issues_(issues) {}

  void issue(int line, std::string message, bool invalid_quantity = false) {
    issues_->push_back(Issue{line, std::move(message), invalid_quantity});
  }

  // The entry for `key` with a non-null value, or nullptr.
  static const Entry* entry(const Node* map, std::string_view key) {
    if (map == nullptr) return nullptr;
    const Entry* e = map->find_entry(key);
    return e != nullptr && !e->value().is_null() ? e : nullptr;
  }
  static const Node* child(const Node* map, std::string_view key) {
    const Entry* e = entry(map, key);
    return e != nullptr ? &e->value() : nullptr;
  }

  // A mapping field; an issue when it is something else.
  const Node* map(const Node* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return nullptr;
    if (!e->value().is_map()) {
      type_issue(e, path, key, "a mapping");
      return nullptr;
    }
    return &e->value();
  }
  std::span<const Node> seq(const Node* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    if (!e->value().is_seq()) {
      type_issue(e, path, key, "a list");
      return {};
    }
    return e->value().items();
  }

  Text text(const Node* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    if (!e->value().is_string()) {
      type_issue(e, path, key, "a string");
      return {};
    }
    return Text{e->value().text(), e->key_line()};
  }
  // A string without type checks (for fields only read for messages).
  static std::string_view str(const Node* parent, std::string_view key) {
    const Node* n = child(parent, key);
    return n != nullptr && n->is_scalar() ? n->text() : std::string_view();
  }

  Int integer(const Node* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    const auto v = e->value().as_int();
    if (!v) {
      type_issue(e, path, key, "an integer");
      return {};
    }
    return Int{*v, e->key_line()};
  }

  Bool boolean(const Node* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    const auto v = e->value().as_bool();
    if (!v) {
      type_issue(e, path, key, "a boolean");
      return {};
    }
    return Bool{*v, e->key_line()};
  }

  Field<IntOrString> int_or_string(const Node* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    IntOrString v;
    if (e->value().is_string()) {
      v.is_string = true;
      v.string_value = e->value().text();
    } else if (const auto i = e->value().as_int()) {
      v.int_value = *i;
    } else {
      type_issue(e, path, key, "an integer or a string");
      return {};
    }
    return Field<IntOrString>{v, e->key_line()};
  }

  Field<Quantity> quantity(const Entry& e, std::string_view path) {
    const Node& v = e.value();
    if (v.is_null()) return {};
    if (v.type() != NodeType::kString && v.type() != NodeType::kNumber) {
      type_issue(&e, path, e.key(), "a quantity", true);
      return {};
    }
    auto q = Quantity::parse(trim(v.text(), " \t\r\n"));
    if (!q) {
      issue(e.key_line(), fmt::format("{}.{}: {}", path, e.key(), q.error().message), true);
      return {};
    }
    return Field<Quantity>{*q, e.key_line()};
  }

  QuantityMap quantities(const Node* parent, std::string_view key, std::string_view path) {
    QuantityMap out;
    const Node* m = map(parent, key, path);
    if (m == nullptr) return out;
    const std::string sub = fmt::format("{}.{}", path, key);
    std::vector<QuantityMap::value_type> kv;
    kv.reserve(m->size());
    for (const Entry& e : m->entries()) {
      if (auto q = quantity(e, sub)) kv.emplace_back(e.key(), q);
    }
    out.assign_last_wins(std::move(kv));
    return out;
  }

  StringMap strings(const Node* parent, std::string_view key, std::string_view path, int* line = nullptr) {
    StringMap out;
    const Entry* e = entry(parent, key);
    if (e == nullptr) return out;
    if (line != nullptr) *line = e->key_line();
    if (!e->value().is_map()) {
      type_issue(e, path, key, "a mapping");
      return out;
    }
    std::vector<StringMap::value_type> kv;
    kv.reserve(e->value().size());
    for (const Entry& x : e->value().entries()) {
      if (x.value().is_scalar()) kv.emplace_back(x.key(), x.value().text());
    }
    out.assign_last_wins(std::move(kv));
    return out;
  }

  std::vector<Text> texts(const Node* parent, std::string_view key, std::string_view path) {
    std::vector<Text> out;
    const std::span<const Node> items = seq(parent, key, path);
    out.reserve(items.size());
    for (const Node& n : items) {
      if (n.is_scalar()) out.push_back(Text{n.text(), n.line()});
    }
    return out;
  }

  static std::vector<std::string_view> views(const Node* parent, std::string_view key) {
    std::vector<std::string_view> out;
    const Node* n = child(parent, key);
    if (n == nullptr) return out;
    for (const Node& item : n->items()) {
      if (item.is_scalar()) out.push_back(item.text());
    }
    return out;
  }

 private:
  void type_issue(const Entry* e, std::string_view path, std::string_view key, std::string_view expected,
                  bool invalid_quantity = false) {
    issue(e->key_line(),
          fmt::format("{}.{}: expected {}, found a {}{}", path, key, expected, node_type_name(e->value().type()),
                      e->value().is_scalar() ? fmt::format(" ('{}')", e->value().text()) : ""),
          invalid_quantity);
  }

  std::vector<Issue>* issues_;
};

bool is_kind(const Document& doc, std::string_view kind) { return doc.kind == kind; }

// ---------------------------------------------------------------------------------------------

LabelSelector decode_label_selector(Decoder& d, const Node* parent, std::string_view key, std::string_view path) {
  LabelSelector s;
  const Entry* e = Decoder::entry(parent, key);
  if (e == nullptr) return s;
  s.line = e->key_line();
  const Node* m = d.map(parent, key, path);
  if (m == nullptr) return s;
  const std::string sub = fmt::format("{}.{}", path, key);
  s.match_labels = d.strings(m, "matchLabels", sub);
  for (const Node& r : d.seq(m, "matchExpressions", sub)) {
    s.match_expressions.push_back(LabelSelectorRequirement{Decoder::str(&r, "key"), Decoder::str(&r, "operator"),
                                                           Decoder::views(&r, "values"), r.line()});
  }
  return s;
}

std::vector<NodeSelectorRequirement> node_requirements(const Node* term, std::string_view key) {
  std::vector<NodeSelectorRequirement> out;
  const Node* list = Decoder::child(term, key);
  if (list == nullptr) return out;
  for (const Node& r : list->items()) {
    out.push_back(NodeSelectorRequirement{Decoder::str(&r, "key"), Decoder::str(&r, "operator"),
                                          Decoder::views(&r, "values"), r.line()});
  }
  return out;
}

Probe decode_probe(Decoder& d, const Entry& e, std::string_view path) {
  Probe p;
  p.line = e.key_line();
  const std::string sub = fmt::format("{}.{}", path, e.key());
  const Node* m = &e.value();
  p.initial_delay_seconds = d.integer(m, "initialDelaySeconds", sub);
  p.period_seconds = d.integer(m, "periodSeconds", sub);
  p.timeout_seconds = d.integer(m, "timeoutSeconds", sub);
  p.failure_threshold = d.integer(m, "failureThreshold", sub);
  p.success_threshold = d.integer(m, "successThreshold", sub);
  return p;
}

Container decode_container(Decoder& d, const Node& c, const std::string& path) {
  Container out;
  out.line = c.line();
  out.raw = &c;
  out.name = Decoder::str(&c, "name");
  out.image = d.text(&c, "image", path);
  out.command = d.texts(&c, "command", path);
  out.args = d.texts(&c, "args", path);
  out.restart_policy = d.text(&c, "restartPolicy", path);
  size_t i = 0;
  const std::span<const Node> env = d.seq(&c, "env", path);
  out.env.reserve(env.size());
  for (const Node& e : env) {
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
    const Node* m = d.map(&c, "resources", path);
    out.resources.requests = d.quantities(m, "requests", sub);
    out.resources.limits = d.quantities(m, "limits", sub);
    for (const Node& claim : d.seq(m, "claims", sub)) {
      out.resources.claims.push_back(Text{Decoder::str(&claim, "name"), claim.line()});
    }
  }
  const std::span<const Node> mounts = d.seq(&c, "volumeMounts", path);
  out.volume_mounts.reserve(mounts.size());
  for (const Node& m : mounts) {
    VolumeMount v{Decoder::str(&m, "name"), Decoder::str(&m, "mountPath"), false, m.line()};
    if (const Node* ro = Decoder::child(&m, "readOnly")) v.read_only = ro->as_bool().value_or(false);
    out.volume_mounts.push_back(v);
  }
  if (const Node* sc = d.map(&c, "securityContext", path)) {
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

Volume decode_volume(Decoder& d, const Node& v, const std::string& path) {
  Volume out;
  out.line = v.line();
  out.raw = &v;
  out.name = Decoder::str(&v, "name");
  if (const Node* h = d.map(&v, "hostPath", path)) out.host_path = d.text(h, "path", path + ".hostPath");
  if (const Entry* e = v.find_entry("emptyDir")) {
    out.empty_dir = true;
    if (e->value().is_map()) {
      out.empty_dir_medium = d.text(&e->value(), "medium", path + ".emptyDir");
      if (const Entry* s = Decoder::entry(&e->value(), "sizeLimit")) {
        out.empty_dir_size_limit = d.quantity(*s, path + ".emptyDir");
      }
    }
  }
  if (const Node* p = d.map(&v, "persistentVolumeClaim", path)) {
    out.persistent_volume_claim = d.text(p, "claimName", path + ".persistentVolumeClaim");
  }
  if (const Node* s = d.map(&v, "secret", path)) out.secret = d.text(s, "secretName", path + ".secret");
  if (const Node* c = d.map(&v, "configMap", path)) out.config_map = d.text(c, "name", path + ".configMap");
  return out;
}

std::vector<Condition> decode_conditions(Decoder& d, const Node* parent, std::string_view path) {
  std::vector<Condition> out;
  const std::span<const Node> items = d.seq(parent, "conditions", path);
  out.reserve(items.size());
  for (const Node& c : items) {
    out.push_back(Condition{Decoder::str(&c, "type"), Decoder::str(&c, "status"), Decoder::str(&c, "reason"),
                            Decoder::str(&c, "message"), Decoder::str(&c, "lastTransitionTime"), c.line()});
  }
  return out;
}

PodSpec decode_pod_spec(Decoder& d, const Node* parent, std::string_view path) {
  PodSpec s;
  const Entry* se = Decoder::entry(parent, "spec");
  const Node* spec = d.map(parent, "spec", path);
  if (se == nullptr || spec == nullptr) return s;
  s.line = se->key_line();
  const std::string p = fmt::format("{}.spec", path);
  s.node_name = d.text(spec, "nodeName", p);
  s.node_selector = d.strings(spec, "nodeSelector", p, &s.node_selector_line);
  s.affinity = d.map(spec, "affinity", p);
  if (s.affinity != nullptr) {
    const Node* terms =
        s.affinity->at({"nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"});
    if (terms != nullptr) {
      for (const Node& t : terms->items()) {
        s.required_node_affinity.push_back(NodeSelectorTerm{node_requirements(&t, "matchExpressions"),
                                                            node_requirements(&t, "matchFields"), t.line()});
      }
    }
  }
  size_t i = 0;
  const std::span<const Node> tolerations = d.seq(spec, "tolerations", p);
  s.tolerations.reserve(tolerations.size());
  for (const Node& t : tolerations) {
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
  const std::span<const Node> containers = d.seq(spec, "containers", p);
  s.containers.reserve(containers.size());
  for (const Node& c : containers) {
    s.containers.push_back(decode_container(d, c, fmt::format("{}.containers[{}]", p, i++)));
  }
  i = 0;
  const std::span<const Node> init_containers = d.seq(spec, "initContainers", p);
  s.init_containers.reserve(init_containers.size());
  for (const Node& c : init_containers) {
    s.init_containers.push_back(decode_container(d, c, fmt::format("{}.initContainers[{}]", p, i++)));
  }
  i = 0;
  const std::span<const Node> volumes = d.seq(spec, "volumes", p);
  s.volumes.reserve(volumes.size());
  for (const Node& v : volumes)
    s.volumes.push_back(decode_volume(d, v, fmt::format("{}.volumes[{}]", p, i++)));
  s.priority_class_name = d.text(spec, "priorityClassName", p);
  s.priority = d.integer(spec, "priority", p);
  for (const Node& c : d.seq(spec, "resourceClaims", p)) {
    PodResourceClaim rc;
    rc.name = Decoder::str(&c, "name");
    rc.resource_claim_name = d.text(&c, "resourceClaimName", p + ".resourceClaims");
    rc.resource_claim_template_name = d.text(&c, "resourceClaimTemplateName", p + ".resourceClaims");
    // v1alpha2-era pods nested the two names under `source:`.
    if (const Node* src = Decoder::child(&c, "source")) {
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

ContainerState decode_state(const Node* parent, std::string_view key) {
  ContainerState out;
  const Entry* e = Decoder::entry(parent, key);
  if (e == nullptr) return out;
  out.line = e->key_line();
  for (const Entry& s : e->value().entries()) {
    if (s.value().is_null()) continue;
    out.state = s.key();
    out.reason = Decoder::str(&s.value(), "reason");
    out.message = Decoder::str(&s.value(), "message");
    if (const Node* code = Decoder::child(&s.value(), "exitCode")) out.exit_code = code->as_int();
    break;
  }
  return out;
}

std::vector<ContainerStatus> decode_statuses(Decoder& d, const Node* status, std::string_view key,
                                             std::string_view path) {
  std::vector<ContainerStatus> out;
  const std::span<const Node> items = d.seq(status, key, path);
  out.reserve(items.size());
  for (const Node& c : items) {
    ContainerStatus s;
    s.name = Decoder::str(&c, "name");
    if (const Node* r = Decoder::child(&c, "ready")) s.ready = r->as_bool().value_or(false);
    if (const Node* r = Decoder::child(&c, "restartCount")) s.restart_count = r->as_int().value_or(0);
    s.image = Decoder::str(&c, "image");
    s.state = decode_state(&c, "state");
    s.last_state = decode_state(&c, "lastState");
    s.line = c.line();
    out.push_back(s);
  }
  return out;
}

PodTemplate decode_template(Decoder& d, const Node* parent, std::string_view path) {
  PodTemplate t;
  const Entry* e = Decoder::entry(parent, "template");
  const Node* m = d.map(parent, "template", path);
  if (e == nullptr || m == nullptr) return t;
  t.line = e->key_line();
  if (const Entry* meta = Decoder::entry(m, "metadata")) t.metadata = decode_meta(&meta->value(), meta->key_line());
  t.spec = decode_pod_spec(d, m, fmt::format("{}.template", path));
  return t;
}

Job decode_job(Decoder& d, const Node* root, std::string_view path) {
  Job j;
  const Node* spec = d.map(root, "spec", path);
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
  if (const Node* status = d.map(root, "status", path)) {
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

std::vector<CelSelector> decode_selectors(Decoder& d, const Node* parent, std::string_view path) {
  std::vector<CelSelector> out;
  for (const Node& s : d.seq(parent, "selectors", path)) {
    const Node* cel = Decoder::child(&s, "cel");
    out.push_back(CelSelector{d.text(cel, "expression", fmt::format("{}.selectors[].cel", path)), s.line()});
  }
  return out;
}

DeviceSubRequest decode_sub_request(Decoder& d, const Node& r, std::string_view path) {
  DeviceSubRequest s;
  s.name = Decoder::str(&r, "name");
  s.device_class_name = d.text(&r, "deviceClassName", path);
  s.selectors = decode_selectors(d, &r, path);
  s.allocation_mode = d.text(&r, "allocationMode", path);
  s.count = d.integer(&r, "count", path);
  s.line = r.line();
  return s;
}

ResourceClaimSpec decode_claim_spec(Decoder& d, const Node* spec, std::string_view path, int line) {
  ResourceClaimSpec out;
  out.line = line;
  const std::string p = fmt::format("{}.devices", path);
  const Node* devices = d.map(spec, "devices", path);
  size_t i = 0;
  for (const Node& r : d.seq(devices, "requests", p)) {
    const std::string rp = fmt::format("{}.requests[{}]", p, i++);
    DeviceRequest req;
    req.name = Decoder::str(&r, "name");
    req.line = r.line();
    if (const Node* exactly = d.map(&r, "exactly", rp)) {
      req.exactly = true;
      req.request = decode_sub_request(d, *exactly, rp + ".exactly");
      req.admin_access = d.boolean(exactly, "adminAccess", rp + ".exactly");
    } else {
      req.request = decode_sub_request(d, r, rp);
      req.admin_access = d.boolean(&r, "adminAccess", rp);
    }
    req.request.name = req.name;
    req.request.line = r.line();
    for (const Node& alt : d.seq(&r, "firstAvailable", rp)) {
      req.first_available.push_back(decode_sub_request(d, alt, rp + ".firstAvailable[]"));
    }
    out.requests.push_back(std::move(req));
  }
  for (const Node& c : d.seq(devices, "constraints", p)) {
    out.constraints.push_back(
        DeviceConstraint{Decoder::views(&c, "requests"), d.text(&c, "matchAttribute", p + ".constraints[]"), c.line()});
  }
  out.config = Decoder::child(devices, "config");
  return out;
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Selectors

bool LabelSelector::matches(const StringMap& labels) const {
  for (const auto& [k, v] : match_labels) {
    const auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const auto& r : match_expressions) {
    const auto it = labels.find(r.key);
    const bool has = it != labels.end();
    const bool in = has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    if (r.op == "In") {
      if (!in) return false;
    } else if (r.op == "NotIn") {
      if (in) return false;
    } else if (r.op == "Exists") {
      if (!has) return false;
    } else if (r.op == "DoesNotExist") {
      if (has) return false;
    } else {
      return false;
    }
  }
  return true;
}

namespace {

bool parse_int64(std::string_view s, int64_t* out) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
}

bool requirement_holds(const NodeSelectorRequirement& r, std::optional<std::string_view> value) {
  const bool in = value && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
  if (r.op == "In") return in;
  if (r.op == "NotIn") return !in;
  if (r.op == "Exists") return value.has_value();
  if (r.op == "DoesNotExist") return !value.has_value();
  if (r.op == "Gt" || r.op == "Lt") {
    int64_t have = 0;
    int64_t want = 0;
    if (!value || r.values.size() != 1 || !parse_int64(*value, &have) || !parse_int64(r.values[0], &want)) return false;
    return r.op == "Gt" ? have > want : have < want;
  }
  return false;
}

}  // namespace

bool matches(const NodeSelectorTerm& term, const StringMap& node_labels, std::string_view node_name) {
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  for (const auto& r : term.match_expressions) {
    const auto it = node_labels.find(r.key);
    if (!requirement_holds(r, it == node_labels.end() ? std::nullopt : std::optional(it->second))) return false;
  }
  for (const auto& r : term.match_fields) {
    if (r.key != "metadata.name" || !requirement_holds(r, node_name)) return false;
  }
  return true;
}

bool matches_any(std::span<const NodeSelectorTerm> terms, const StringMap& node_labels, std::string_view node_name) {
  return std::any_of(terms.begin(), terms.end(), [&](const auto& t) { return matches(t, node_labels, node_name); });
}

bool matches_node_selector(const StringMap& node_selector, const StringMap& node_labels) {
  for (const auto& [k, v] : node_selector) {
    const auto it = node_labels.find(k);
    if (it == node_labels.end() || it->second != v) return false;
  }
  return true;
}

bool tolerates(const Toleration& toleration, const Taint& taint) {
  if (!toleration.effect.empty() && toleration.effect != taint.effect) return false;
  if (!toleration.key.empty() && toleration.key != taint.key) return false;
  if (toleration.op.empty() || toleration.op == "Equal") return toleration.value == taint.value;
  return toleration.op == "Exists";
}

bool tolerates(std::span<const Toleration> tolerations, const Taint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(), [&](const auto& t) { return tolerates(t, taint); });
}

const Taint* first_untolerated(std::span<const Taint> taints, std::span<const Toleration> tolerations) {
  for (const Taint& t : taints) {
    if ((t.effect == "NoSchedule" || t.effect == "NoExecute") && !tolerates(tolerations, t)) return &t;
  }
  return nullptr;
}

const Condition* find_condition(std::span<const Condition> conditions, std::string_view type) {
  for (const Condition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

// -----------------------------------------------------------------------------------------------
// Requests

QuantityMap effective_requests(const Container& container) {
  // Limits, then requests, the last of a name winning: a request wins over the limit of its name.
  std::vector<QuantityMap::value_type> kv;
  kv.reserve(container.resources.requests.size() + container.resources.limits.size());
  for (const auto& e : container.resources.limits) kv.push_back(e);
  for (const auto& e : container.resources.requests) kv.push_back(e);
  QuantityMap out;
  out.assign_last_wins(std::move(kv));
  return out;
}

namespace {

Quantity request_of(const Container& c, std::string_view resource) {
  if (auto it = c.resources.requests.find(resource); it != c.resources.requests.end()) return it->second.value;
  if (auto it = c.resources.limits.find(resource); it != c.resources.limits.end()) return it->second.value;
  return {};
}

}  // namespace

Quantity pod_request(const PodSpec& spec, std::string_view resource) {
  Quantity sum;
  for (const Container& c : spec.containers) sum += request_of(c, resource);
  Quantity sidecars;
  Quantity init_max;
  for (const Container& c : spec.init_containers) {
    const Quantity r = request_of(c, resource);
    Quantity during;
    if (c.is_sidecar()) {
      sum += r;
      sidecars += r;
      during = sidecars;
    } else {
      during = r + sidecars;
    }
    init_max = std::max(init_max, during);
  }
  Quantity total = std::max(sum, init_max);
  if (auto it = spec.overhead.find(resource); it != spec.overhead.end()) total += it->second.value;
  return total;
}

std::map<std::string, Quantity, std::less<>> pod_requests(const PodSpec& spec) {
  std::map<std::string, Quantity, std::less<>> out;
  const auto collect = [&](const QuantityMap& m) {
    for (const auto& [name, q] : m) out.try_emplace(std::string(name));
  };
  for (const auto* list : {&spec.containers, &spec.init_containers}) {
    for (const Container& c : *list) {
      collect(c.resources.requests);
      collect(c.resources.limits);
    }
  }
  collect(spec.overhead);
  for (auto& [name, q] : out) q = pod_request(spec, name);
  return out;
}

// -----------------------------------------------------------------------------------------------
// Views

std::optional<Pod> as_pod(const Document& doc) {
  if (!is_kind(doc, "Pod")) return std::nullopt;
  Pod pod;
  Decoder d(&pod.issues);
  pod.spec = decode_pod_spec(d, doc.root, "");
  if (const Entry* se = Decoder::entry(doc.root, "status"); se != nullptr && se->value().is_map()) {
    const Node* status = &se->value();
    PodStatus& s = pod.status;
    s.line = se->key_line();
    s.phase = d.text(status, "phase", ".status");
    s.reason = d.text(status, "reason", ".status");
    s.message = d.text(status, "message", ".status");
    s.conditions = decode_conditions(d, status, ".status");
    s.container_statuses = decode_statuses(d, status, "containerStatuses", ".status");
    s.init_container_statuses = decode_statuses(d, status, "initContainerStatuses", ".status");
    s.nominated_node_name = d.text(status, "nominatedNodeName", ".status");
    s.start_time = d.text(status, "startTime", ".status");
  }
  return pod;
}

std::optional<Workload> as_workload(const Document& doc) {
  const bool deployment = is_kind(doc, "Deployment");
  if (!deployment && !is_kind(doc, "StatefulSet") && !is_kind(doc, "DaemonSet") && !is_kind(doc, "ReplicaSet")) {
    return std::nullopt;
  }
  Workload w;
  Decoder d(&w.issues);
  const Node* spec = d.map(doc.root, "spec", "");
  w.replicas = d.integer(spec, "replicas", ".spec");
  w.selector = decode_label_selector(d, spec, "selector", ".spec");
  const char* strategy = deployment ? "strategy" : "updateStrategy";
  if (const Node* s = d.map(spec, strategy, ".spec"))
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
  const Node* spec = d.map(doc.root, "spec", "");
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

std::optional<KubeNode> as_node(const Document& doc) {
  if (!is_kind(doc, "Node")) return std::nullopt;
  KubeNode n;
  Decoder d(&n.issues);
  const Node* spec = d.map(doc.root, "spec", "");
  n.unschedulable = d.boolean(spec, "unschedulable", ".spec");
  for (const Node& t : d.seq(spec, "taints", ".spec")) {
    n.taints.push_back(Taint{Decoder::str(&t, "key"), Decoder::str(&t, "value"), Decoder::str(&t, "effect"), t.line()});
  }
  const Node* status = d.map(doc.root, "status", "");
  n.capacity = d.quantities(status, "capacity", ".status");
  n.allocatable = d.quantities(status, "allocatable", ".status");
  n.conditions = decode_conditions(d, status, ".status");
  if (const Node* info = Decoder::child(status, "nodeInfo")) {
    n.node_info = NodeSystemInfo{Decoder::str(info, "kernelVersion"),  Decoder::str(info, "containerRuntimeVersion"),
                                 Decoder::str(info, "kubeletVersion"), Decoder::str(info, "osImage"),
                                 Decoder::str(info, "architecture"),   Decoder::str(info, "operatingSystem")};
  }
  return n;
}

std::optional<Event> as_event(const Document& doc) {
  if (!is_kind(doc, "Event")) return std::nullopt;
  const Node* r = doc.root;
  Event e;
  const bool v1 = doc.api_group() == "events.k8s.io";
  const Node* obj = Decoder::child(r, v1 ? "regarding" : "involvedObject");
  e.involved_object =
      ObjectReference{Decoder::str(obj, "apiVersion"), Decoder::str(obj, "kind"), Decoder::str(obj, "name"),
                      Decoder::str(obj, "namespace"),  Decoder::str(obj, "uid"),  Decoder::str(obj, "fieldPath")};
  e.reason = Decoder::str(r, "reason");
  e.message = Decoder::str(r, v1 ? "note" : "message");
  e.type = Decoder::str(r, "type");
  e.event_time = Decoder::str(r, "eventTime");
  if (v1) {
    const Node* count = Decoder::child(Decoder::child(r, "series"), "count");
    if (count == nullptr) count = Decoder::child(r, "deprecatedCount");
    e.count = count != nullptr ? count->as_int().value_or(0) : 0;
    e.first_timestamp = Decoder::str(r, "deprecatedFirstTimestamp");
    e.last_timestamp = Decoder::str(r, "deprecatedLastTimestamp");
    e.source_component = Decoder::str(r, "reportingController");
    e.source_host = Decoder::str(Decoder::child(r, "deprecatedSource"), "host");
  } else {
    const Node* count = Decoder::child(r, "count");
    e.count = count != nullptr ? count->as_int().value_or(0) : 0;
    e.first_timestamp = Decoder::str(r, "firstTimestamp");
    e.last_timestamp = Decoder::str(r, "lastTimestamp");
    const Node* source = Decoder::child(r, "source");
    e.source_component = Decoder::str(source, "component");
    if (e.source_component.empty()) e.source_component = Decoder::str(r, "reportingComponent");
    e.source_host = Decoder::str(source, "host");
  }
  return e;
}

std::optional<ResourceQuota> as_resource_quota(const Document& doc) {
  if (!is_kind(doc, "ResourceQuota")) return std::nullopt;
  ResourceQuota q;
  Decoder d(&q.issues);
  const Node* spec = d.map(doc.root, "spec", "");
  q.hard = d.quantities(spec, "hard", ".spec");
  q.scopes = Decoder::views(spec, "scopes");
  const Node* status = d.map(doc.root, "status", "");
  q.status_hard = d.quantities(status, "hard", ".status");
  q.status_used = d.quantities(status, "used", ".status");
  return q;
}

std::optional<PriorityClass> as_priority_class(const Document& doc) {
  if (!is_kind(doc, "PriorityClass")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  return PriorityClass{d.integer(doc.root, "value", ""), d.boolean(doc.root, "globalDefault", ""),
                       d.text(doc.root, "preemptionPolicy", "")};
}

std::optional<PodDisruptionBudget> as_pod_disruption_budget(const Document& doc) {
  if (!is_kind(doc, "PodDisruptionBudget")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  PodDisruptionBudget p;
  const Node* spec = d.map(doc.root, "spec", "");
  p.min_available = d.int_or_string(spec, "minAvailable", ".spec");
  p.max_unavailable = d.int_or_string(spec, "maxUnavailable", ".spec");
  p.selector = decode_label_selector(d, spec, "selector", ".spec");
  p.unhealthy_pod_eviction_policy = d.text(spec, "unhealthyPodEvictionPolicy", ".spec");
  const Node* status = d.map(doc.root, "status", "");
  p.disruptions_allowed = d.integer(status, "disruptionsAllowed", ".status");
  p.current_healthy = d.integer(status, "currentHealthy", ".status");
  p.desired_healthy = d.integer(status, "desiredHealthy", ".status");
  p.expected_pods = d.integer(status, "expectedPods", ".status");
  return p;
}

std::optional<ConfigMap> as_config_map(const Document& doc) {
  if (!is_kind(doc, "ConfigMap")) return std::nullopt;
  ConfigMap c;
  if (const Node* data = Decoder::child(doc.root, "data")) {
    std::vector<TextMap::value_type> kv;
    kv.reserve(data->size());
    for (const Entry& e : data->entries()) {
      if (e.value().is_scalar()) kv.emplace_back(e.key(), Text{e.value().text(), e.key_line()});
    }
    c.data.assign_last_wins(std::move(kv));
  }
  if (const Node* bin = Decoder::child(doc.root, "binaryData")) {
    for (const Entry& e : bin->entries()) c.binary_data_keys.push_back(e.key());
  }
  return c;
}

std::optional<Namespace> as_namespace(const Document& doc) {
  if (!is_kind(doc, "Namespace")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  return Namespace{d.text(Decoder::child(doc.root, "status"), "phase", ".status")};
}

std::optional<Service> as_service(const Document& doc) {
  if (!is_kind(doc, "Service")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  Service s;
  const Node* spec = d.map(doc.root, "spec", "");
  s.type = d.text(spec, "type", ".spec");
  s.selector = d.strings(spec, "selector", ".spec", &s.selector_line);
  s.cluster_ip = d.text(spec, "clusterIP", ".spec");
  for (const Node& p : d.seq(spec, "ports", ".spec")) {
    ServicePort port;
    port.name = Decoder::str(&p, "name");
    if (const Node* n = Decoder::child(&p, "port")) port.port = n->as_int().value_or(0);
    port.target_port = d.int_or_string(&p, "targetPort", ".spec.ports[]").value;
    port.protocol = Decoder::str(&p, "protocol");
    port.line = p.line();
    s.ports.push_back(port);
  }
  return s;
}

std::optional<PersistentVolumeClaim> as_persistent_volume_claim(const Document& doc) {
  if (!is_kind(doc, "PersistentVolumeClaim")) return std::nullopt;
  PersistentVolumeClaim c;
  Decoder d(&c.issues);
  const Node* spec = d.map(doc.root, "spec", "");
  c.storage_class_name = d.text(spec, "storageClassName", ".spec");
  c.access_modes = d.texts(spec, "accessModes", ".spec");
  c.volume_name = d.text(spec, "volumeName", ".spec");
  c.volume_mode = d.text(spec, "volumeMode", ".spec");
  const Node* requests = Decoder::child(Decoder::child(spec, "resources"), "requests");
  if (const Entry* e = Decoder::entry(requests, "storage")) c.storage = d.quantity(*e, ".spec.resources.requests");
  c.phase = d.text(Decoder::child(doc.root, "status"), "phase", ".status");
  return c;
}

std::optional<HorizontalPodAutoscaler> as_horizontal_pod_autoscaler(const Document& doc) {
  if (!is_kind(doc, "HorizontalPodAutoscaler")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  HorizontalPodAutoscaler h;
  const Node* spec = d.map(doc.root, "spec", "");
  const Node* ref = Decoder::child(spec, "scaleTargetRef");
  h.scale_target_ref = {Decoder::str(ref, "apiVersion"), Decoder::str(ref, "kind"), Decoder::str(ref, "name")};
  h.min_replicas = d.integer(spec, "minReplicas", ".spec");
  h.max_replicas = d.integer(spec, "maxReplicas", ".spec");
  for (const Node& m : d.seq(spec, "metrics", ".spec")) {
    MetricSpec ms;
    ms.type = Decoder::str(&m, "type");
    ms.line = m.line();
    // The source's key is the type with a lower-case first letter: resource, containerResource, pods, object, external.
    for (const char* key : {"resource", "containerResource", "pods", "object", "external"}) {
      const Node* src = Decoder::child(&m, key);
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

std::optional<PrometheusRule> as_prometheus_rule(const Document& doc) {
  if (!is_kind(doc, "PrometheusRule")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  PrometheusRule out;
  const Node* spec = d.map(doc.root, "spec", "");
  for (const Node& g : d.seq(spec, "groups", ".spec")) {
    PrometheusRuleGroup group;
    group.name = Decoder::str(&g, "name");
    group.interval = d.text(&g, "interval", ".spec.groups[]");
    group.line = g.line();
    for (const Node& r : d.seq(&g, "rules", ".spec.groups[]")) {
      PrometheusRuleEntry rule;
      rule.alert = d.text(&r, "alert", ".spec.groups[].rules[]");
      rule.record = d.text(&r, "record", ".spec.groups[].rules[]");
      if (const Entry* e = Decoder::entry(&r, "expr"); e != nullptr && e->value().is_scalar()) {
        rule.expr = Text{e->value().text(), e->key_line()};
      }
      rule.for_ = d.text(&r, "for", ".spec.groups[].rules[]");
      rule.labels = d.strings(&r, "labels", ".spec.groups[].rules[]");
      rule.annotations = d.strings(&r, "annotations", ".spec.groups[].rules[]");
      rule.line = r.line();
      group.rules.push_back(std::move(rule));
    }
    out.groups.push_back(std::move(group));
  }
  return out;
}

std::optional<ResourceClaim> as_resource_claim(const Document& doc) {
  if (!is_kind(doc, "ResourceClaim")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  ResourceClaim c;
  const Entry* se = Decoder::entry(doc.root, "spec");
  c.spec = decode_claim_spec(d, se != nullptr ? &se->value() : nullptr, ".spec", se != nullptr ? se->key_line() : 0);
  const Node* status = Decoder::child(doc.root, "status");
  c.allocation = Decoder::child(status, "allocation");
  c.allocated = c.allocation != nullptr;
  if (const Node* reserved = Decoder::child(status, "reservedFor")) {
    for (const Node& r : reserved->items()) c.reserved_for.push_back(Decoder::str(&r, "name"));
  }
  return c;
}

std::optional<ResourceClaimTemplate> as_resource_claim_template(const Document& doc) {
  if (!is_kind(doc, "ResourceClaimTemplate")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  ResourceClaimTemplate t;
  const Node* spec = Decoder::child(doc.root, "spec");
  if (const Entry* meta = Decoder::entry(spec, "metadata"))
    t.claim_metadata = decode_meta(&meta->value(), meta->key_line());
  const Entry* inner = Decoder::entry(spec, "spec");
  t.spec = decode_claim_spec(d, inner != nullptr ? &inner->value() : nullptr, ".spec.spec",
                             inner != nullptr ? inner->key_line() : 0);
  return t;
}

std::optional<DeviceClass> as_device_class(const Document& doc) {
  if (!is_kind(doc, "DeviceClass")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  DeviceClass c;
  const Node* spec = Decoder::child(doc.root, "spec");
  c.selectors = decode_selectors(d, spec, ".spec");
  c.extended_resource_name = d.text(spec, "extendedResourceName", ".spec");
  c.config = Decoder::child(spec, "config");
  return c;
}

std::optional<ResourceSlice> as_resource_slice(const Document& doc) {
  if (!is_kind(doc, "ResourceSlice")) return std::nullopt;
  ResourceSlice s;
  Decoder d(&s.issues);
  const Node* spec = d.map(doc.root, "spec", "");
  s.driver = d.text(spec, "driver", ".spec");
  s.node_name = d.text(spec, "nodeName", ".spec");
  s.all_nodes = d.boolean(spec, "allNodes", ".spec");
  if (const Node* pool = d.map(spec, "pool", ".spec")) {
    s.pool_name = d.text(pool, "name", ".spec.pool");
    s.pool_generation = d.integer(pool, "generation", ".spec.pool");
    s.pool_resource_slice_count = d.integer(pool, "resourceSliceCount", ".spec.pool");
  }
  size_t i = 0;
  for (const Node& dev : d.seq(spec, "devices", ".spec")) {
    const std::string path = fmt::format(".spec.devices[{}]", i++);
    Device out;
    out.name = Decoder::str(&dev, "name");
    out.line = dev.line();
    const Node* body = Decoder::child(&dev, "basic");  // v1beta1
    if (body == nullptr) body = &dev;
    if (const Node* attrs = Decoder::child(body, "attributes")) {
      for (const Entry& a : attrs->entries()) {
        DeviceAttribute attr;
        attr.line = a.key_line();
        for (const Entry& typed : a.value().entries()) {
          attr.type = typed.key();
          attr.value = &typed.value();
        }
        out.attributes[a.key()] = attr;
      }
    }
    if (const Node* cap = Decoder::child(body, "capacity")) {
      std::vector<QuantityMap::value_type> kv;
      for (const Entry& c : cap->entries()) {
        if (c.value().is_map()) {
          if (const Entry* v = Decoder::entry(&c.value(), "value")) {
            if (auto q = d.quantity(*v, fmt::format("{}.capacity.{}", path, c.key())))
              kv.emplace_back(c.key(), Field<Quantity>{*q, c.key_line()});
          }
        } else if (auto q = d.quantity(c, path + ".capacity")) {
          kv.emplace_back(c.key(), q);
        }
      }
      out.capacity.assign_last_wins(std::move(kv));
    }
    s.devices.push_back(std::move(out));
  }
  return s;
}

std::vector<Issue> quantity_issues(const Document& doc) {
  std::vector<Issue> all;
  if (auto v = as_pod(doc)) {
    all = std::move(v->issues);
  } else if (auto w = as_workload(doc)) {
    all = std::move(w->issues);
  } else if (auto j = as_job(doc)) {
    all = std::move(j->issues);
  } else if (auto c = as_cron_job(doc)) {
    all = std::move(c->issues);
  } else if (auto n = as_node(doc)) {
    all = std::move(n->issues);
  } else if (auto q = as_resource_quota(doc)) {
    all = std::move(q->issues);
  } else if (auto pvc = as_persistent_volume_claim(doc)) {
    all = std::move(pvc->issues);
  } else if (auto rs = as_resource_slice(doc)) {
    all = std::move(rs->issues);
  }
  std::erase_if(all, [](const Issue& i) { return !i.invalid_quantity; });
  std::stable_sort(all.begin(), all.end(), [](const Issue& a, const Issue& b) { return a.line < b.line; });
  return all;
}

}  // namespace kgpu::k8s
