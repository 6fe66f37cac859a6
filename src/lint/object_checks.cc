// The checks of objects other than pod specs: single-GPU Deployments' rollout strategy, GPU Jobs'
// deadlines, time-slicing configs, DRA API versions, XID alerts, HPAs of inference servers and
// GPU ResourceQuotas.
#include <yaml-cpp/yaml.h>

#include "lint/checks.h"

namespace kgpu::lint {

namespace {

// Whether the data value `key` is written as a literal block scalar (`key: |`), so that its
// lines are the source lines after the key's. The tree keeps a scalar's line (the key's), not its
// style: a multi-line value is taken for a literal block unless the next key comes sooner than its
// lines would end, or the source is JSON (strings with \n escapes).
bool is_literal_block(const k8s::Document& doc, const k8s::Value* data, std::string_view key, std::string_view text) {
  if (data == nullptr || doc.source.ends_with(".json")) return false;
  const auto newlines = std::count(text.begin(), text.end(), '\n');
  if (newlines == 0) return false;
  const auto entries = data->entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].key() != key) continue;
    if (i + 1 < entries.size() && entries[i + 1].key_line() <= entries[i].key_line() + newlines) return false;
    return true;
  }
  return false;
}

// Is the metric at `pos` inside a range function that turns the sticky gauge into events?
bool wrapped_in_change_function(std::string_view expr, size_t pos) {
  int depth = 0;
  for (size_t i = pos; i-- > 0;) {
    if (expr[i] == ')') {
      ++depth;
    } else if (expr[i] == '(') {
      if (depth > 0) {
        --depth;
        continue;
      }
      size_t end = i;
      while (end > 0 && std::isspace(static_cast<unsigned char>(expr[end - 1]))) --end;
      size_t start = end;
      while (start > 0 && (std::isalnum(static_cast<unsigned char>(expr[start - 1])) || expr[start - 1] == '_')) {
        --start;
      }
      const std::string_view fn = expr.substr(start, end - start);
      for (std::string_view f : {"changes", "increase", "delta", "idelta", "rate", "irate", "resets"}) {
        if (fn == f) return true;
      }
    }
  }
  return false;
}

// True when the metric occurrence ending at `end` is compared with zero right away: `> 0`, `!= 0`,
// `>= 1`, with or without `bool`.
bool compared_with_zero_at(std::string_view expr, size_t end) {
  size_t i = end;
  auto skip_space = [&] {
    while (i < expr.size() && std::isspace(static_cast<unsigned char>(expr[i]))) ++i;
  };
  // Label matchers, a range, and the closing parentheses of wrappers that keep the value sticky
  // (max by (gpu) (X), max_over_time(X[5m])).
  while (true) {
    skip_space();
    if (i < expr.size() && (expr[i] == '{' || expr[i] == '[')) {
      const size_t close = expr.find(expr[i] == '{' ? '}' : ']', i);
      if (close == std::string_view::npos) return false;
      i = close + 1;
    } else if (i < expr.size() && expr[i] == ')') {
      ++i;
    } else {
      break;
    }
  }
  std::string_view op;
  if (expr.substr(i, 2) == "!=" || expr.substr(i, 2) == ">=") {
    op = expr.substr(i, 2);
  } else if (i < expr.size() && expr[i] == '>') {
    op = ">";
  } else {
    return false;
  }
  i += op.size();
  skip_space();
  if (expr.substr(i, 4) == "bool") {
    i += 4;
    skip_space();
  }
  size_t k = i;
  while (k < expr.size() && (std::isdigit(static_cast<unsigned char>(expr[k])) || expr[k] == '.')) ++k;
  const std::string_view number = expr.substr(i, k - i);
  if (number.empty() || (k < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[k])) || expr[k] == '_'))) {
    return false;
  }
  const double v = std::strtod(std::string(number).c_str(), nullptr);
  return (op == ">" && v == 0) || (op == "!=" && v == 0) || (op == ">=" && v > 0 && v <= 1);
}

