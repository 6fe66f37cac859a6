#include "manifest.h"

#include <yaml-cpp/yaml.h>

#include <regex>

#include "common/json_guard.h"
#include "common/yaml_guard.h"

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

constexpr int kMaxManifestDepth = 64;

json scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat("[-+]?([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+");
  if (s.size() < 20 && std::regex_match(s, kInt)) return std::stoll(s);
  if (s.size() < 40 && std::regex_match(s, kFloat)) return std::stod(s);
  return s;
}

json to_json(const YAML::Node& n, int depth) {
  if (depth > kMaxManifestDepth) throw std::runtime_error("nested too deeply");
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = to_json(kv.second, depth + 1);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : n) out.push_back(to_json(item, depth + 1));
      return out;
    }
    case YAML::NodeType::Scalar:
      return scalar(n);
    default:
      return nullptr;
  }
}

void flatten(json doc, std::vector<json>& out) {
  if (doc.is_array()) {
    for (auto& d : doc) flatten(std::move(d), out);
  } else if (doc.is_object() && doc.value("kind", "").ends_with("List") && doc.contains("items")) {
    for (auto& d : doc["items"]) flatten(std::move(d), out);
  } else if (doc.is_object()) {
    out.push_back(std::move(doc));
  }
}

}  // namespace

bool json_depth_ok(std::string_view text, int max_depth) { return json_depth_within(text, max_depth); }

Result<std::vector<json>> parse_manifests(const std::string& text, const std::string& source) {
  std::vector<json> out;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    if (!json_depth_ok(text, kMaxManifestDepth)) return fail(ErrorCode::kInvalidArgument, "{}: nested deeper than {}", source, kMaxManifestDepth);
    try {
      flatten(json::parse(text), out);
    } catch (const json::exception& e) {
      return fail(ErrorCode::kInvalidArgument, "{}: {}", source, e.what());
    }
    return out;
  }
  YamlLimits limits;
  limits.max_bytes = 64 << 20;
  limits.max_nodes = 5'000'000;
  limits.max_depth = kMaxManifestDepth;
  if (auto ok = check_yaml(text, source, limits); !ok) return std::unexpected(ok.error());
  try {
    for (const auto& doc : YAML::LoadAll(text)) flatten(to_json(doc, 0), out);
  } catch (const std::exception& e) {
    return fail(ErrorCode::kInvalidArgument, "{}: {}", source, e.what());
  }
  return out;
}

}  // namespace kgpu::apiserver
