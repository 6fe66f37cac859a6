// Matching on decoded objects: label selectors, node selectors and required node affinity,
// tolerations against taints, conditions by type (k8s/objects.h). The API rules themselves are in
// k8s/predicates.h, shared with the scheduler.
#include <algorithm>

#include "k8s/objects.h"
#include "k8s/predicates.h"

namespace kgpu::k8s {

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

bool matches(const NodeSelectorTerm& term, const StringMap& node_labels, std::string_view node_name) {
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  for (const auto& r : term.match_expressions) {
    const auto it = node_labels.find(r.key);
    if (!node_requirement_holds(r.op, r.values, it == node_labels.end() ? std::nullopt : std::optional(it->second)))
      return false;
  }
  for (const auto& r : term.match_fields) {
    if (r.key != "metadata.name" || !node_requirement_holds(r.op, r.values, node_name)) return false;
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
  return toleration_tolerates(toleration.key, toleration.op, toleration.value, toleration.effect, taint.key,
                              taint.value, taint.effect);
}

bool tolerates(std::span<const Toleration> tolerations, const Taint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(), [&](const auto& t) { return tolerates(t, taint); });
}

const Taint* first_untolerated(std::span<const Taint> taints, std::span<const Toleration> tolerations) {
  for (const Taint& t : taints) {
    if (taint_filters(t.effect) && !tolerates(tolerations, t)) return &t;
  }
  return nullptr;
}

const Condition* find_condition(std::span<const Condition> conditions, std::string_view type) {
  for (const Condition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

}  // namespace kgpu::k8s
