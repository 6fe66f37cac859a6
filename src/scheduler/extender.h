// kube-scheduler's extender protocol (k8s.io/kube-scheduler/extender/v1), as JSON on the wire.
//
// The request types carry no JSON tags in Go, so kube-scheduler sends Go's field names
// ("Pod", "Nodes", "NodeNames", "PodUID"...); embedded Pods and Nodes are ordinary Kubernetes JSON.
// Replies use the same capitalised names (Go's decoder would accept any case).
//
// Parsers bound what they accept (body size, JSON depth, node and victim counts) and say which
// field is wrong; they never throw.
// Thread safety: plain functions.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace kgpu::scheduler {

inline constexpr size_t kMaxExtenderBody = 64u << 20;  // 5,000 full Node objects fit
inline constexpr size_t kMaxExtenderNodes = 50'000;
inline constexpr int kMaxExtenderDepth = 64;
inline constexpr int kMaxExtenderPriority = 10;  // extenderv1.MaxExtenderPriority

// ExtenderArgs: the pod and the candidate nodes, as full objects ("Nodes", nodeCacheCapable false)
// or as names ("NodeNames", nodeCacheCapable true).
//
// The names are views into one buffer the args own (one allocation per request rather than one per
// name: 5,000 names arrive with every decision). The views stay valid while the args live, moves
// included; the args cannot be copied.
struct ExtenderArgs {
  ExtenderArgs() = default;
  ExtenderArgs(ExtenderArgs&&) = default;
  ExtenderArgs& operator=(ExtenderArgs&&) = default;
  ExtenderArgs(const ExtenderArgs&) = delete;
  ExtenderArgs& operator=(const ExtenderArgs&) = delete;

  // Replaces the names (tests, and the Nodes form).
  void set_node_names(const std::vector<std::string_view>& names);

  nlohmann::json pod;
  std::vector<std::string_view> node_names;  // in the order received, either way
  bool names_only = false;                   // NodeNames was sent
  std::vector<nlohmann::json> nodes;         // the objects when Nodes was sent (same order as node_names)

 private:
  std::unique_ptr<char[]> names_buffer_;  // the bytes node_names point into (stable across moves)
};
Result<ExtenderArgs> parse_extender_args(std::string_view body);

// ExtenderFilterResult. The chosen nodes are answered in the form they came in (objects for
// Nodes, names for NodeNames).
struct FilterResult {
  std::vector<std::string> nodes;  // a subset of the input
  std::map<std::string, std::string> failed;
  std::map<std::string, std::string> unresolvable;  // preemption cannot help there
  std::string error;
};
std::string encode_filter_result(const FilterResult& r, const ExtenderArgs& args);

// HostPriorityList.
std::string encode_priorities(const std::vector<std::pair<std::string, int64_t>>& scores);

// ExtenderBindingArgs / ExtenderBindingResult.
struct BindingArgs {
  std::string pod_name, pod_namespace, pod_uid, node;
};
Result<BindingArgs> parse_binding_args(std::string_view body);
std::string encode_binding_result(const std::string& error);

// ExtenderPreemptionArgs: victims per node, as full pods (NodeNameToVictims) or UIDs
// (NodeNameToMetaVictims).
struct Victims {
  std::vector<std::string> uids;
  int64_t pdb_violations = 0;
};
struct PreemptionArgs {
  nlohmann::json pod;
  std::map<std::string, Victims> victims;
};
Result<PreemptionArgs> parse_preemption_args(std::string_view body);
// ExtenderPreemptionResult (NodeNameToMetaVictims).
std::string encode_preemption_result(const std::map<std::string, Victims>& kept);

}  // namespace kgpu::scheduler
