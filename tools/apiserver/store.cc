#include "store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <random>

#include "common/timestamp.h"
#include "validation.h"

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

std::string key_of(const std::string& ns, const std::string& name) { return ns + "/" + name; }

const json& meta(const json& o) {
  static const json empty = json::object();
  const auto it = o.find("metadata");
  return it != o.end() && it->is_object() ? *it : empty;
}

std::string meta_str(const json& o, const char* field) {
  const json& m = meta(o);
  const auto it = m.find(field);
  return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool has_finalizers(const json& o) {
  const json& m = meta(o);
  const auto it = m.find("finalizers");
  return it != m.end() && it->is_array() && !it->empty();
}

// An RFC 1123 subdomain, as metadata.name must be for most kinds.
bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 253) return false;
  if (!std::isalnum(static_cast<unsigned char>(n.front())) || !std::isalnum(static_cast<unsigned char>(n.back()))) {
    return false;
  }
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

std::string random_suffix(size_t n) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";  // the API server's: no vowels
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  for (size_t i = 0; i < n; ++i) out += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return out;
}

// 422 Invalid for the fields `errors` names, in kube-apiserver's words and causes.
Answer invalid_answer(const ResourceInfo& res, const std::string& name, const std::vector<FieldError>& errors) {
  std::vector<std::string> texts;
  json causes = json::array();
  for (const auto& e : errors) {
    texts.push_back(e.message());
    causes.push_back(json{{"reason", e.type}, {"message", e.message()}, {"field", e.field}});
  }
  const std::string group_kind = res.group.empty() ? res.kind : res.kind + "." + res.group;
  const std::string listed = texts.size() == 1 ? texts[0] : fmt::format("[{}]", fmt::join(texts, ", "));
  Answer a =
      status_answer(422, "Invalid", fmt::format("{} \"{}\" is invalid: {}", group_kind, name, listed), &res, name);
  a.body["details"]["causes"] = std::move(causes);
  return a;
}

std::string conflict_message(const ResourceInfo& res, const std::string& name, std::string_view why) {
  return fmt::format("Operation cannot be fulfilled on {} \"{}\": {}", res.qualified(), name, why);
}

std::string precondition_message(std::string_view field, std::string_view want, std::string_view have) {
  return fmt::format("Precondition failed: {} in precondition: {}, {} in object meta: {}", field, want, field, have);
}

Answer not_found(const ResourceInfo& res, const std::string& name) {
  return status_answer(404, "NotFound", fmt::format("{} \"{}\" not found", res.qualified(), name), &res, name);
}

constexpr std::string_view kModified =
    "the object has been modified; please apply your changes to the latest version and try again";

// Everything but metadata and status: a change here bumps metadata.generation.
json spec_part(const json& o) {
  json out = o;
  out.erase("metadata");
  out.erase("status");
  return out;
}

}  // namespace

std::string random_uid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t a = rng();
  const uint64_t b = rng();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     0x8000 | ((b >> 48) & 0x3fff), b & 0xffffffffffffULL);
}

