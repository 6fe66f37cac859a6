#include "scheduler/extender.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "common/json_guard.h"
#include "k8s/api/json.h"

namespace kgpu::scheduler {

using nlohmann::json;

namespace {

Result<void> within_size(std::string_view body, const char* what) {
  if (body.size() > kMaxExtenderBody)
    return fail(ErrorCode::kInvalidArgument, "{}: body of {} bytes is larger than the {} accepted", what, body.size(),
                kMaxExtenderBody);
  return {};
}

// Where and why `body` (already refused by a parser) is not JSON: "at byte N: <reason>", the reason
// bounded so that a huge token is not echoed back. Only on the error path; a SAX pass that keeps
// nothing, so neither size nor depth costs memory.
std::string syntax_error(std::string_view body, std::string_view otherwise = "not a single JSON value") {
  struct Sink : nlohmann::json_sax<json> {
    std::string error;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
      std::string detail = e.what();
      if (detail.size() > 240) detail = detail.substr(0, 240) + "...";
      error = fmt::format("at byte {}: {}", position, detail);
      return false;
    }
  } sink;
  json::sax_parse(body, &sink);
  return sink.error.empty() ? std::string(otherwise) : sink.error;
}

Result<json> parse_body(std::string_view body, const char* what) {
  if (auto ok = within_size(body, what); !ok) return std::unexpected(ok.error());
  if (!json_depth_within(body, kMaxExtenderDepth))
    return fail(ErrorCode::kInvalidArgument, "{}: JSON nested deeper than {} levels", what, kMaxExtenderDepth);
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return fail(ErrorCode::kInvalidArgument, "{}: body is not JSON ({})", what, syntax_error(body));
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


}  // namespace

void ExtenderArgs::set_node_names(const std::vector<std::string_view>& names) {
  size_t total = 0;
  for (const auto n : names) total += n.size();
  auto buffer = std::make_unique<char[]>(std::max<size_t>(total, 1));
  std::vector<std::string_view> views;
  views.reserve(names.size());
  char* at = buffer.get();
  for (const auto n : names) {
    std::copy(n.begin(), n.end(), at);
    views.emplace_back(at, n.size());
    at += n.size();
  }
  names_buffer_ = std::move(buffer);
  node_names = std::move(views);
}

// ExtenderArgs is the one request of every scheduling decision, and with NodeNames it carries every
// candidate's name (100 kB at 5,000 nodes): it is parsed with simdjson, and only the pod (and, in the
// rare Nodes form, each node) becomes an nlohmann::json for the rest of the scheduler.
namespace {

namespace sj = simdjson;

// Bodies up to this size are parsed by the thread's parser, which keeps its buffers (a parser is
// not thread-safe; each HTTP worker keeps one); larger ones (full Node objects) by a parser of their
// own, freed after the call, so that one large request does not pin its memory in every worker.
constexpr size_t kReusedParserBytes = 4u << 20;

// The reused parser's first buffers: enough for 5,000 names (100 kB); parse() grows them to a
// larger body's size (up to kReusedParserBytes), and they are kept for the thread's next request.
constexpr size_t kReusedParserStartBytes = 128u << 10;

sj::dom::parser make_parser(size_t capacity) {
  sj::dom::parser p(kMaxExtenderBody);
  if (p.allocate(capacity, kMaxExtenderDepth) != sj::SUCCESS) {
    // Out of memory now: parse() tries again, and its error is the request's.
  }
  return p;
}

// An element as nlohmann::json (its minified text parsed again: pods and nodes are small).
json to_nlohmann(sj::dom::element e) { return json::parse(sj::minify(e), nullptr, false); }

}  // namespace

Result<ExtenderArgs> parse_extender_args(std::string_view body) {
  constexpr const char* what = "ExtenderArgs";
  if (auto ok = within_size(body, what); !ok) return std::unexpected(ok.error());
  thread_local sj::dom::parser reused = make_parser(kReusedParserStartBytes);
  sj::dom::parser large = body.size() > kReusedParserBytes ? make_parser(body.size()) : sj::dom::parser(0);
  sj::dom::parser& parser = body.size() > kReusedParserBytes ? large : reused;
  sj::dom::element root;
  if (const auto error = parser.parse(body.data(), body.size()).get(root); error != sj::SUCCESS) {
    if (error == sj::DEPTH_ERROR)
      return fail(ErrorCode::kInvalidArgument, "{}: JSON nested deeper than {} levels", what, kMaxExtenderDepth);
    return fail(ErrorCode::kInvalidArgument, "{}: body is not JSON ({})", what, syntax_error(body, sj::error_message(error)));
  }
  sj::dom::object top;
  if (root.get_object().get(top) != sj::SUCCESS)
    return fail(ErrorCode::kInvalidArgument, "{}: body is not a JSON object", what);
  ExtenderArgs out;
  sj::dom::element pod;
  if (top.at_key("Pod").get(pod) != sj::SUCCESS || !pod.is_object())
    return fail(ErrorCode::kInvalidArgument, "{}: Pod: missing or not an object", what);
  if (sj::dom::element name; pod.at_key("metadata").at_key("name").get(name) != sj::SUCCESS || !name.is_string())
    return fail(ErrorCode::kInvalidArgument, "{}: Pod.metadata.name: missing", what);
  out.pod = to_nlohmann(pod);
  sj::dom::element names, nodes;
  const bool has_names = top.at_key("NodeNames").get(names) == sj::SUCCESS;
  const bool has_nodes = top.at_key("Nodes").get(nodes) == sj::SUCCESS;
  if (has_names && names.is_array()) {
    out.names_only = true;
    const sj::dom::array list = names.get_array().value_unsafe();
    if (list.size() > kMaxExtenderNodes)
      return fail(ErrorCode::kInvalidArgument, "{}: NodeNames: {} names, more than the {} accepted", what, list.size(),
                  kMaxExtenderNodes);
    std::vector<std::string_view> found;  // into the parser's buffer until set_node_names copies them
    found.reserve(list.size());
    size_t i = 0;
    for (sj::dom::element e : list) {
      std::string_view name;
      if (e.get_string().get(name) != sj::SUCCESS)
        return fail(ErrorCode::kInvalidArgument, "{}: NodeNames[{}]: not a string", what, i);
      found.push_back(name);
      ++i;
    }
    out.set_node_names(found);
    return out;
  }
  if (has_nodes && nodes.is_object()) {
    sj::dom::element items;
    if (nodes.at_key("items").get(items) != sj::SUCCESS || items.is_null()) return out;
    if (!items.is_array()) return fail(ErrorCode::kInvalidArgument, "{}: Nodes.items: not a list", what);
    const sj::dom::array list = items.get_array().value_unsafe();
    if (list.size() > kMaxExtenderNodes)
      return fail(ErrorCode::kInvalidArgument, "{}: Nodes.items: {} nodes, more than the {} accepted", what,
                  list.size(), kMaxExtenderNodes);
    std::vector<std::string_view> found;
    size_t i = 0;
    for (sj::dom::element n : list) {
      sj::dom::element name;
      if (!n.is_object() || n.at_key("metadata").at_key("name").get(name) != sj::SUCCESS || !name.is_string())
        return fail(ErrorCode::kInvalidArgument, "{}: Nodes.items[{}].metadata.name: missing", what, i);
      found.push_back(name.get_string().value_unsafe());
      out.nodes.push_back(to_nlohmann(n));
      ++i;
    }
    out.set_node_names(found);
    return out;
  }
  if ((has_names && !names.is_null()) || (has_nodes && !nodes.is_null()))
    return fail(ErrorCode::kInvalidArgument, "{}: Nodes must be a NodeList or NodeNames a list", what);
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
  for (const char* field : {"PodName", "PodNamespace", "PodUID", "Node"}) {
    const auto v = j->find(field);
    if (v != j->end() && !v->is_string() && !v->is_null())
      return fail(ErrorCode::kInvalidArgument, "ExtenderBindingArgs: {}: a {}, not a string", field, v->type_name());
  }
  BindingArgs b{k8s::api::text(*j, {"PodName"}), k8s::api::text(*j, {"PodNamespace"}), k8s::api::text(*j, {"PodUID"}), k8s::api::text(*j, {"Node"})};
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
            uid = p.is_object() ? k8s::api::text(p, {"UID"}) : "";
          } else if (p.is_object() && p.contains("metadata") && p["metadata"].is_object()) {
            uid = k8s::api::text(p["metadata"], {"uid"});
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
