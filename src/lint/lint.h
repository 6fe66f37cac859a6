// `kgpu lint`: checks Kubernetes manifests against the rules of the GPU guide (docs/lint.md).
//
// One table of rules (rules()) gives every check its stable id ("GPU001"), short name
// ("gpu-request-not-limit"), severity, summary and fix; the SARIF rules list is written from the
// same table. Rules read the typed views of k8s/objects.h; a finding points at the line of the
// offending field's key (or, for something missing, at the key of the mapping it belongs in).
//
// Cross-document rules (an HPA and the Deployment it scales) see every document passed to one
// lint() call; documents from different files are matched by kind, namespace and name.
//
// Disabling: Options::disabled (ids or names), or the annotation `kgpu.io/lint-disable: "GPU004,
// single-gpu-rolling-update"` (or "all") on the object's top-level metadata.
//
// Exit status (exit_code(), the scale of common/severity.h that kgpu doctor shares): 2 when any
// input could not be read or decoded, or holds a value the API server rejects (input_errors();
// findings of the good documents are still reported), else 3 when there is an error finding, 1
// when the worst is a warning, else 0 (info findings alone do not fail a CI step).
//
// Ownership: Findings own their strings (they outlive the Documents). Threads: lint() and the
// writers keep no state; concurrent calls are safe. Errors: lint() does not fail; malformed
// fields are skipped by the views and reported by the rules that need them only when they are
// certainly wrong.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/severity.h"
#include "k8s/document.h"

namespace kgpu::lint {

// The scale doctor uses too (common/severity.h); lint's words are "error", "warning", "info".
using Severity = kgpu::Severity;

// "error" | "warning" | "info".
const char* severity_name(Severity s);
// SARIF level: "error" | "warning" | "note".
const char* sarif_level(Severity s);

struct RuleInfo {
  std::string_view id;    // "GPU001": stable, never reused
  std::string_view name;  // "gpu-request-not-limit"
  Severity severity;
  std::string_view summary;  // one sentence: what the rule finds
  std::string_view fix;      // one sentence: how to fix it
};

// Every rule, in id order.
std::span<const RuleInfo> rules();
// The rule with this id (case-insensitive) or name, or nullptr.
const RuleInfo* find_rule(std::string_view id_or_name);

struct Finding {
  const RuleInfo* rule = nullptr;  // points into rules()
  std::string file;
  int line = 0;
  std::string object;   // "Deployment llm/qwen-vllm"
  std::string message;  // what is wrong, quoting the value
  std::string fix;      // specific to this finding

  // "file:line: severity GPU001 (name): message [object]\n  fix: ..." (no trailing newline).
  std::string to_string() const;
};

struct Options {
  std::vector<std::string> disabled;  // ids or names; unknown ones are rejected by make_options()
  // Startup probe budget an inference server needs, in seconds (docs/lint.md: GPU010).
  int min_startup_budget_s = 300;
};

// Validates the rule ids/names of `disabled`; kInvalidArgument names the unknown one.
Result<Options> make_options(const std::vector<std::string>& disabled);

// Lints `docs`. Findings sorted by file, line, rule id (then message).
std::vector<Finding> lint(std::span<const k8s::Document> docs, const Options& options = {});

// Fields of `docs` the API server would reject outright (quantities that are not quantities, NaN,
// Inf, or beyond the range Quantity keeps), as input errors at the field's key line: "<Kind
// ns/name>: <path>: <what is wrong>". They are not rules: no option or annotation disables them.
std::vector<k8s::LoadError> input_errors(std::span<const k8s::Document> docs);

struct Report {
  std::vector<Finding> findings;
  std::vector<k8s::LoadError> errors;

  int exit_code() const;
};

// Loads `paths` (files, directories, "-" for stdin) and lints what loaded. A path that cannot be
// read becomes a LoadError (exit code 2), not a failure.
Report lint_paths(const std::vector<std::string>& paths, const Options& options = {});

// Human-readable: one block per finding and load error, then a summary line.
std::string to_text(const Report& report);
// {"findings": [{rule, name, severity, file, line, object, message, fix}], "errors": [{file,
// line, message}], "summary": {errors, warnings, infos, load_errors}}.
nlohmann::json to_json(const Report& report);
// SARIF 2.1.0: one run, tool.driver.rules from rules(), one result per finding; load errors are
// toolExecutionNotifications of the invocation (executionSuccessful false when there are any).
nlohmann::json to_sarif(const Report& report);

}  // namespace kgpu::lint
