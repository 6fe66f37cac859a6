// A YAML document read within bounds: check_yaml() (common/yaml_guard.h) first, then yaml-cpp's
// tree. Errors (kInvalidArgument) are "<source>:<line>: <what>".
// Thread safety: none needed (pure function).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "common/error.h"
#include "common/yaml_guard.h"

namespace kgpu {

Result<YAML::Node> load_yaml(std::string_view text, const std::string& source, const YamlLimits& limits);

}  // namespace kgpu
