#include "validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <span>
#include <string_view>

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

using Names = std::span<const std::string_view>;

bool in(Names names, std::string_view s) { return std::find(names.begin(), names.end(), s) != names.end(); }
bool in(std::initializer_list<std::string_view> names, std::string_view s) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

constexpr std::string_view kCommonTop[] = {"apiVersion", "kind", "metadata", "spec", "status"};
constexpr std::string_view kMeta[] = {"name",  "generateName",     "namespace",   "selfLink",   "uid",
                         "resourceVersion",  "generation",  "creationTimestamp", "deletionTimestamp",
                         "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
                         "managedFields"};
constexpr std::string_view kPodSpec[] = {
    "activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers", "dnsConfig", "dnsPolicy",
    "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC", "hostNetwork", "hostPID", "hostUsers",
    "hostname", "hostnameOverride", "imagePullSecrets", "initContainers", "nodeName", "nodeSelector", "os", "overhead",
    "preemptionPolicy", "priority", "priorityClassName", "readinessGates", "resourceClaims", "resources",
    "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates", "securityContext", "serviceAccount",
    "serviceAccountName", "setHostnameAsFQDN", "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds",
    "tolerations", "topologySpreadConstraints", "volumes", "workloadRef"};
constexpr std::string_view kContainer[] = {
    "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe", "name", "ports",
    "readinessProbe", "resizePolicy", "resources", "restartPolicy", "restartPolicyRules", "securityContext",
    "startupProbe", "stdin", "stdinOnce", "terminationMessagePath", "terminationMessagePolicy", "tty", "volumeDevices",
    "volumeMounts", "workingDir"};
constexpr std::string_view kResources[] = {"claims", "limits", "requests"};
constexpr std::string_view kEvent[] = {"involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
                          "type", "eventTime", "series", "action", "related", "reportingComponent",
                          "reportingInstance", "regarding", "note", "reportingController", "deprecatedSource",
                          "deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount"};

bool known_top(const std::string& kind, std::string_view f) {
  if (in(kCommonTop, f)) return true;
  if (kind == "ConfigMap") return in({"data", "binaryData", "immutable"}, f);
  if (kind == "Secret") return in({"data", "stringData", "type", "immutable"}, f);
  if (kind == "ServiceAccount") return in({"secrets", "imagePullSecrets", "automountServiceAccountToken"}, f);
  if (kind == "Event") return in(kEvent, f);
  return false;
}

void check_object(const json& o, Names known, const std::string& prefix, std::vector<std::string>& out) {
  if (!o.is_object()) return;
  for (const auto& [k, v] : o.items()) {
    if (!in(known, k)) out.push_back(prefix + k);
  }
}

std::string quantity_text(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  const double d = v.get<double>();
  if (d == std::floor(d) && std::fabs(d) < 1e15) return fmt::format("{}", static_cast<int64_t>(d));
  return fmt::format("{}m", static_cast<int64_t>(std::llround(d * 1000)));
}

void normalize_map(json* m) {
  if (m == nullptr || !m->is_object()) return;
  for (auto& [k, v] : m->items()) {
    if (v.is_number()) v = quantity_text(v);
  }
}

json* child(json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(key);
  return it == o.end() ? nullptr : &*it;
}

}  // namespace

std::vector<std::string> unknown_fields(const ResourceInfo& res, const json& object) {
  std::vector<std::string> out;
  if (!res.builtin || !object.is_object()) return out;
  for (const auto& [k, v] : object.items()) {
    if (!known_top(res.kind, k)) out.push_back(k);
  }
  if (const auto m = object.find("metadata"); m != object.end()) check_object(*m, kMeta, "metadata.", out);
  if (res.kind == "Pod" && res.group.empty()) {
    const auto spec = object.find("spec");
    if (spec == object.end() || !spec->is_object()) return out;
    check_object(*spec, kPodSpec, "spec.", out);
    for (const char* list : {"containers", "initContainers"}) {
      const auto cs = spec->find(list);
      if (cs == spec->end() || !cs->is_array()) continue;
      for (size_t i = 0; i < cs->size(); ++i) {
        const std::string p = fmt::format("spec.{}[{}].", list, i);
        check_object((*cs)[i], kContainer, p, out);
        if ((*cs)[i].is_object() && (*cs)[i].contains("resources")) {
          check_object((*cs)[i]["resources"], kResources, p + "resources.", out);
        }
      }
    }
  }
  return out;
}

