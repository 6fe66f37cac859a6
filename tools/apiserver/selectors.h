// Label and field selectors as the API server parses them from `labelSelector` / `fieldSelector`.
//
// Labels: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma = AND.
// Fields: `path=v`, `path==v`, `path!=v`, comma = AND; the path must be one the resource supports.
// Parsing never throws: a malformed selector is an error message (the server answers 400).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kgpu::apiserver {

struct Requirement {
  enum class Op { kEq, kNotEq, kIn, kNotIn, kExists, kNotExists };
  std::string key;
  Op op = Op::kEq;
  std::vector<std::string> values;
};

struct Selector {
  std::vector<Requirement> requirements;
  bool empty() const { return requirements.empty(); }
};

// Parses a label selector; on error returns nullopt and sets `error`.
std::optional<Selector> parse_label_selector(std::string_view text, std::string& error);
// Parses a field selector (only =, ==, !=); `allowed` are the paths besides metadata.name and
// metadata.namespace. On error returns nullopt and sets `error` (kube-apiserver's wording for an
// unsupported field: `field label not supported: <path>`).
std::optional<Selector> parse_field_selector(std::string_view text, const std::vector<std::string>& allowed,
                                             std::string& error);

bool matches_labels(const Selector& s, const nlohmann::json& object);
bool matches_fields(const Selector& s, const nlohmann::json& object);

// The value a field selector compares for `path` ("" when absent; booleans as "true"/"false").
std::string field_value(const nlohmann::json& object, std::string_view path);

}  // namespace kgpu::apiserver
