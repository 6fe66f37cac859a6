// A YAML document read within bounds: check_yaml() (common/yaml_guard.h) first, then yaml-cpp's
// tree. Errors (kInvalidArgument) are "<source>:<line>: <what>".
// Thread safety: none needed (pure function).
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "common/error.h"
#include "common/yaml_guard.h"

namespace kgpu {

Result<YAML::Node> load_yaml(std::string_view text, const std::string& source, const YamlLimits& limits);

// "<source>:<line>: <field>" for a node of such a document ("<source>: <field>" without a mark).
std::string yaml_where(const std::string& source, const YAML::Node& n, const std::string& field);

// The kInvalidArgument error "<source>:<line>: <field>: <message>".
template <typename... Args>
std::unexpected<Error> yaml_error(const std::string& source, const YAML::Node& n, const std::string& field,
                                  fmt::format_string<Args...> f, Args&&... args) {
  return std::unexpected(Error{ErrorCode::kInvalidArgument,
                               yaml_where(source, n, field) + ": " + fmt::format(f, std::forward<Args>(args)...)});
}

// Errors about the nodes of one document of `source`: where() and bad() as yaml_where() and
// yaml_error(). Parsers derive their own field readers from it.
struct YamlReader {
  std::string source;
  std::string where(const YAML::Node& n, const std::string& field) const { return yaml_where(source, n, field); }
  template <typename... Args>
  std::unexpected<Error> bad(const YAML::Node& n, const std::string& field, fmt::format_string<Args...> f,
                             Args&&... args) const {
    return yaml_error(source, n, field, f, std::forward<Args>(args)...);
  }
};

}  // namespace kgpu