// An `and` / `unless` with a change function elsewhere makes the alert resolve.
bool has_change_guard(std::string_view expr) {
  for (std::string_view f : {"changes(", "increase(", "delta(", "idelta(", "rate(", "irate(", "resets("}) {
    if (expr.find(f) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

void check_deployment(Emitter& e, const k8s::Workload& w, const std::vector<TargetKey>& scaled) {
  const k8s::Document& doc = e.doc();
  if (doc.kind != "Deployment" || !uses_gpus(w.pod_template.spec)) return;
  if (w.replicas.value_or(1) > 1) return;
  // An HPA in the same input that keeps at least two replicas: a rollout has a pod to spare.
  const auto same = [&](const TargetKey& t) {
    return t.kind == "Deployment" && t.name == doc.metadata.name &&
           (t.namespace_.empty() || doc.metadata.namespace_.empty() || t.namespace_ == doc.metadata.namespace_);
  };
  if (std::any_of(scaled.begin(), scaled.end(), same)) return;
  if (w.strategy_type.value_or("RollingUpdate") != "RollingUpdate") return;
  const k8s::Value* strategy = doc.root->at({"spec", "strategy"});
  if (const k8s::Value* surge = doc.root->at({"spec", "strategy", "rollingUpdate", "maxSurge"})) {
    if (surge->as_int(true) == 0 || surge->text() == "0%") return;
  }
  int line = w.strategy_type.line;
  if (line == 0) line = key_line(doc.root->find("spec"), "strategy");
  if (line == 0) line = w.replicas.line;
  if (line == 0) line = spec_key_line(doc);
  e.emit("GPU004", line,
         fmt::format("Deployment with {} replica{} and GPUs uses the {} strategy; a rollout needs a second GPU",
                     w.replicas.value_or(1), w.replicas.value_or(1) == 1 ? "" : "s",
                     w.strategy_type ? "RollingUpdate" : "default RollingUpdate"),
         strategy != nullptr ? "Set spec.strategy.type: Recreate (and remove rollingUpdate), or set "
                               "rollingUpdate.maxSurge: 0."
                             : "Add spec.strategy: {type: Recreate}.");
}

void check_job(Emitter& e, const k8s::Job& job, int line, std::string_view what) {
  if (!uses_gpus(job.pod_template.spec) || job.active_deadline_seconds || job.ttl_seconds_after_finished) return;
  e.emit("GPU009", line, fmt::format("GPU {} sets neither activeDeadlineSeconds nor ttlSecondsAfterFinished", what));
}

void check_time_slicing(Emitter& e, const k8s::ConfigMap& cm) {
  const k8s::Value* data = e.doc().root->find("data");
  for (const auto& [key, text] : cm.data) {
    if (!contains(*text, "timeSlicing")) continue;
    YAML::Node config;
    try {
      config = YAML::Load(std::string(*text));
    } catch (const YAML::Exception&) {
      continue;
    }
    if (!config.IsMap() || !config["sharing"].IsMap()) continue;
    const YAML::Node sharing = config["sharing"];
    const bool block = is_literal_block(e.doc(), data, key, *text);
    const auto line_of = [&](const YAML::Mark& m) { return block ? text.line + 1 + m.line : text.line; };
    for (auto it = sharing.begin(); it != sharing.end(); ++it) {
      if (it->first.Scalar() != "timeSlicing" || !it->second.IsMap()) continue;
      bool set = false;
      int line = line_of(it->first.Mark());
      for (auto f = it->second.begin(); f != it->second.end(); ++f) {
        if (f->first.Scalar() != "failRequestsGreaterThanOne") continue;
        line = line_of(f->first.Mark());
        const std::string v = ascii_lower(f->second.IsScalar() ? f->second.Scalar() : "");
        set = v == "true";
      }
      if (!set) {
        e.emit("GPU016", line,
               fmt::format("time-slicing config '{}' does not set failRequestsGreaterThanOne: true", key));
      }
    }
  }
}

void check_dra(Emitter& e) {
  const k8s::Document& doc = e.doc();
  static constexpr std::array<std::string_view, 4> kinds = {"ResourceClaim", "ResourceClaimTemplate", "DeviceClass",
                                                            "ResourceSlice"};
  if (std::find(kinds.begin(), kinds.end(), doc.kind) == kinds.end() || doc.api_group() != "resource.k8s.io") return;
  if (doc.api_version == "resource.k8s.io/v1") return;
  e.emit("GPU017", key_line(doc.root, "apiVersion"),
         fmt::format("{} uses apiVersion {}; DRA is GA as resource.k8s.io/v1", doc.kind, doc.api_version));
}

void check_alerts(Emitter& e, const k8s::PrometheusRule& pr) {
  static constexpr std::string_view kMetric = "DCGM_FI_DEV_XID_ERRORS";
  for (const k8s::PrometheusRuleGroup& g : pr.groups) {
    for (const k8s::PrometheusRuleEntry& r : g.rules) {
      if (!r.alert || !r.expr) continue;
      const std::string_view expr = *r.expr;
      bool sticky = false;
      for (size_t at = expr.find(kMetric); at != std::string_view::npos; at = expr.find(kMetric, at + 1)) {
        const size_t end = at + kMetric.size();
        const bool whole =
            (at == 0 || !(std::isalnum(static_cast<unsigned char>(expr[at - 1])) || expr[at - 1] == '_')) &&
            (end == expr.size() || !(std::isalnum(static_cast<unsigned char>(expr[end])) || expr[end] == '_'));
        if (whole && !wrapped_in_change_function(expr, at) && compared_with_zero_at(expr, end)) sticky = true;
      }
      if (sticky && !has_change_guard(expr)) {
        e.emit("GPU018", r.expr.line,
               fmt::format("alert '{}' fires on '{}': the XID gauge keeps its last value, so the alert never resolves",
                           *r.alert, expr));
      }
    }
  }
}

void check_hpa(Emitter& e, const k8s::HorizontalPodAutoscaler& hpa, const std::vector<TargetKey>& inference) {
  const auto& ref = hpa.scale_target_ref;
  const std::string_view ns = e.doc().metadata.namespace_;
  const auto match = [&](const TargetKey& t) {
    return t.kind == ref.kind && t.name == ref.name && (ns.empty() || t.namespace_.empty() || t.namespace_ == ns);
  };
  if (std::none_of(inference.begin(), inference.end(), match)) return;
  const std::string target = fmt::format("{} {}", ref.kind, ref.name);
  if (hpa.metrics.empty()) {
    e.emit("GPU015", spec_key_line(e.doc()),
           fmt::format("HPA scales inference server {} on the default metric (80% CPU)", target));
    return;
  }
  for (const k8s::MetricSpec& m : hpa.metrics) {
    if (is_cpu_or_memory_metric(m)) {
      e.emit("GPU015", m.line, fmt::format("HPA scales inference server {} on {} {}", target, m.type, m.name));
    }
  }
}

// Workloads that an HPA of the input keeps at two replicas or more.
std::vector<TargetKey> multi_replica_targets(std::span<const k8s::Document> docs) {
  std::vector<TargetKey> out;
  for (const k8s::Document& d : docs) {
    if (auto hpa = k8s::as_horizontal_pod_autoscaler(d); hpa && hpa->min_replicas.value_or(1) >= 2) {
      out.push_back({hpa->scale_target_ref.kind, d.metadata.namespace_, hpa->scale_target_ref.name});
    }
  }
  return out;
}

std::vector<TargetKey> inference_targets(std::span<const k8s::Document> docs) {
  std::vector<TargetKey> out;
  for (const k8s::Document& d : docs) {
    if (d.kind != "Deployment" && d.kind != "StatefulSet" && d.kind != "ReplicaSet") continue;
    if (auto w = k8s::as_workload(d); w && has_inference_server(w->pod_template.spec)) {
      out.push_back({d.kind, d.metadata.namespace_, d.metadata.name});
    }
  }
  return out;
}

void check_quota(Emitter& e) {
  const k8s::Value* hard = e.doc().root->at({"spec", "hard"});
  if (hard == nullptr || !hard->is_map()) return;
  for (const k8s::Entry& entry : hard->entries()) {
    std::string_view name = entry.key();
    std::string_view prefix;
    for (std::string_view p : {"requests.", "limits."}) {
      if (name.starts_with(p)) prefix = p;
    }
    name.remove_prefix(prefix.size());
    if (auto fixed = misspelled_gpu_resource(name)) {
      e.emit("GPU003", entry.key_line(),
             fmt::format("quota names '{}', which no device plugin advertises", entry.key()),
             fmt::format("Did you mean '{}{}'?", prefix, *fixed));
    }
  }
}

}  // namespace kgpu::lint
