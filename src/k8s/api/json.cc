#include "k8s/api/json.h"

#include <cmath>

namespace kgpu::k8s::api {

using nlohmann::json;

const json* find(const json& j, Path path) {
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object()) return nullptr;
    const auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

const json& at(const json& j, Path path) {
  static const json kNull;
  const json* v = find(j, path);
  return v != nullptr ? *v : kNull;
}

const std::string* string_at(const json& j, Path path) {
  const json* v = find(j, path);
  return v != nullptr && v->is_string() ? v->get_ptr<const std::string*>() : nullptr;
}

std::string text(const json& j, Path path) {
  const std::string* s = string_at(j, path);
  return s != nullptr ? *s : std::string();
}

bool present(const json& j, Path path) {
  const json* v = find(j, path);
  return v != nullptr && !v->is_null();
}

bool flag(const json& j, Path path, bool fallback) {
  const json* v = find(j, path);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

const json& list(const json& j, Path path) {
  static const json kEmpty = json::array();
  const json* v = find(j, path);
  return v != nullptr && v->is_array() ? *v : kEmpty;
}

std::map<std::string, std::string> string_map(const json& j) {
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items())
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  return out;
}

const std::string* annotation(const json& obj, const char* key) { return string_at(obj, {"metadata", "annotations", key}); }

std::optional<Quantity> quantity(const json& v) {
  Result<Quantity> q = fail(ErrorCode::kInvalidArgument, "not a quantity");
  if (v.is_string()) {
    q = Quantity::parse(v.get_ref<const std::string&>());
  } else if (v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()))) {
    q = Quantity::parse(v.dump());
  }
  if (!q) return std::nullopt;
  return *q;
}

}  // namespace kgpu::k8s::api
