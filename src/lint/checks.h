// Internal to kgpu_lint: what the rule checks (pod_checks.cc, object_checks.cc), the catalog
// (catalog.cc) and the driver (lint.cc) share: the finding emitter that applies disabling, the
// context of a pod spec, and the checks' entry points.
//
// Thread safety: an Emitter appends to the finding list it was given; one thread at a time.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/strings.h"
#include "k8s/gpu_resources.h"
#include "k8s/objects.h"
#include "lint/lint.h"
#include "lint/rules.h"

namespace kgpu::lint {

// The catalog entry of a rule id (catalog.cc); aborts on an unknown id (a typo in the checks).
const RuleInfo& rule(std::string_view id);

inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// GPU008: NVIDIA_VISIBLE_DEVICES set by hand to something other than void/none.
inline bool is_hand_set_visible_devices(const k8s::EnvVar& e) {
  if (e.name != "NVIDIA_VISIBLE_DEVICES" || !e.value) return false;
  const std::string v = ascii_lower(*e.value);
  return !v.empty() && v != "void" && v != "none";
}

// GPU007: a path of the NVIDIA device nodes.
inline bool is_nvidia_device_path(std::string_view path) { return path.starts_with("/dev/nvidia"); }

// -----------------------------------------------------------------------------------------------
// Context
class Emitter {
 public:
  Emitter(const k8s::Document& doc, const std::set<std::string_view>& disabled, std::vector<Finding>* out)
      : doc_(doc), disabled_(disabled), out_(out) {
    if (doc.metadata.namespace_.empty()) {
      object_ = fmt::format("{} {}", doc.kind, doc.metadata.name);
    } else {
      object_ = fmt::format("{} {}/{}", doc.kind, doc.metadata.namespace_, doc.metadata.name);
    }
    if (auto it = doc.metadata.annotations.find("kgpu.io/lint-disable"); it != doc.metadata.annotations.end()) {
      std::string_view list = it->second;
      while (!list.empty()) {
        const size_t comma = list.find(',');
        std::string item = ascii_lower(list.substr(0, comma));
        std::erase_if(item, [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
        if (item == "all") all_disabled_ = true;
        if (const RuleInfo* r = find_rule(item)) annotation_disabled_.insert(r->id);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    }
  }

  bool enabled(std::string_view id) const {
    return !all_disabled_ && !disabled_.contains(id) && !annotation_disabled_.contains(id);
  }

  void emit(std::string_view id, int line, std::string message, std::string fix = "") {
    if (!enabled(id)) return;
    const RuleInfo& r = rule(id);
    out_->push_back(Finding{&r, std::string(doc_.source), line > 0 ? line : doc_.line, object_, std::move(message),
                            fix.empty() ? std::string(r.fix) : std::move(fix)});
  }

  const k8s::Document& doc() const { return doc_; }

 private:
  const k8s::Document& doc_;
  const std::set<std::string_view>& disabled_;
  std::vector<Finding>* out_;
  std::string object_;
  bool all_disabled_ = false;
  std::set<std::string_view> annotation_disabled_;
};

// The line of `key`'s key in `map`, or 0.
int key_line(const k8s::Value* map, std::string_view key);
// The quantity as written in resources.<section>.<name>, or "".
std::string_view raw_quantity(const k8s::Container& c, std::string_view section, std::string_view name);
// The line of the document's `spec:` key, or 0.
inline int spec_key_line(const k8s::Document& doc) { return key_line(doc.root, "spec"); }

struct PodContext {
  const k8s::PodSpec* spec = nullptr;
  int spec_line = 0;                           // of the pod spec's `spec:` (the Document's line if absent)
  std::set<std::string_view> claim_templates;  // StatefulSet volumeClaimTemplates names
  // A node GPU agent (device plugin, exporter): it mounts the kubelet's device-plugin or
  // pod-resources directory, and must see every GPU of its node (GPU008 does not apply).
  bool node_agent = false;
};

// -----------------------------------------------------------------------------------------------
// Object rules
struct TargetKey {
  std::string_view kind, namespace_, name;
};

// pod_checks.cc
PodContext pod_context(const k8s::Document& doc, const k8s::PodSpec& spec);
void check_pod(Emitter& e, const PodContext& pod, const Options& options);

// object_checks.cc. `scaled`: workloads an HPA of the input keeps at two replicas or more;
// `inference`: workloads running an inference server.
void check_deployment(Emitter& e, const k8s::Workload& w, const std::vector<TargetKey>& scaled);
void check_job(Emitter& e, const k8s::Job& job, int line, std::string_view what);
void check_time_slicing(Emitter& e, const k8s::ConfigMap& cm);
void check_dra(Emitter& e);
void check_alerts(Emitter& e, const k8s::PrometheusRule& pr);
void check_hpa(Emitter& e, const k8s::HorizontalPodAutoscaler& hpa, const std::vector<TargetKey>& inference);
void check_quota(Emitter& e);
std::vector<TargetKey> multi_replica_targets(std::span<const k8s::Document> docs);
std::vector<TargetKey> inference_targets(std::span<const k8s::Document> docs);

}  // namespace kgpu::lint
