// The Kubernetes API's matching rules over plain strings: a toleration against a taint, a node
// selector requirement against a label value. Header-only with no dependencies, so that the
// Kubernetes object views (kgpu_k8s) and the scheduler's model (kgpu_framework, which does not link
// kgpu_k8s) answer these questions with one implementation.
//
// Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kgpu::k8s {

// v1.Toleration.ToleratesTaint, with API validation's rule for an empty key:
// - a non-empty effect must equal the taint's ("" tolerates every effect);
// - an empty key requires operator Exists and then tolerates every taint (API validation rejects
//   an empty key with Equal, "operator must be Exists when `key` is empty"; such a toleration is
//   invalid and tolerates nothing here, where ToleratesTaint alone would compare values);
// - otherwise the keys must be equal, and Exists tolerates any value, Equal (or an empty
//   operator) only an equal one; any other operator tolerates nothing.
inline bool toleration_tolerates(std::string_view key, std::string_view op, std::string_view value,
                                 std::string_view effect, std::string_view taint_key, std::string_view taint_value,
                                 std::string_view taint_effect) {
  if (!effect.empty() && effect != taint_effect) return false;
  if (key.empty()) return op == "Exists";
  if (key != taint_key) return false;
  if (op.empty() || op == "Equal") return value == taint_value;
  return op == "Exists";
}

// Whether the scheduler's TaintToleration filter considers a taint of this effect (PreferNoSchedule
// only weighs in scoring).
inline bool taint_filters(std::string_view effect) { return effect == "NoSchedule" || effect == "NoExecute"; }

// A v1.NodeSelectorRequirement (`op` over `values`) against a node's label value (nullopt: the
// label is absent): In, NotIn, Exists, DoesNotExist, and Gt/Lt comparing one integer value; any
// other operator (or a malformed Gt/Lt) matches nothing. `Values` is any range of string-like
// elements comparable with std::string_view.
template <class Values>
bool node_requirement_holds(std::string_view op, const Values& values, std::optional<std::string_view> value) {
  const auto parse = [](std::string_view s, int64_t* out) {
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
  };
  const bool in = value && std::any_of(std::begin(values), std::end(values),
                                       [&](const auto& v) { return std::string_view(v) == *value; });
  if (op == "In") return in;
  if (op == "NotIn") return !in;
  if (op == "Exists") return value.has_value();
  if (op == "DoesNotExist") return !value.has_value();
  if (op == "Gt" || op == "Lt") {
    int64_t have = 0;
    int64_t want = 0;
    if (!value || std::size(values) != 1 || !parse(*value, &have) ||
        !parse(std::string_view(*std::begin(values)), &want))
      return false;
    return op == "Gt" ? have > want : have < want;
  }
  return false;
}

}  // namespace kgpu::k8s