Answer status_answer(int code, std::string_view reason, std::string message, const ResourceInfo* res,
                     std::string_view name) {
  json details = json::object();
  if (!name.empty()) details["name"] = std::string(name);
  if (res != nullptr) {
    if (!res->group.empty()) details["group"] = res->group;
    details["kind"] = res->plural;
  }
  json body{{"kind", "Status"},      {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", code < 300 ? "Success" : "Failure"}, {"message", std::move(message)},
            {"reason", std::string(reason)}, {"code", code}};
  if (!details.empty()) body["details"] = std::move(details);
  if (reason.empty()) body.erase("reason");
  return Answer{code, std::move(body)};
}

Store::Store(size_t history_limit) : history_limit_(std::max<size_t>(history_limit, 1)) {}

const Store::Objects* Store::objects_of(const ResourceInfo& res) const {
  const auto it = objects_.find(&res);
  return it == objects_.end() ? nullptr : &it->second;
}

void Store::record(const ResourceInfo& res, const std::string& type, std::shared_ptr<json> object,
                   std::shared_ptr<const json> previous) {
  ++rv_;
  (*object)["metadata"]["resourceVersion"] = std::to_string(rv_);
  history_.push_back(Change{rv_, &res, type, object, std::move(previous)});
  while (history_.size() > history_limit_) {
    compacted_ = history_.front().rv;
    history_.pop_front();
  }
  changed_.notify_all();
}

bool Store::namespace_usable(const std::string& ns, Answer& error) const {
  for (const auto& [r, objs] : objects_) {
    if (!(r->group.empty() && r->plural == "namespaces")) continue;
    const auto it = objs.find(key_of("", ns));
    if (it == objs.end()) break;
    if (!meta_str(*it->second, "deletionTimestamp").empty()) {
      error = status_answer(403, "Forbidden",
                            fmt::format("unable to create new content in namespace {} because it is being terminated", ns));
      return false;
    }
    return true;
  }
  static const ResourceInfo kNamespaces{"", "v1", "namespaces", "Namespace", false, true, {}, {}, {}};
  error = status_answer(404, "NotFound", fmt::format("namespaces \"{}\" not found", ns), &kNamespaces, ns);
  return false;
}

Answer Store::create(const ResourceInfo& res, const std::string& ns, json body, bool dry_run, bool restore) {
  std::lock_guard lock(mu_);
  return create_locked(res, ns, std::move(body), dry_run, restore);
}

Answer Store::create_locked(const ResourceInfo& res, const std::string& ns, json body, bool dry_run, bool restore) {
  if (!body.is_object()) return status_answer(400, "BadRequest", "the body of the request is not a JSON object");
  if (!body.contains("apiVersion")) body["apiVersion"] = res.api_version();
  if (!body.contains("kind")) body["kind"] = res.kind;
  if (body["apiVersion"] != res.api_version() || body["kind"] != res.kind) {
    return status_answer(400, "BadRequest",
                         fmt::format("the API version in the data ({}) does not match the expected API version ({})",
                                     body["apiVersion"].dump(), res.api_version()));
  }
  json& m = body["metadata"];
  if (!m.is_object()) m = json::object();
  std::string name = meta_str(body, "name");
  if (name.empty()) {
    const std::string prefix = meta_str(body, "generateName");
    if (prefix.empty()) {
      return status_answer(422, "Invalid",
                           fmt::format("{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                                       res.kind), &res);
    }
    name = prefix + random_suffix(5);
    m["name"] = name;
  }
  if (!valid_name(name)) {
    return status_answer(
        422, "Invalid",
        fmt::format("{} \"{}\" is invalid: metadata.name: Invalid value: \"{}\": a lowercase RFC 1123 subdomain must "
                    "consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
                    "alphanumeric character (e.g. 'example.com', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                    res.kind, name, name),
        &res, name);
  }
  if (res.namespaced) {
    const std::string body_ns = meta_str(body, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      return status_answer(400, "BadRequest",
                           "the namespace of the provided object does not match the namespace sent on the request");
    }
    m["namespace"] = ns;
  } else {
    m.erase("namespace");
  }
  if (res.namespaced) {
    Answer error;
    if (!namespace_usable(ns, error)) return error;
  }
  Objects& objs = objects(res);
  const std::string key = key_of(res.namespaced ? ns : "", name);
  if (objs.contains(key)) {
    return status_answer(409, "AlreadyExists", fmt::format("{} \"{}\" already exists", res.qualified(), name), &res, name);
  }
  if (!restore || !m.contains("uid") || !m["uid"].is_string()) m["uid"] = random_uid();
  if (!restore || !m.contains("creationTimestamp") || !m["creationTimestamp"].is_string()) {
    m["creationTimestamp"] = format_rfc3339(std::chrono::system_clock::now());
  }
  m["generation"] = 1;
  m.erase("resourceVersion");
  m.erase("deletionTimestamp");
  if (res.group.empty() && res.plural == "pods") {
    json& st = body["status"];
    if (!st.is_object()) st = json::object();
    if (!st.contains("phase")) st["phase"] = "Pending";
    if (!body["spec"].is_object()) body["spec"] = json::object();
    if (!body["spec"].contains("schedulerName")) body["spec"]["schedulerName"] = "default-scheduler";
  }
  if (res.group.empty() && res.plural == "namespaces") {
    body["status"] = json{{"phase", "Active"}};
    if (!body["spec"].is_object()) body["spec"] = json::object();
    if (!body["spec"].contains("finalizers")) body["spec"]["finalizers"] = json::array({"kubernetes"});
  }
  normalize_quantities(res, body);
  if (const auto errors = invalid_fields(res, body); !errors.empty()) return invalid_answer(res, name, errors);
  auto obj = std::make_shared<json>(std::move(body));
  if (dry_run) {
    (*obj)["metadata"]["resourceVersion"] = std::to_string(rv_);
    return Answer{201, *obj};
  }
  objs[key] = obj;
  record(res, "ADDED", obj, nullptr);
  return Answer{201, *obj};
}

Answer Store::get(const ResourceInfo& res, const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  if (const Objects* objs = objects_of(res)) {
    if (const auto it = objs->find(key_of(res.namespaced ? ns : "", name)); it != objs->end()) {
      return Answer{200, *it->second};
    }
  }
  return not_found(res, name);
}

Answer Store::list(const ResourceInfo& res, const ListOptions& options) const {
  std::lock_guard lock(mu_);
  std::string after;
  if (!options.continue_token.empty()) {
    // Token: "<rv>|<last key>". A token older than the history kept is expired, as etcd compaction
    // expires the API server's.
    const auto bar = options.continue_token.find('|');
    uint64_t token_rv = 0;
    try {
      token_rv = std::stoull(options.continue_token.substr(0, bar));
    } catch (const std::exception&) {
      return status_answer(400, "BadRequest", "continue key is not valid: illegal base64 data");
    }
    if (bar == std::string::npos) return status_answer(400, "BadRequest", "continue key is not valid");
    if (token_rv < compacted_) {
      return status_answer(410, "Expired",
                           "The provided continue parameter is too old to display a consistent list result. You can "
                           "start a new list without the continue parameter.");
    }
    after = options.continue_token.substr(bar + 1);
  }
  json items = json::array();
  std::string last;
  bool more = false;
  int64_t remaining = -1;
  if (const Objects* objs = objects_of(res)) {
    // Keys are "<namespace>/<name>": one namespace is one contiguous range of the map.
    const std::string prefix = options.ns.empty() ? std::string() : options.ns + "/";
    auto it = !after.empty() ? objs->upper_bound(after) : objs->lower_bound(prefix);
    for (; it != objs->end() && it->first.starts_with(prefix); ++it) {
      const json& o = *it->second;
      if (!matches_labels(options.labels, o) || !matches_fields(options.fields, o)) continue;
      if (options.limit > 0 && static_cast<int64_t>(items.size()) >= options.limit) {
        more = true;
        break;
      }
      items.push_back(o);
      last = it->first;
    }
    // Like kube-apiserver, the count of what is left is given only for an unfiltered list (it
    // costs a walk of the rest, not a match of every object on every page).
    if (more && options.ns.empty() && options.labels.empty() && options.fields.empty()) {
      remaining = std::distance(it, objs->end());
    }
  }
  json lmeta{{"resourceVersion", std::to_string(rv_)}};
  if (more) {
    lmeta["continue"] = fmt::format("{}|{}", rv_, last);
    if (remaining >= 0) lmeta["remainingItemCount"] = remaining;
  }
  return Answer{200, json{{"kind", res.kind + "List"},
                          {"apiVersion", res.api_version()},
                          {"metadata", std::move(lmeta)},
                          {"items", std::move(items)}}};
}

Answer Store::write_update(const ResourceInfo& res, const std::string& key, std::shared_ptr<const json> old,
                           json updated, Part part, bool dry_run) {
  const std::string name = meta_str(*old, "name");
  if (!updated.is_object()) return status_answer(400, "BadRequest", "the body of the request is not a JSON object");
  if (!updated.contains("apiVersion")) updated["apiVersion"] = res.api_version();
  if (!updated.contains("kind")) updated["kind"] = res.kind;
  json& m = updated["metadata"];
  if (!m.is_object()) m = json::object();
  if (m.contains("name") && m["name"] != name) {
    return status_answer(400, "BadRequest",
                         fmt::format("the name of the object ({}) does not match the name on the URL ({})",
                                     m["name"].is_string() ? m["name"].get<std::string>() : m["name"].dump(), name));
  }
  const std::string want_rv = meta_str(updated, "resourceVersion");
  if (!want_rv.empty() && want_rv != meta_str(*old, "resourceVersion")) {
    return status_answer(409, "Conflict", conflict_message(res, name, kModified), &res, name);
  }
  if (const std::string uid = meta_str(updated, "uid"); !uid.empty() && uid != meta_str(*old, "uid")) {
    return status_answer(409, "Conflict",
                         conflict_message(res, name, precondition_message("UID", uid, meta_str(*old, "uid"))),
                         &res, name);
  }
  // Fields the server owns.
  for (const char* f : {"name", "namespace", "uid", "creationTimestamp", "generation", "deletionTimestamp",
                        "deletionGracePeriodSeconds"}) {
    if (const auto it = meta(*old).find(f); it != meta(*old).end()) {
      m[f] = *it;
    } else {
      m.erase(f);
    }
  }
  if (res.has_status) {
    if (part == Part::kStatus) {
      json merged = *old;
      if (updated.contains("status")) {
        merged["status"] = updated["status"];
      } else {
        merged.erase("status");
      }
      // The status subresource may still change labels and annotations? No: only status.
      updated = std::move(merged);
    } else if (old->contains("status")) {
      updated["status"] = (*old)["status"];
    } else {
      updated.erase("status");
    }
  }
  if (spec_part(updated) != spec_part(*old)) {
    updated["metadata"]["generation"] = meta(*old).value("generation", 1) + 1;
  }
  normalize_quantities(res, updated);
  if (const auto errors = invalid_fields(res, updated, old.get()); !errors.empty()) {
    return invalid_answer(res, name, errors);
  }
  const bool deleting = !meta_str(*old, "deletionTimestamp").empty();
  auto obj = std::make_shared<json>(std::move(updated));
  if (dry_run) return Answer{200, *obj};
  Objects& objs = objects(res);
  if (deleting && !has_finalizers(*obj)) {
    objs.erase(key);
    record(res, "DELETED", obj, old);
    return Answer{200, *obj};
  }
  objs[key] = obj;
  record(res, "MODIFIED", obj, old);
  return Answer{200, *obj};
}

Answer Store::update(const ResourceInfo& res, const std::string& ns, const std::string& name, json body, Part part,
                     bool dry_run) {
  std::lock_guard lock(mu_);
  Objects& objs = objects(res);
  const std::string key = key_of(res.namespaced ? ns : "", name);
  const auto it = objs.find(key);
  if (it == objs.end()) return not_found(res, name);
  return write_update(res, key, it->second, std::move(body), part, dry_run);
}

Answer Store::patch(const ResourceInfo& res, const std::string& ns, const std::string& name, const json& patch,
                    PatchType type, Part part, bool dry_run) {
  std::lock_guard lock(mu_);
  Objects& objs = objects(res);
  const std::string key = key_of(res.namespaced ? ns : "", name);
  const auto it = objs.find(key);
  if (it == objs.end() && type == PatchType::kApply && part == Part::kMain) {
    // Server-side apply creates what is missing: the applied configuration is the new object.
    json created = json::object();
    std::string error;
    if (!apply_patch(created, patch, type, error)) return status_answer(422, "Invalid", error, &res, name);
    if (!created.is_object()) return status_answer(400, "BadRequest", "the applied configuration is not an object");
    if (!created["metadata"].is_object()) created["metadata"] = json::object();
    json& m = created["metadata"];
    if (!m.contains("name")) m["name"] = name;
    if (m["name"] != name) {
      return status_answer(400, "BadRequest",
                           fmt::format("the name of the object ({}) does not match the name on the URL ({})",
                                       m["name"].is_string() ? m["name"].get<std::string>() : m["name"].dump(), name));
    }
    m.erase("generateName");
    return create_locked(res, ns, std::move(created), dry_run, false);
  }
  if (it == objs.end()) return not_found(res, name);
  json target = *it->second;
  std::string error;
  if (!apply_patch(target, patch, type, error)) return status_answer(422, "Invalid", error, &res, name);
  // A patch carries a resourceVersion only when the client asks for optimistic concurrency.
  if (meta_str(target, "resourceVersion") == meta_str(*it->second, "resourceVersion")) {
    target["metadata"].erase("resourceVersion");
  }
  return write_update(res, key, it->second, std::move(target), part, dry_run);
}

Answer Store::finish_delete(const ResourceInfo& res, const std::string& key, std::shared_ptr<const json> old) {
  Objects& objs = objects(res);
  auto gone = std::make_shared<json>(*old);
  objs.erase(key);
  record(res, "DELETED", gone, old);
  // Deleting a namespace deletes its contents.
  if (res.group.empty() && res.plural == "namespaces") {
    const std::string ns = meta_str(*old, "name");
    for (auto& [r, list] : objects_) {
      if (!r->namespaced) continue;
      for (auto it = list.begin(); it != list.end();) {
        if (meta_str(*it->second, "namespace") == ns) {
          auto obj = std::make_shared<json>(*it->second);
          auto prev = it->second;
          it = list.erase(it);
          record(*r, "DELETED", obj, prev);
        } else {
          ++it;
        }
      }
    }
  }
  return Answer{200, *gone};
}

namespace {

// kube-apiserver's grace period for deleting `pod`: 0 for a pod never scheduled or already finished,
// else the request's gracePeriodSeconds or the pod's terminationGracePeriodSeconds (30 by default).
int64_t pod_grace_seconds(const json& pod, const json& options) {
  const auto field = [&](const char* part, const char* name) -> const json* {
    const auto p = pod.find(part);
    if (p == pod.end() || !p->is_object()) return nullptr;
    const auto f = p->find(name);
    return f == p->end() ? nullptr : &*f;
  };
  const json* node = field("spec", "nodeName");
  const json* phase = field("status", "phase");
  if (node == nullptr || !node->is_string() || node->get<std::string>().empty()) return 0;
  if (phase != nullptr && phase->is_string() && (*phase == "Succeeded" || *phase == "Failed")) return 0;
  int64_t grace = 30;
  if (const json* g = field("spec", "terminationGracePeriodSeconds"); g != nullptr && g->is_number_integer())
    grace = g->get<int64_t>();
  if (options.is_object()) {
    if (const auto g = options.find("gracePeriodSeconds"); g != options.end() && g->is_number_integer())
      grace = g->get<int64_t>();
  }
  return std::max<int64_t>(grace, 0);
}

}  // namespace

Answer Store::remove(const ResourceInfo& res, const std::string& ns, const std::string& name, const json& options,
                     bool dry_run) {
  std::lock_guard lock(mu_);
  Objects& objs = objects(res);
  const std::string key = key_of(res.namespaced ? ns : "", name);
  const auto it = objs.find(key);
  if (it == objs.end()) return not_found(res, name);
  const auto old = it->second;
  if (options.is_object()) {
    if (const auto pre = options.find("preconditions"); pre != options.end() && pre->is_object()) {
      if (const auto uid = pre->find("uid"); uid != pre->end() && uid->is_string() && *uid != meta_str(*old, "uid")) {
        return status_answer(409, "Conflict",
                             conflict_message(res, name,
                                              precondition_message("UID", uid->get<std::string>(), meta_str(*old, "uid"))),
                             &res, name);
      }
      if (const auto rv = pre->find("resourceVersion");
          rv != pre->end() && rv->is_string() && *rv != meta_str(*old, "resourceVersion")) {
        return status_answer(409, "Conflict",
                             conflict_message(res, name,
                                              precondition_message("ResourceVersion", rv->get<std::string>(),
                                                                   meta_str(*old, "resourceVersion"))),
                             &res, name);
      }
    }
  }
  if (dry_run) return Answer{200, *old};
  // Pods are deleted gracefully, as kube-apiserver does: a MODIFIED that marks them
  // (deletionTimestamp, deletionGracePeriodSeconds) comes before the DELETED. The stand-in has no
  // kubelet to wait for, so a pod goes at once unless a finalizer holds it, like any object.
  const bool pod = res.group.empty() && res.plural == "pods";
  if (!pod && !has_finalizers(*old)) return finish_delete(res, key, old);
  if (!meta_str(*old, "deletionTimestamp").empty()) return Answer{200, *old};  // a finalizer holds it already
  const int64_t grace = pod ? pod_grace_seconds(*old, options) : 0;
  auto obj = std::make_shared<json>(*old);
  (*obj)["metadata"]["deletionTimestamp"] = format_rfc3339(std::chrono::system_clock::now() + std::chrono::seconds(grace));
  (*obj)["metadata"]["deletionGracePeriodSeconds"] = grace;
  if (res.group.empty() && res.plural == "namespaces") (*obj)["status"]["phase"] = "Terminating";
  objs[key] = obj;
  record(res, "MODIFIED", obj, old);
  if (has_finalizers(*obj)) return Answer{200, *obj};
  return finish_delete(res, key, obj);
}

Answer Store::bind(const ResourceInfo& pods, const std::string& ns, const std::string& name, const json& binding) {
  if (!binding.is_object()) return status_answer(400, "BadRequest", "the body of the request is not a JSON object");
  const auto target = binding.find("target");
  if (target == binding.end() || !target->is_object() || !target->contains("name") || !(*target)["name"].is_string() ||
      (*target)["name"].get<std::string>().empty()) {
    return status_answer(422, "Invalid",
                         fmt::format("Binding.core \"{}\" is invalid: target.name: Required value", name));
  }
  const std::string node = (*target)["name"];
  std::lock_guard lock(mu_);
  Objects& objs = objects(pods);
  const std::string key = key_of(ns, name);
  const auto it = objs.find(key);
  if (it == objs.end()) {
    return status_answer(404, "NotFound", fmt::format("pods \"{}\" not found", name), &pods, name);
  }
  const auto old = it->second;
  static const ResourceInfo kBinding{"", "v1", "pods/binding", "Binding", true, false, {}, {}, {}};
  const std::string uid = meta_str(binding, "uid");
  if (!uid.empty() && uid != meta_str(*old, "uid")) {
    return status_answer(409, "Conflict",
                         conflict_message(kBinding, name, precondition_message("UID", uid, meta_str(*old, "uid"))),
                         &kBinding, name);
  }
  if (!meta_str(*old, "deletionTimestamp").empty()) {
    return status_answer(409, "Conflict", conflict_message(kBinding, name, fmt::format("pod {} is being deleted, cannot be assigned to a host", name)),
                         &kBinding, name);
  }
  const json& spec = (*old)["spec"];
  if (const auto n = spec.find("nodeName"); n != spec.end() && n->is_string() && !n->get<std::string>().empty()) {
    return status_answer(409, "Conflict",
                         conflict_message(kBinding, name,
                                          fmt::format("pod {} is already assigned to node \"{}\"", name,
                                                      n->get<std::string>())),
                         &kBinding, name);
  }
  if (const auto g = spec.find("schedulingGates"); g != spec.end() && g->is_array() && !g->empty()) {
    return status_answer(409, "Conflict",
                         conflict_message(kBinding, name, fmt::format("pod {} has non-empty .spec.schedulingGates", name)),
                         &kBinding, name);
  }
  auto obj = std::make_shared<json>(*old);
  (*obj)["spec"]["nodeName"] = node;
  if (const auto m = binding.find("metadata"); m != binding.end() && m->is_object()) {
    if (const auto a = m->find("annotations"); a != m->end() && a->is_object()) {
      for (const auto& [k, v] : a->items()) (*obj)["metadata"]["annotations"][k] = v;
    }
  }
  json& conditions = (*obj)["status"]["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  const json scheduled{{"type", "PodScheduled"}, {"status", "True"}, {"lastProbeTime", nullptr},
                       {"lastTransitionTime", format_rfc3339(std::chrono::system_clock::now())}};
  auto c = std::find_if(conditions.begin(), conditions.end(), [](const json& x) { return x.value("type", "") == "PodScheduled"; });
  if (c == conditions.end()) {
    conditions.push_back(scheduled);
  } else {
    *c = scheduled;
  }
  objs[key] = obj;
  record(pods, "MODIFIED", obj, old);
  return status_answer(201, "", "");
}

Store::WatchResult Store::changes_after(const ResourceInfo& res, uint64_t& start, std::chrono::milliseconds wait,
                                        std::vector<Change>& out, const std::function<bool()>& stop) const {
  std::unique_lock lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    if (stop && stop()) return WatchResult::kStopped;
    if (start < compacted_) return WatchResult::kExpired;
    // History is ordered by rv; the first change after `start`.
    auto it = std::upper_bound(history_.begin(), history_.end(), start,
                               [](uint64_t rv, const Change& c) { return rv < c.rv; });
    bool any = false;
    for (; it != history_.end(); ++it) {
      if (it->res == &res) {
        out.push_back(*it);
        any = true;
      }
      start = it->rv;
    }
    if (any) return WatchResult::kOk;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (stop && stop()) return WatchResult::kStopped;
      return start < compacted_ ? WatchResult::kExpired : WatchResult::kOk;
    }
  }
}

std::vector<std::shared_ptr<const json>> Store::snapshot(const ResourceInfo& res, const std::string& ns,
                                                         uint64_t& rv) const {
  std::lock_guard lock(mu_);
  rv = rv_;
  std::vector<std::shared_ptr<const json>> out;
  if (const Objects* objs = objects_of(res)) {
    const std::string prefix = ns.empty() ? std::string() : ns + "/";
    for (auto it = objs->lower_bound(prefix); it != objs->end() && it->first.starts_with(prefix); ++it) {
      out.push_back(it->second);
    }
  }
  return out;
}

uint64_t Store::resource_version() const {
  std::lock_guard lock(mu_);
  return rv_;
}

uint64_t Store::oldest_watchable() const {
  std::lock_guard lock(mu_);
  return compacted_;
}

void Store::compact() {
  std::lock_guard lock(mu_);
  history_.clear();
  compacted_ = rv_;
  changed_.notify_all();
}

void Store::wake_all() const {
  std::lock_guard lock(mu_);
  changed_.notify_all();
}

}  // namespace kgpu::apiserver
