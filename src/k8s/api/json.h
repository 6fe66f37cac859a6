// The one set of readers for Kubernetes objects held as nlohmann::json (what the API client and
// the informers return): a value at a path of keys, its string, a string map, an annotation, a
// quantity. Every live reader of API objects goes through these or through the typed read model
// (k8s/api/objects.h); nobody walks the JSON with helpers of its own.
//
// Absent keys, values of another type and non-objects on the path all read as "absent"; nothing
// throws. Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <map>
#include <optional>
#include <string>

#include "k8s/quantity.h"

namespace kgpu::k8s::api {

using Path = std::initializer_list<const char*>;

// The value at `path` (object keys from `j`), or nullptr.
const nlohmann::json* find(const nlohmann::json& j, Path path);
// The value at `path`, or a null value (a static one) when absent.
const nlohmann::json& at(const nlohmann::json& j, Path path);
// The string at `path`, or "".
std::string text(const nlohmann::json& j, Path path);
// The string at `path`, or nullptr.
const std::string* string_at(const nlohmann::json& j, Path path);
// Whether `path` holds a value other than null (deletionTimestamp, ...).
bool present(const nlohmann::json& j, Path path);
// The boolean at `path`; `fallback` when absent or not a boolean.
bool flag(const nlohmann::json& j, Path path, bool fallback = false);
// The array at `path`, or an empty one (a static one).
const nlohmann::json& list(const nlohmann::json& j, Path path);
// The string entries of an object (labels, annotations, nodeSelector); others are skipped.
std::map<std::string, std::string> string_map(const nlohmann::json& j);
// metadata.annotations[key] when it is a string, else nullptr.
const std::string* annotation(const nlohmann::json& obj, const char* key);
// A quantity written as a string ("2", "40Gi") or a JSON number; nullopt for anything else.
std::optional<Quantity> quantity(const nlohmann::json& v);

}  // namespace kgpu::k8s::api
