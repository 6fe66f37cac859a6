// The three PATCH content types kube-apiserver takes. JSON merge patch (RFC 7386) and JSON patch
// (RFC 6902) come from nlohmann::json; strategic merge patch is ours: like a merge patch, except
// that lists Kubernetes declares with a merge key (containers by name, a container's ports by
// containerPort and a Service's by port, conditions by type, ...) merge element by element, and the
// directives `$patch: replace|delete` and `$retainKeys` are honoured. Lists without a known merge key are replaced, as for merge patch.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace kgpu::apiserver {

enum class PatchType { kMerge, kStrategic, kJsonPatch, kApply };

// Maps a Content-Type to a patch type; false when the type is not a patch type.
bool patch_type(std::string_view content_type, PatchType& out);

// Applies `patch` to `target` in place. On failure returns false and sets `error` (the caller
// answers 422 or 400); `target` is then unspecified.
bool apply_patch(nlohmann::json& target, const nlohmann::json& patch, PatchType type, std::string& error);

}  // namespace kgpu::apiserver
