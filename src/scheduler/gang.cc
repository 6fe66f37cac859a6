#include "scheduler/gang.h"

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <thread>
#include <vector>

#include "apiclient/events.h"
#include "k8s/api/json.h"

namespace kgpu::scheduler {

namespace {

using nlohmann::json;

constexpr int64_t kMaxGang = 100000;

const kube::Resource kNativePodGroups{"scheduling.k8s.io", "v1alpha2", "podgroups", true, "PodGroup"};
const kube::Resource kCoschedulingPodGroups{"scheduling.x-k8s.io", "v1alpha1", "podgroups", true, "PodGroup"};
const kube::Resource kVolcanoPodGroups{"scheduling.volcano.sh", "v1beta1", "podgroups", true, "PodGroup"};
const kube::Resource kKaiPodGroups{"scheduling.run.ai", "v2alpha2", "podgroups", true, "PodGroup"};

using k8s::api::text;

Result<int64_t> positive(const std::string& text, const std::string& where) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > kMaxGang) {
    return fail(ErrorCode::kInvalidArgument, "{}: {:?} is not a count from 1 to {}", where, text.substr(0, 64), kMaxGang);
  }
  return v;
}

}  // namespace

Result<std::optional<GangRef>> gang_of(const json& pod) {
  const std::string ns = text(pod, {"metadata", "namespace"});
  const std::string who = fmt::format("pod {}/{}", ns, text(pod, {"metadata", "name"}));
  struct Marker {
    const char* source;
    std::string field, group;
    kube::Resource podgroup;
  };
  const std::vector<Marker> markers = {
      {"scheduling.k8s.io", "spec.schedulingGroup.podGroupName", text(pod, {"spec", "schedulingGroup", "podGroupName"}),
       kNativePodGroups},
      {"kueue", "label kueue.x-k8s.io/pod-group-name", text(pod, {"metadata", "labels", "kueue.x-k8s.io/pod-group-name"}),
       {}},
      {"coscheduling", "label scheduling.x-k8s.io/pod-group",
       text(pod, {"metadata", "labels", "scheduling.x-k8s.io/pod-group"}), kCoschedulingPodGroups},
      {"volcano", "annotation scheduling.k8s.io/group-name",
       text(pod, {"metadata", "annotations", "scheduling.k8s.io/group-name"}), kVolcanoPodGroups},
      {"kai", "annotation pod-group-name", text(pod, {"metadata", "annotations", "pod-group-name"}), kKaiPodGroups},
      {"kai", "label pod-group-name", text(pod, {"metadata", "labels", "pod-group-name"}), kKaiPodGroups},
  };
  const Marker* chosen = nullptr;
  for (const auto& m : markers) {
    if (m.group.empty()) continue;
    if (chosen == nullptr) {
      chosen = &m;
    } else if (chosen->group != m.group) {
      return fail(ErrorCode::kInvalidArgument, "{}: {} names gang {:?} but {} names {:?}", who, chosen->field,
                  chosen->group, m.field, m.group);
    }
  }
  if (chosen == nullptr) return std::optional<GangRef>();
  GangRef r;
  r.ns = ns;
  r.group = chosen->group;
  r.key = ns + "/" + chosen->group;
  r.source = chosen->source;
  r.podgroup = chosen->podgroup;
  const std::string kgpu_min = text(pod, {"metadata", "annotations", kGangMinCountAnnotation});
  const std::string kueue_total = text(pod, {"metadata", "annotations", "kueue.x-k8s.io/pod-group-total-count"});
  if (!kgpu_min.empty()) {
    auto v = positive(kgpu_min, who + ": annotation " + kGangMinCountAnnotation);
    if (!v) return std::unexpected(v.error());
    r.min_count = *v;
  } else if (r.source == "kueue") {
    if (kueue_total.empty()) {
      return fail(ErrorCode::kInvalidArgument,
                  "{}: label kueue.x-k8s.io/pod-group-name without the annotation kueue.x-k8s.io/pod-group-total-count",
                  who);
    }
    auto v = positive(kueue_total, who + ": annotation kueue.x-k8s.io/pod-group-total-count");
    if (!v) return std::unexpected(v.error());
    r.min_count = *v;
  }
  return std::optional<GangRef>(std::move(r));
}