namespace {

void normalize_pod_spec(json* spec) {
  if (spec == nullptr) return;
  normalize_map(child(*spec, "overhead"));
  if (json* r = child(*spec, "resources")) {
    normalize_map(child(*r, "limits"));
    normalize_map(child(*r, "requests"));
  }
  for (const char* list : {"containers", "initContainers"}) {
    json* cs = child(*spec, list);
    if (cs == nullptr || !cs->is_array()) continue;
    for (auto& c : *cs) {
      if (json* r = child(c, "resources")) {
        normalize_map(child(*r, "limits"));
        normalize_map(child(*r, "requests"));
      }
    }
  }
}

}  // namespace

void normalize_quantities(const ResourceInfo& res, json& object) {
  if (res.group == "apps" || (res.group == "batch" && res.kind == "Job")) {  // the pod template's spec
    json* spec = child(object, "spec");
    json* tmpl = spec != nullptr ? child(*spec, "template") : nullptr;
    normalize_pod_spec(tmpl != nullptr ? child(*tmpl, "spec") : nullptr);
    return;
  }
  if (!res.group.empty()) return;
  if (res.kind == "Pod") {
    normalize_pod_spec(child(object, "spec"));
  } else if (res.kind == "Node") {
    if (json* st = child(object, "status")) {
      normalize_map(child(*st, "capacity"));
      normalize_map(child(*st, "allocatable"));
    }
  } else if (res.kind == "ResourceQuota") {
    if (json* spec = child(object, "spec")) normalize_map(child(*spec, "hard"));
    if (json* st = child(object, "status")) {
      normalize_map(child(*st, "hard"));
      normalize_map(child(*st, "used"));
    }
  } else if (res.kind == "LimitRange") {
    json* spec = child(object, "spec");
    json* limits = spec != nullptr ? child(*spec, "limits") : nullptr;
    if (limits == nullptr || !limits->is_array()) return;
    for (auto& l : *limits) {
      for (const char* f : {"max", "min", "default", "defaultRequest", "maxLimitRequestRatio"}) normalize_map(child(l, f));
    }
  }
}

}  // namespace kgpu::apiserver

namespace kgpu::apiserver {

namespace {

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool alnum(char c) { return lower_alnum(c) || (c >= 'A' && c <= 'Z'); }

// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63.
bool dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63 || !lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return lower_alnum(c) || c == '-'; });
}

