// Text helpers and the evidence rules quote: events, log lines, fix commands.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

bool contains(sv haystack, sv needle) { return haystack.find(needle) != sv::npos; }

bool contains_any(sv haystack, std::span<const sv> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](sv n) { return contains(haystack, n); });
}

bool contains_any(sv haystack, std::initializer_list<sv> needles) {
  return contains_any(haystack, std::span<const sv>(needles.begin(), needles.size()));
}

std::string age(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds >= 86400) return fmt::format("{}d{}h", seconds / 86400, seconds % 86400 / 3600);
  if (seconds >= 3600) return fmt::format("{}h{}m", seconds / 3600, seconds % 3600 / 60);
  return fmt::format("{}m", seconds / 60);
}

std::string pod_ref(const PodObj& p) { return fmt::format("pod/{}/{}", p.ns(), p.name()); }

Evidence event_evidence(const Obj<k8s::Event>& e) {
  const auto& v = e.v;
  const auto ts = v.last_timestamp.empty() ? v.event_time : v.last_timestamp;
  return Evidence{
      fmt::format("event {} {} on {}/{}{} (x{}, last {}) at {}", v.type, v.reason, ascii_lower(v.involved_object.kind),
                  v.involved_object.namespace_.empty() ? "" : v.involved_object.namespace_,
                  v.involved_object.namespace_.empty() ? std::string(v.involved_object.name)
                                                       : "/" + std::string(v.involved_object.name),
                  std::max<int64_t>(1, v.count), ts, e.doc->where()),
      std::string(v.message)};
}

const Obj<k8s::Event>* last_event(const Snapshot& s, sv kind, sv ns, sv name, sv reason, sv needle) {
  const Obj<k8s::Event>* out = nullptr;
  for (const auto* e : s.events_for(kind, ns, name)) {
    if ((reason.empty() || e->v.reason == reason) && (needle.empty() || contains(e->v.message, needle))) out = e;
  }
  return out;
}

std::optional<LogHit> find_in_logs(std::span<const ContainerLog* const> logs, std::span<const sv> needles) {
  for (const auto* l : logs) {
    sv t = l->text;
    int n = 1;
    size_t pos = 0;
    while (pos <= t.size()) {
      size_t end = t.find('\n', pos);
      if (end == sv::npos) end = t.size();
      sv line = t.substr(pos, end - pos);
      if (contains_any(line, needles)) return LogHit{l, n, line};
      pos = end + 1;
      ++n;
    }
  }
  return std::nullopt;
}

std::optional<LogHit> find_in_logs(std::span<const ContainerLog* const> logs, std::initializer_list<sv> needles) {
  return find_in_logs(logs, std::span<const sv>(needles.begin(), needles.size()));
}

Evidence log_evidence(const LogHit& h) {
  return Evidence{fmt::format("log {}/{} container {}{} line {} (snapshot {})", h.log->ns, h.log->pod, h.log->container,
                              h.log->previous ? " (previous)" : "", h.line, h.log->doc->where()),
                  std::string(h.text)};
}

std::string patch_command(const std::pair<std::string, std::string>& owner, sv ns, const std::string& spec_json) {
  if (owner.first == "Pod") {
    return fmt::format(
        "kubectl get pod -n {} {} -o yaml > pod.yaml  # edit: {} ; then kubectl replace --force -f pod.yaml", ns,
        owner.second, spec_json);
  }
  const std::string path = owner.first == "CronJob"
                               ? "{\"spec\":{\"jobTemplate\":{\"spec\":{\"template\":{\"spec\":" + spec_json + "}}}}}"
                               : "{\"spec\":{\"template\":{\"spec\":" + spec_json + "}}}";
  return fmt::format("kubectl patch {} -n {} {} --type merge -p '{}'", ascii_lower(owner.first), ns, owner.second, path);
}

}  // namespace kgpu::doctor::detail
