// What `kgpu doctor` reports: findings with a rule id, severity, layer, the object, evidence quoted
// from the snapshot (with where it came from) and the commands that fix or confirm it; their text
// and JSON renderings and the exit code they imply.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/severity.h"

namespace kgpu::doctor {

// The scale lint uses too (common/severity.h); doctor's words are "critical" (kCritical, the same
// level as kError), "warning", "info".
using Severity = kgpu::Severity;

// The layers in the order the guide's troubleshooting walks them (outside in), then the cluster's
// readiness checklist. `spec` is the API server's validation and admission (quota) of what is created.
enum class Layer { kSpec, kScheduler, kNode, kPlugin, kRuntime, kDriver, kApp, kCluster };

const char* severity_name(Severity s);  // critical | warning | info
const char* layer_name(Layer l);        // spec | scheduler | node | plugin | runtime | driver | app | cluster

struct Evidence {
  std::string source;  // "event FailedScheduling on pod ml/train-0 (x12, last 2026-10-20T09:00:00Z)", "log ..."
  std::string text;    // quoted as found
};

struct Finding {
  std::string rule;  // stable id, e.g. "insufficient-gpu"
  Severity severity = Severity::kWarning;
  Layer layer = Layer::kScheduler;
  std::string object;                // "pod/ml/train-0", "node/gpu-1", "deployment/llm/qwen-vllm", "cluster"
  std::string summary;               // one sentence: what is broken
  std::vector<std::string> details;  // explanation lines (holders of GPUs, near-miss labels...)
  std::vector<Evidence> evidence;
  std::vector<std::string> fix;  // commands, in order
};

// Sorted by severity (worst first), then layer, object and rule.
void sort_findings(std::vector<Finding>& findings);

// Human-readable report; "No problems found ..." when empty. `color` adds ANSI severities.
std::string to_text(const std::vector<Finding>& findings, bool color = false);
nlohmann::json to_json(const std::vector<Finding>& findings);

// exit_code_for() of the worst finding (common/severity.h, as kgpu lint): 0: no findings or info
// only; 1: worst is a warning; 3: at least one critical. (2 is for usage errors and unreadable input.)
int exit_code(const std::vector<Finding>& findings);

}  // namespace kgpu::doctor
