// Objects to serve from the start: YAML (one or more documents) or JSON (an object, a List, or a
// sequence of objects), read with the bounds every kgpu parser has (size, depth, alias expansion).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "common/error.h"

namespace kgpu::apiserver {

// Parses `text` (named `source` in errors) into a list of objects; `List` kinds are flattened.
Result<std::vector<nlohmann::json>> parse_manifests(const std::string& text, const std::string& source);

// Rejects JSON nested deeper than `max_depth` before it is parsed (nlohmann's parser recurses).
bool json_depth_ok(std::string_view text, int max_depth);

}  // namespace kgpu::apiserver
