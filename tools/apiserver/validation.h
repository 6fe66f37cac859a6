// What the stand-in checks and normalizes in request bodies, as kube-apiserver's decoder does:
// unknown fields (for `fieldValidation=Strict` / `Warn`) and quantities written as JSON numbers.
//
// Unknown fields are found at the top level of every built-in kind, in metadata, and for pods
// in the pod spec, its containers and their resources; deeper levels are not checked.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "resources.h"

namespace kgpu::apiserver {

// Dotted paths of the fields kube-apiserver would not know ("spec.containers[0].imag").
std::vector<std::string> unknown_fields(const ResourceInfo& res, const nlohmann::json& object);

// Quantities sent as numbers (`nvidia.com/gpu: 1` in YAML) become the strings the API serves: in
// pods, the pod templates of apps/v1 workloads and Jobs, nodes, quotas and limit ranges.
void normalize_quantities(const ResourceInfo& res, nlohmann::json& object);

}  // namespace kgpu::apiserver

namespace kgpu::apiserver {

// One field's problem, in kube-apiserver's field.Error terms.
struct FieldError {
  std::string field;   // "spec.devices[3].name"
  std::string type;    // the Status cause's reason: FieldValueTooMany, FieldValueRequired, ...
  std::string detail;  // what follows the type's words
  // "<field>: <type in words>: <detail>", as the API server writes it.
  std::string message() const;
};

// Semantic validation of the kinds whose rules kgpu's clients must meet: resource.k8s.io/v1
// ResourceSlice (pool, node selection, device count, names, attributes and capacities, taints;
// driver and nodeName immutable when `old` is given) and DeviceClass (selector count, extended
// resource name). Empty for other kinds.
std::vector<FieldError> invalid_fields(const ResourceInfo& res, const nlohmann::json& object,
                                       const nlohmann::json* old = nullptr);

}  // namespace kgpu::apiserver
