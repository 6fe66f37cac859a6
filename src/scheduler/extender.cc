#include "scheduler/extender.h"

#include <fmt/format.h>

#include "common/json_guard.h"

namespace kgpu::scheduler {

using nlohmann::json;

namespace {

Result<json> parse_body(std::string_view body, const char* what) {
  if (body.size() > kMaxExtenderBody)
    return fail(ErrorCode::kInvalidArgument, "{}: body of {} bytes is larger than the {} accepted", what, body.size(),
                kMaxExtenderBody);
  if (!json_depth_within(body, kMaxExtenderDepth))
    return fail(ErrorCode::kInvalidArgument, "{}: JSON nested deeper than {} levels", what, kMaxExtenderDepth);
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return fail(ErrorCode::kInvalidArgument, "{}: body is not JSON", what);
  if (!j.is_object()) return fail(ErrorCode::kInvalidArgument, "{}: body is not a JSON object", what);
  return j;
}

// A pod object: an object with metadata.name and metadata.uid strings.
Result<json> take_pod(json& j, const char* what) {
  const auto it = j.find("Pod");
  if (it == j.end() || !it->is_object())
    return fail(ErrorCode::kInvalidArgument, "{}: Pod: missing or not an object", what);
  const auto meta = it->find("metadata");
  if (meta == it->end() || !meta->is_object() || !meta->contains("name") || !(*meta)["name"].is_string())
    return fail(ErrorCode::kInvalidArgument, "{}: Pod.metadata.name: missing", what);
  return std::move(*it);
}

std::string str_or(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Result<ExtenderArgs> parse_extender_args(std::string_view body) {
  auto j = parse_body(body, "ExtenderArgs");
  if (!j) return std::unexpected(j.error());
  ExtenderArgs out;
  auto pod = take_pod(*j, "ExtenderArgs");
  if (!pod) return std::unexpected(pod.error());
  out.pod = std::move(*pod);
  const auto names = j->find("NodeNames");
  const auto nodes = j->find("Nodes");
  if (names != j->end() && names->is_array()) {
    out.names_only = true;
    if (names->size() > kMaxExtenderNodes)
      return fail(ErrorCode::kInvalidArgument, "ExtenderArgs: NodeNames: {} names, more than the {} accepted",
                  names->size(), kMaxExtenderNodes);
    out.node_names.reserve(names->size());
    for (size_t i = 0; i < names->size(); ++i) {
      if (!(*names)[i].is_string())
        return fail(ErrorCode::kInvalidArgument, "ExtenderArgs: NodeNames[{}]: not a string", i);
      out.node_names.push_back(std::move((*names)[i].get_ref<std::string&>()));  // the DOM is discarded
    }
    return out;
  }
  if (nodes != j->end() && nodes->is_object()) {
    const auto items = nodes->find("items");
    if (items == nodes->end() || items->is_null()) return out;
    if (!items->is_array()) return fail(ErrorCode::kInvalidArgument, "ExtenderArgs: Nodes.items: not a list");
    if (items->size() > kMaxExtenderNodes)
      return fail(ErrorCode::kInvalidArgument, "ExtenderArgs: Nodes.items: {} nodes, more than the {} accepted",
                  items->size(), kMaxExtenderNodes);
    for (size_t i = 0; i < items->size(); ++i) {
      json& n = (*items)[i];
      const auto meta = n.is_object() ? n.find("metadata") : n.end();
      if (meta == n.end() || !meta->is_object() || !meta->contains("name") || !(*meta)["name"].is_string())
        return fail(ErrorCode::kInvalidArgument, "ExtenderArgs: Nodes.items[{}].metadata.name: missing", i);
      out.node_names.push_back((*meta)["name"].get<std::string>());
      out.nodes.push_back(std::move(n));
    }
    return out;
  }
  if ((names != j->end() && !names->is_null()) || (nodes != j->end() && !nodes->is_null()))
    return fail(ErrorCode::kInvalidArgument, "ExtenderArgs: Nodes must be a NodeList or NodeNames a list");
  return out;  // neither: no candidates
}

std::string encode_filter_result(const FilterResult& r, const ExtenderArgs& args) {
  json out = json::object();
  if (args.names_only) {
    out["Nodes"] = nullptr;
    out["NodeNames"] = r.nodes;
  } else {
    json items = json::array();
    for (const auto& name : r.nodes) {
      for (size_t i = 0; i < args.node_names.size(); ++i) {
        if (args.node_names[i] == name && i < args.nodes.size()) {
          items.push_back(args.nodes[i]);
          break;
        }
      }
    }
    out["Nodes"] = json{{"metadata", json::object()}, {"items", std::move(items)}};
    out["NodeNames"] = nullptr;
  }
  out["FailedNodes"] = r.failed;
  out["FailedAndUnresolvableNodes"] = r.unresolvable;
  out["Error"] = r.error;
  return out.dump();
}

std::string encode_priorities(const std::vector<std::pair<std::string, int64_t>>& scores) {
  json out = json::array();
  for (const auto& [host, score] : scores) out.push_back(json{{"Host", host}, {"Score", score}});
  return out.dump();
}

Result<BindingArgs> parse_binding_args(std::string_view body) {
  auto j = parse_body(body, "ExtenderBindingArgs");
  if (!j) return std::unexpected(j.error());
  BindingArgs b{str_or(*j, "PodName"), str_or(*j, "PodNamespace"), str_or(*j, "PodUID"), str_or(*j, "Node")};
  for (auto [field, value] :
       {std::pair{"PodName", &b.pod_name}, std::pair{"PodNamespace", &b.pod_namespace}, std::pair{"Node", &b.node}}) {
    if (value->empty()) return fail(ErrorCode::kInvalidArgument, "ExtenderBindingArgs: {}: missing", field);
  }
  return b;
}

std::string encode_binding_result(const std::string& error) { return json{{"Error", error}}.dump(); }

Result<PreemptionArgs> parse_preemption_args(std::string_view body) {
  auto j = parse_body(body, "ExtenderPreemptionArgs");
  if (!j) return std::unexpected(j.error());
  PreemptionArgs out;
  auto pod = take_pod(*j, "ExtenderPreemptionArgs");
  if (!pod) return std::unexpected(pod.error());
  out.pod = std::move(*pod);
  // Victims.Pods are full pods; MetaVictims.Pods are {"UID": ...}.
  for (const char* field : {"NodeNameToVictims", "NodeNameToMetaVictims"}) {
    const auto m = j->find(field);
    if (m == j->end() || m->is_null()) continue;
    if (!m->is_object()) return fail(ErrorCode::kInvalidArgument, "ExtenderPreemptionArgs: {}: not a map", field);
    if (m->size() > kMaxExtenderNodes)
      return fail(ErrorCode::kInvalidArgument, "ExtenderPreemptionArgs: {}: more than {} nodes", field,
                  kMaxExtenderNodes);
    const bool meta = std::string_view(field) == "NodeNameToMetaVictims";
    for (const auto& [node, v] : m->items()) {
      const std::string path = fmt::format("ExtenderPreemptionArgs: {}[{}]", field, node);
      if (!v.is_object()) return fail(ErrorCode::kInvalidArgument, "{}: not an object", path);
      Victims victims;
      if (const auto n = v.find("NumPDBViolations"); n != v.end() && n->is_number_integer())
        victims.pdb_violations = n->get<int64_t>();
      const auto pods = v.find("Pods");
      if (pods != v.end() && !pods->is_null()) {
        if (!pods->is_array()) return fail(ErrorCode::kInvalidArgument, "{}.Pods: not a list", path);
        for (size_t i = 0; i < pods->size(); ++i) {
          const json& p = (*pods)[i];
          std::string uid;
          if (meta) {
            uid = p.is_object() ? str_or(p, "UID") : "";
          } else if (p.is_object() && p.contains("metadata") && p["metadata"].is_object()) {
            uid = str_or(p["metadata"], "uid");
          }
          if (uid.empty()) return fail(ErrorCode::kInvalidArgument, "{}.Pods[{}]: no UID", path, i);
          victims.uids.push_back(std::move(uid));
        }
      }
      out.victims[node] = std::move(victims);
    }
  }
  return out;
}

std::string encode_preemption_result(const std::map<std::string, Victims>& kept) {
  json m = json::object();
  for (const auto& [node, v] : kept) {
    json pods = json::array();
    for (const auto& uid : v.uids) pods.push_back(json{{"UID", uid}});
    m[node] = json{{"Pods", std::move(pods)}, {"NumPDBViolations", v.pdb_violations}};
  }
  return json{{"NodeNameToMetaVictims", std::move(m)}}.dump();
}

}  // namespace kgpu::scheduler