Result<int64_t> podgroup_min_count(const GangRef& ref, const json& pg) {
  const std::string where = fmt::format("{} {}/{}", ref.podgroup.kind.empty() ? "PodGroup" : ref.podgroup.kind, ref.ns,
                                        ref.group);
  const bool own = ref.source == "scheduling.k8s.io";
  const std::string field = own ? "spec.schedulingPolicy.gang.minCount" : "spec.minMember";
  const json* v = own ? k8s::api::find(pg, {"spec", "schedulingPolicy", "gang", "minCount"})
                      : k8s::api::find(pg, {"spec", "minMember"});
  if (v == nullptr || !v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > kMaxGang) {
    return fail(ErrorCode::kInvalidArgument, "{} ({}): {}: want a count from 1 to {}", where,
                ref.podgroup.group + "/" + ref.podgroup.version, field, kMaxGang);
  }
  return v->get<int64_t>();
}

bool has_gang_gate(const json& pod, const char* gate) {
  const json* gates = k8s::api::find(pod, {"spec", "schedulingGates"});
  if (gates == nullptr || !gates->is_array()) return false;
  for (const auto& g : *gates)
    if (text(g, {"name"}) == gate) return true;
  return false;
}

void pod_event(kube::EventRecorder* events, const json& pod, bool warning, const std::string& reason,
               const std::string& note) {
  if (events == nullptr) return;
  events->record(kube::EventTarget{"v1", "Pod", text(pod, {"metadata", "namespace"}), text(pod, {"metadata", "name"}),
                                   text(pod, {"metadata", "uid"})},
                 warning ? "Warning" : "Normal", reason, "Scheduling", note);
}

bool pod_finished(const json& pod) {
  const std::string phase = text(pod, {"status", "phase"});
  return phase == "Succeeded" || phase == "Failed" || !text(pod, {"metadata", "deletionTimestamp"}).empty();
}

kube::ApiResult<json> evict_pod(kube::Client& client, const json& pod) {
  const std::string ns = text(pod, {"metadata", "namespace"}), name = text(pod, {"metadata", "name"});
  const json body = {{"apiVersion", "policy/v1"},
                     {"kind", "Eviction"},
                     {"metadata", {{"name", name}, {"namespace", ns}}},
                     {"deleteOptions", {{"preconditions", {{"uid", text(pod, {"metadata", "uid"})}}}}}};
  auto r = client.create(kube::resources::kPods, ns, body, "eviction", name);
  if (!r && r.error().not_found()) return json::object();
  return r;
}

kube::ApiResult<json> remove_scheduling_gate(kube::Client& client, const json& pod, const char* gate) {
  json gates = json::array();
  for (const auto& g : pod["spec"]["schedulingGates"])
    if (g.value("name", "") != gate) gates.push_back(g);
  return client.patch(kube::resources::kPods, text(pod, {"metadata", "namespace"}),
                      text(pod, {"metadata", "name"}), kube::PatchType::kJson,
                      json::array({{{"op", "test"}, {"path", "/spec/schedulingGates"}, {"value", pod["spec"]["schedulingGates"]}},
                                   {{"op", "replace"}, {"path", "/spec/schedulingGates"}, {"value", gates}}}));
}

std::vector<kube::ApiResult<json>> remove_scheduling_gates(kube::Client& client, const std::vector<const json*>& pods,
                                                            const char* gate, size_t parallel) {
  std::vector<kube::ApiResult<json>> out(pods.size(), json());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < pods.size(); i = next++) out[i] = remove_scheduling_gate(client, *pods[i], gate);
  };
  const size_t n = std::min(std::max<size_t>(parallel, 1), pods.size());
  if (n <= 1) {
    work();
    return out;
  }
  {
    std::vector<std::jthread> workers;
    for (size_t k = 0; k < n; ++k) workers.emplace_back(work);
  }  // joined: every result is written
  return out;
}

}  // namespace kgpu::scheduler
