// Views of what the cluster reports about objects: core/v1 and events.k8s.io Events, and
// monitoring.coreos.com PrometheusRules (k8s/objects.h).
#include "k8s/decode.h"

namespace kgpu::k8s {

using namespace detail;  // NOLINT: the shared decoder (k8s/decode.h)

std::optional<Event> as_event(const Document& doc) {
  if (!is_kind(doc, "Event")) return std::nullopt;
  const Value* r = doc.root;
  Event e;
  const bool v1 = doc.api_group() == "events.k8s.io";
  const Value* obj = Decoder::child(r, v1 ? "regarding" : "involvedObject");
  e.involved_object =
      ObjectReference{Decoder::str(obj, "apiVersion"), Decoder::str(obj, "kind"), Decoder::str(obj, "name"),
                      Decoder::str(obj, "namespace"),  Decoder::str(obj, "uid"),  Decoder::str(obj, "fieldPath")};
  e.reason = Decoder::str(r, "reason");
  e.message = Decoder::str(r, v1 ? "note" : "message");
  e.type = Decoder::str(r, "type");
  e.event_time = Decoder::str(r, "eventTime");
  if (v1) {
    const Value* count = Decoder::child(Decoder::child(r, "series"), "count");
    if (count == nullptr) count = Decoder::child(r, "deprecatedCount");
    e.count = count != nullptr ? count->as_int().value_or(0) : 0;
    e.first_timestamp = Decoder::str(r, "deprecatedFirstTimestamp");
    e.last_timestamp = Decoder::str(r, "deprecatedLastTimestamp");
    e.source_component = Decoder::str(r, "reportingController");
    e.source_host = Decoder::str(Decoder::child(r, "deprecatedSource"), "host");
  } else {
    const Value* count = Decoder::child(r, "count");
    e.count = count != nullptr ? count->as_int().value_or(0) : 0;
    e.first_timestamp = Decoder::str(r, "firstTimestamp");
    e.last_timestamp = Decoder::str(r, "lastTimestamp");
    const Value* source = Decoder::child(r, "source");
    e.source_component = Decoder::str(source, "component");
    if (e.source_component.empty()) e.source_component = Decoder::str(r, "reportingComponent");
    e.source_host = Decoder::str(source, "host");
  }
  return e;
}

std::optional<PrometheusRule> as_prometheus_rule(const Document& doc) {
  if (!is_kind(doc, "PrometheusRule")) return std::nullopt;
  std::vector<Issue> ignored;
  Decoder d(&ignored);
  PrometheusRule out;
  const Value* spec = d.map(doc.root, "spec", "");
  for (const Value& g : d.seq(spec, "groups", ".spec")) {
    PrometheusRuleGroup group;
    group.name = Decoder::str(&g, "name");
    group.interval = d.text(&g, "interval", ".spec.groups[]");
    group.line = g.line();
    for (const Value& r : d.seq(&g, "rules", ".spec.groups[]")) {
      PrometheusRuleEntry rule;
      rule.alert = d.text(&r, "alert", ".spec.groups[].rules[]");
      rule.record = d.text(&r, "record", ".spec.groups[].rules[]");
      if (const Entry* e = Decoder::entry(&r, "expr"); e != nullptr && e->value().is_scalar()) {
        rule.expr = Text{e->value().text(), e->key_line()};
      }
      rule.for_ = d.text(&r, "for", ".spec.groups[].rules[]");
      rule.labels = d.strings(&r, "labels", ".spec.groups[].rules[]");
      rule.annotations = d.strings(&r, "annotations", ".spec.groups[].rules[]");
      rule.line = r.line();
      group.rules.push_back(std::move(rule));
    }
    out.groups.push_back(std::move(group));
  }
  return out;
}

}  // namespace kgpu::k8s
