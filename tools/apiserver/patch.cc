#include "patch.h"

#include <algorithm>

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

// The merge key of a list field, by the field's name (Kubernetes' patchMergeKey tags for the
// fields kgpu's objects carry).
const char* merge_key(std::string_view field) {
  struct Key {
    std::string_view field, key;
  };
  static constexpr Key kKeys[] = {
      {"containers", "name"},        {"initContainers", "name"}, {"ephemeralContainers", "name"},
      {"volumes", "name"},           {"volumeMounts", "mountPath"}, {"env", "name"},
      {"ports", "containerPort"},    {"conditions", "type"},     {"ownerReferences", "uid"},
      {"imagePullSecrets", "name"},  {"hostAliases", "ip"},      {"resourceClaims", "name"},
      {"containerStatuses", "name"}, {"initContainerStatuses", "name"}, {"addresses", "type"},
      {"taints", "key"},             {"volumeDevices", "devicePath"}, {"envFrom", ""},
  };
  for (const auto& k : kKeys) {
    if (k.field == field) return k.key.empty() ? nullptr : k.key.data();
  }
  return nullptr;
}

// The merge key of list `field` whose patch elements are `items`. `ports` is the one name two
// kinds of lists share: a container's merge by containerPort, a Service's by port.
const char* list_merge_key(std::string_view field, const json& items) {
  if (field == "ports" && !items.empty() && std::all_of(items.begin(), items.end(), [](const json& i) {
        return i.is_object() && !i.contains("containerPort") && i.contains("port");
      })) {
    return "port";
  }
  return merge_key(field);
}

constexpr int kMaxPatchDepth = 128;

bool strategic(json& target, const json& patch, int depth, std::string& error);

bool merge_list(json& target, const json& patch, const char* key, int depth, std::string& error) {
  if (!target.is_array()) target = json::array();
  for (const auto& item : patch) {
    if (!item.is_object() || !item.contains(key)) {
      error = std::string("strategic merge patch: list element without its merge key \"") + key + "\"";
      return false;
    }
    const json& id = item[key];
    auto it = std::find_if(target.begin(), target.end(),
                           [&](const json& t) { return t.is_object() && t.contains(key) && t[key] == id; });
    const auto directive = item.find("$patch");
    if (directive != item.end() && *directive == "delete") {
      if (it != target.end()) target.erase(it);
      continue;
    }
    if (it == target.end()) {
      json added = json::object();
      if (!strategic(added, item, depth + 1, error)) return false;
      target.push_back(std::move(added));
    } else if (!strategic(*it, item, depth + 1, error)) {
      return false;
    }
  }
  return true;
}

bool strategic(json& target, const json& patch, int depth, std::string& error) {
  if (depth > kMaxPatchDepth) {
    error = "strategic merge patch nested too deeply";
    return false;
  }
  if (!patch.is_object()) {
    target = patch;
    return true;
  }
  if (const auto d = patch.find("$patch"); d != patch.end() && *d == "replace") {
    target = patch;
    target.erase("$patch");
    return true;
  }
  if (!target.is_object()) target = json::object();
  if (const auto keep = patch.find("$retainKeys"); keep != patch.end() && keep->is_array()) {
    for (auto it = target.begin(); it != target.end();) {
      if (std::find(keep->begin(), keep->end(), it.key()) == keep->end()) {
        it = target.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [k, v] : patch.items()) {
    if (k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/")) continue;
    if (k.starts_with("$deleteFromPrimitiveList/")) {
      const auto field = k.substr(sizeof("$deleteFromPrimitiveList/") - 1);
      if (auto t = target.find(field); t != target.end() && t->is_array() && v.is_array()) {
        for (const auto& gone : v) t->erase(std::remove(t->begin(), t->end(), gone), t->end());
      }
      continue;
    }
    if (v.is_null()) {
      target.erase(k);
    } else if (v.is_object()) {
      if (!strategic(target[k], v, depth + 1, error)) return false;
    } else if (v.is_array() && list_merge_key(k, v) != nullptr) {
      if (!merge_list(target[k], v, list_merge_key(k, v), depth + 1, error)) return false;
    } else {
      target[k] = v;
    }
  }
  return true;
}

}  // namespace

bool patch_type(std::string_view content_type, PatchType& out) {
  const auto semi = content_type.find(';');
  const auto ct = content_type.substr(0, semi);
  if (ct == "application/merge-patch+json") {
    out = PatchType::kMerge;
  } else if (ct == "application/strategic-merge-patch+json") {
    out = PatchType::kStrategic;
  } else if (ct == "application/json-patch+json") {
    out = PatchType::kJsonPatch;
  } else if (ct == "application/apply-patch+yaml" || ct == "application/apply-patch+json") {
    out = PatchType::kApply;
  } else {
    return false;
  }
  return true;
}

bool apply_patch(json& target, const json& patch, PatchType type, std::string& error) {
  try {
    switch (type) {
      case PatchType::kMerge:
        if (!patch.is_object()) {
          error = "a merge patch must be a JSON object";
          return false;
        }
        target.merge_patch(patch);
        return true;
      case PatchType::kJsonPatch:
        if (!patch.is_array()) {
          error = "a JSON patch must be an array of operations";
          return false;
        }
        target = target.patch(patch);
        return true;
      case PatchType::kStrategic:
      case PatchType::kApply:  // server-side apply approximated by a strategic merge (no field ownership)
        if (!patch.is_object()) {
          error = "a strategic merge patch must be a JSON object";
          return false;
        }
        return strategic(target, patch, 0, error);
    }
  } catch (const json::exception& e) {
    error = e.what();
    return false;
  }
  return false;
}

}  // namespace kgpu::apiserver