// RFC 1123 subdomain: dot-separated labels, at most `max` in all.
bool dns_subdomain(std::string_view s, size_t max = 253) {
  if (s.empty() || s.size() > max) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!dns_label(s.substr(start, dot == std::string_view::npos ? dot : dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// A C identifier of at most 32 characters (the name part of a device attribute or capacity).
bool c_identifier(std::string_view s) {
  if (s.empty() || s.size() > 32 || !(alnum(s.front()) || s.front() == '_') || (s.front() >= '0' && s.front() <= '9')) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return alnum(c) || c == '_'; });
}

// A label name part / label value: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63.
bool label_part(std::string_view s, bool allow_empty) {
  if (s.empty()) return allow_empty;
  if (s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A qualified name "[prefix/]name": the prefix a DNS subdomain, the name a label name part.
bool label_key(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return label_part(s, false);
  return dns_subdomain(s.substr(0, slash)) && label_part(s.substr(slash + 1), false);
}

// A device attribute or capacity name: "[domain/]identifier" (domain at most 63).
bool attribute_name(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return c_identifier(s);
  return dns_subdomain(s.substr(0, slash), 63) && c_identifier(s.substr(slash + 1));
}

// Semantic version 2.0.0: MAJOR.MINOR.PATCH[-pre][+build], numbers without leading zeros.
bool semver(std::string_view s) {
  const size_t end = s.find_first_of("-+");
  const std::string_view core = s.substr(0, end);
  int parts = 0;
  size_t start = 0;
  while (true) {
    const size_t dot = core.find('.', start);
    const std::string_view n = core.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (n.empty() || (n.size() > 1 && n[0] == '0') ||
        !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    ++parts;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (parts != 3) return false;
  if (end == std::string_view::npos) return true;
  const std::string_view rest = s.substr(end + 1);
  return !rest.empty() &&
         std::all_of(rest.begin(), rest.end(), [](char c) { return alnum(c) || c == '-' || c == '.' || c == '+'; });
}

constexpr std::string_view kDns1123Label =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
constexpr std::string_view kDns1123Subdomain =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

std::string shown(const json& v) { return v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump(); }

struct Errors {
  std::vector<FieldError> list;
  void required(std::string f, std::string detail = {}) {
    list.push_back({std::move(f), "FieldValueRequired", std::move(detail)});
  }
  void invalid(std::string f, const json& v, std::string_view detail) {
    list.push_back({std::move(f), "FieldValueInvalid", fmt::format("{}: {}", shown(v), detail)});
  }
  void too_many(std::string f, size_t have, size_t max) {
    list.push_back({std::move(f), "FieldValueTooMany", fmt::format("{}: must have at most {} items", have, max)});
  }
  void too_long(std::string f, size_t max) {
    list.push_back({std::move(f), "FieldValueTooLong", fmt::format("may not be more than {} bytes", max)});
  }
  void duplicate(std::string f, const json& v) { list.push_back({std::move(f), "FieldValueDuplicate", shown(v)}); }
  void unsupported(std::string f, const json& v, std::string_view supported) {
    list.push_back(
        {std::move(f), "FieldValueNotSupported", fmt::format("{}: supported values: {}", shown(v), supported)});
  }
};

const json* field(const json& o, const char* k) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(k);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string str(const json* v) { return v != nullptr && v->is_string() ? v->get<std::string>() : std::string(); }

void validate_taints(const json& taints, const std::string& path, Errors& e) {
  if (!taints.is_array()) return;
  if (taints.size() > 4) e.too_many(path, taints.size(), 4);
  for (size_t i = 0; i < taints.size(); ++i) {
    const json& t = taints[i];
    const std::string p = fmt::format("{}[{}]", path, i);
    const std::string key = str(field(t, "key"));
    if (key.empty()) {
      e.required(p + ".key");
    } else if (!label_key(key)) {
      e.invalid(p + ".key", key,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character");
    }
    if (const json* v = field(t, "value"); v != nullptr && !label_part(str(v), true)) {
      e.invalid(p + ".value", *v,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', "
                "'_' or '.', and must start and end with an alphanumeric character");
    }
    const json* effect = field(t, "effect");
    if (effect == nullptr) {
      e.required(p + ".effect");
    } else if (!in({"NoSchedule", "NoExecute", "None"}, str(effect))) {
      e.unsupported(p + ".effect", *effect, "\"NoExecute\", \"NoSchedule\", \"None\"");
    }
  }
}

// An attribute or capacity name: "[domain/]identifier".
void check_attribute_name(const std::string& name, const std::string& path, Errors& e) {
  if (attribute_name(name)) return;
  e.invalid(path, name,
            "must be a C identifier of at most 32 characters, optionally prefixed by a DNS subdomain and '/'");
}

void validate_device(const json& d, const std::string& p, std::set<std::string>& names, Errors& e) {
  const json* name = field(d, "name");
  if (name == nullptr || str(name).empty()) {
    e.required(p + ".name");
  } else if (!dns_label(str(name))) {
    e.invalid(p + ".name", *name, kDns1123Label);
  } else if (!names.insert(str(name)).second) {
    e.duplicate(p + ".name", *name);
  }
  size_t count = 0;
  if (const json* attrs = field(d, "attributes"); attrs != nullptr && attrs->is_object()) {
    count += attrs->size();
    for (const auto& [k, v] : attrs->items()) {
      const std::string ap = fmt::format("{}.attributes[{}]", p, k);
      check_attribute_name(k, ap, e);
      size_t set = 0;
      for (const char* kind : {"int", "bool", "string", "version"}) set += field(v, kind) != nullptr ? 1 : 0;
      if (set == 0) {
        e.required(ap, "exactly one value must be specified");
      } else if (set > 1) {
        e.invalid(ap, v, "exactly one value must be specified");
      }
      if (const json* s = field(v, "string"); s != nullptr && str(s).size() > 64) e.too_long(ap + ".string", 64);
      if (const json* s = field(v, "version")) {
        if (str(s).size() > 64) {
          e.too_long(ap + ".version", 64);
        } else if (!semver(str(s))) {
          e.invalid(ap + ".version", *s, "must be a string compatible with semver.org spec 2.0.0");
        }
      }
    }
  }
  if (const json* cap = field(d, "capacity"); cap != nullptr && cap->is_object()) {
    count += cap->size();
    for (const auto& [k, v] : cap->items()) {
      const std::string cp = fmt::format("{}.capacity[{}]", p, k);
      check_attribute_name(k, cp, e);
      if (field(v, "value") == nullptr) e.required(cp + ".value");
    }
  }
  if (count > 32) {
    e.list.push_back({p, "FieldValueTooMany",
                      fmt::format("{}: the total number of attributes and capacities must not exceed 32", count)});
  }
  if (const json* t = field(d, "taints")) validate_taints(*t, p + ".taints", e);
}

void validate_resource_slice(const json& o, const json* old, Errors& e) {
  const json* spec = field(o, "spec");
  if (spec == nullptr || !spec->is_object()) {
    e.required("spec");
    return;
  }
  const json* driver = field(*spec, "driver");
  if (driver == nullptr || str(driver).empty()) {
    e.required("spec.driver");
  } else if (str(driver).size() > 63) {
    e.too_long("spec.driver", 63);
  } else if (!dns_subdomain(str(driver))) {
    e.invalid("spec.driver", *driver, kDns1123Subdomain);
  }
  const json* pool = field(*spec, "pool");
  if (pool == nullptr) {
    e.required("spec.pool");
  } else {
    const json* name = field(*pool, "name");
    if (name == nullptr || str(name).empty()) {
      e.required("spec.pool.name");
    } else if (str(name).size() > 253) {
      e.too_long("spec.pool.name", 253);
    } else {
      const std::string n = str(name);
      size_t start = 0;
      while (true) {
        const size_t slash = n.find('/', start);
        if (!dns_subdomain(std::string_view(n).substr(start, slash == std::string::npos ? slash : slash - start))) {
          e.invalid("spec.pool.name", *name, "each part of a pool name must be a DNS subdomain");
          break;
        }
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
    }
    const json* gen = field(*pool, "generation");
    if (gen != nullptr && (!gen->is_number_integer() || gen->get<int64_t>() < 0)) {
      e.invalid("spec.pool.generation", *gen, "must be greater than or equal to 0");
    }
    const json* count = field(*pool, "resourceSliceCount");
    if (count == nullptr || !count->is_number_integer() || count->get<int64_t>() <= 0) {
      e.invalid("spec.pool.resourceSliceCount", count != nullptr ? *count : json(0), "must be greater than zero");
    }
  }
  // Exactly one way of saying which nodes see the pool.
  const json* node_name = field(*spec, "nodeName");
  const json* all_nodes = field(*spec, "allNodes");
  const json* per_device = field(*spec, "perDeviceNodeSelection");
  const int ways = (node_name != nullptr && !str(node_name).empty()) + (field(*spec, "nodeSelector") != nullptr) +
                   (all_nodes != nullptr && all_nodes->is_boolean() && all_nodes->get<bool>()) +
                   (per_device != nullptr && per_device->is_boolean() && per_device->get<bool>());
  constexpr std::string_view kOneOf =
      "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
  if (ways == 0) {
    e.required("spec", std::string(kOneOf));
  } else if (ways > 1) {
    e.invalid("spec", "{`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`}",
              std::string(kOneOf) + ", but multiple fields are set");
  }
  if (node_name != nullptr && !str(node_name).empty() && !dns_subdomain(str(node_name))) {
    e.invalid("spec.nodeName", *node_name, kDns1123Subdomain);
  }
  if (const json* devices = field(*spec, "devices"); devices != nullptr && devices->is_array()) {
    bool tainted = false;
    for (const auto& d : *devices) tainted |= field(d, "taints") != nullptr && !(*field(d, "taints")).empty();
    tainted |= std::any_of(devices->begin(), devices->end(),
                           [](const json& d) { return field(d, "consumesCounters") != nullptr; });
    const size_t max = tainted ? 64 : 128;
    if (devices->size() > max) e.too_many("spec.devices", devices->size(), max);
    std::set<std::string> names;
    for (size_t i = 0; i < devices->size(); ++i)
      validate_device((*devices)[i], fmt::format("spec.devices[{}]", i), names, e);
  }
  if (old != nullptr) {
    const json* old_spec = field(*old, "spec");
    for (const char* f : {"driver", "nodeName"}) {
      const json* was = old_spec != nullptr ? field(*old_spec, f) : nullptr;
      const json* now = field(*spec, f);
      if ((was == nullptr) != (now == nullptr) || (was != nullptr && *was != *now)) {
        e.invalid(std::string("spec.") + f, now != nullptr ? *now : json(""), "field is immutable");
      }
    }
  }
}

void validate_device_class(const json& o, Errors& e) {
  const json* spec = field(o, "spec");
  if (spec == nullptr) return;
  if (const json* sel = field(*spec, "selectors"); sel != nullptr && sel->is_array() && sel->size() > 32) {
    e.too_many("spec.selectors", sel->size(), 32);
  }
  if (const json* ern = field(*spec, "extendedResourceName")) {
    const std::string n = str(ern);
    if (!label_key(n) || n.find('/') == std::string::npos || n.starts_with("kubernetes.io/") ||
        n.starts_with("requests.")) {
      e.invalid("spec.extendedResourceName", *ern, "must be a valid extended resource name");
    }
  }
}

constexpr std::pair<std::string_view, std::string_view> kTypeWords[] = {
    {"FieldValueRequired", "Required value"},   {"FieldValueInvalid", "Invalid value"},
    {"FieldValueTooMany", "Too many"},          {"FieldValueTooLong", "Too long"},
    {"FieldValueDuplicate", "Duplicate value"}, {"FieldValueNotSupported", "Unsupported value"}};

}  // namespace

std::string FieldError::message() const {
  std::string_view words = type;
  for (const auto& [t, w] : kTypeWords) {
    if (t == type) words = w;
  }
  return detail.empty() ? fmt::format("{}: {}", field, words) : fmt::format("{}: {}: {}", field, words, detail);
}

std::vector<FieldError> invalid_fields(const ResourceInfo& res, const json& object, const json* old) {
  Errors e;
  if (!res.builtin || res.group != "resource.k8s.io" || !object.is_object()) return e.list;
  if (res.kind == "ResourceSlice") validate_resource_slice(object, old, e);
  if (res.kind == "DeviceClass") validate_device_class(object, e);
  return e.list;
}

}  // namespace kgpu::apiserver
