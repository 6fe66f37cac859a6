// Runtime layer: the NVIDIA container runtime hook failing to set up a GPU container.
#include <fmt/format.h>

#include <algorithm>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

std::optional<Finding> Diagnoser::runtime(const PodObj& p) {
  // Only a pod that is still failing: a Ready pod, or one whose containers all run, recovered, and
  // its lastState and old events are history.
  if (const auto* c = k8s::find_condition(p.v.status.conditions, "Ready"); c != nullptr && c->status == "True") {
    return std::nullopt;
  }
  const auto failing_now = [](const k8s::ContainerState& st) {
    return (st.state == "waiting" && st.reason != "ContainerCreating" && st.reason != "PodInitializing") ||
           (st.state == "terminated" && st.reason == "StartError");
  };
  if (std::none_of(p.v.status.container_statuses.begin(), p.v.status.container_statuses.end(),
                   [&](const k8s::ContainerStatus& c) { return failing_now(c.state); })) {
    return std::nullopt;
  }
  std::optional<Evidence> ev;
  for (const auto& c : p.v.status.container_statuses) {
    if (!failing_now(c.state)) continue;
    // The current state, or (CrashLoopBackOff between attempts) the attempt that just failed.
    for (const auto* st : {&c.state, &c.last_state}) {
      if (!ev && contains(st->message, "nvidia-container-cli")) {
        ev = Evidence{fmt::format("{} container {} state {} ({}) at {}", pod_ref(p), c.name, st->state, st->reason,
                                  p.doc->where(st->line)),
                      std::string(st->message)};
      }
    }
  }
  const auto* e = last_event(s_, "Pod", p.ns(), p.name(), "", "nvidia-container-cli");
  if (!ev && e == nullptr) return std::nullopt;
  Finding f;
  f.object = pod_ref(p);
  const sv node = *p.v.spec.node_name;
  std::string msg = ev ? ev->text : std::string(e->v.message);
  if (contains(msg, "requirement error") || contains(msg, "unsatisfied condition: cuda")) {
    set_rule(f, RuleId::kAppCudaNewerThanDriver);
    f.summary = fmt::format("the image requires a newer CUDA than the driver on {} supports", node);
  } else {
    set_rule(f, RuleId::kToolkitInitError);
    f.summary = fmt::format(
        "the NVIDIA container runtime hook failed on {}: the toolkit ran but the driver was not ready", node);
  }
  if (ev) f.evidence.push_back(*ev);
  if (e != nullptr) f.evidence.push_back(event_evidence(*e));
  if (const auto* d = stack_pod_on(s_, node, "driver")) {
    f.details.push_back(fmt::format("driver pod {}/{} on {}: {}", d->ns(), d->name(), node, pod_status_text(d->v)));
    f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=100", d->ns(), d->name()));
  }
  if (const auto* t = stack_pod_on(s_, node, "toolkit")) {
    f.details.push_back(fmt::format("toolkit pod {}/{} on {}: {}", t->ns(), t->name(), node, pod_status_text(t->v)));
    f.fix.push_back(fmt::format("kubectl logs -n {} {} --tail=50", t->ns(), t->name()));
  }
  if (f.fix.empty()) {
    f.fix.push_back("kubectl logs -n gpu-operator -l app=nvidia-container-toolkit-daemonset --tail=50");
    f.fix.push_back(
        "# host-installed toolkit: nvidia-ctk runtime configure --runtime=containerd && systemctl restart containerd");
  }
  return f;
}

}  // namespace kgpu::doctor::detail
