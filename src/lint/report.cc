// Loading for lint, and the text, JSON and SARIF 2.1.0 writers.
#include <fmt/format.h>

#include <iterator>

#include "lint/lint.h"
#include "common/strings.h"

namespace kgpu::lint {

namespace {

struct Counts {
  size_t errors = 0, warnings = 0, infos = 0;
};

Counts count(const std::vector<Finding>& findings) {
  Counts c;
  for (const Finding& f : findings) {
    switch (f.rule->severity) {
      case Severity::kError:
        ++c.errors;
        break;
      case Severity::kWarning:
        ++c.warnings;
        break;
      case Severity::kInfo:
        ++c.infos;
        break;
    }
  }
  return c;
}

}  // namespace

int Report::exit_code() const {
  if (!errors.empty()) return kExitInputError;
  const Counts c = count(findings);
  return exit_code_for(c.errors > 0     ? std::optional(Severity::kError)
                       : c.warnings > 0 ? std::optional(Severity::kWarning)
                       : c.infos > 0    ? std::optional(Severity::kInfo)
                                        : std::nullopt);
}

Report lint_paths(const std::vector<std::string>& paths, const Options& options) {
  Report report;
  k8s::LoadResult loaded;
  for (const std::string& path : paths) {
    auto r = k8s::load_paths({path});
    if (!r) {
      report.errors.push_back(k8s::LoadError{path, 0, r.error().message});
      continue;
    }
    loaded.append(std::move(*r));
  }
  report.findings = lint(loaded.documents, options);
  report.errors.insert(report.errors.end(), loaded.errors.begin(), loaded.errors.end());
  auto invalid = input_errors(loaded.documents);
  report.errors.insert(report.errors.end(), std::make_move_iterator(invalid.begin()),
                       std::make_move_iterator(invalid.end()));
  return report;
}

std::string to_text(const Report& report) {
  std::string out;
  for (const k8s::LoadError& e : report.errors) {
    out += e.line > 0 ? fmt::format("{}:{}: input error: {}\n", e.source, e.line, e.message)
                      : fmt::format("{}: input error: {}\n", e.source, e.message);
  }
  for (const Finding& f : report.findings) out += f.to_string() + "\n";
  const Counts c = count(report.findings);
  if (report.findings.empty() && report.errors.empty()) {
    out += "no findings\n";
  } else {
    out += fmt::format("{} finding{} ({} error{}, {} warning{}, {} info){}\n", report.findings.size(),
                       report.findings.size() == 1 ? "" : "s", c.errors, c.errors == 1 ? "" : "s", c.warnings,
                       c.warnings == 1 ? "" : "s", c.infos,
                       report.errors.empty() ? ""
                                             : fmt::format("; {} input error{}", report.errors.size(),
                                                           report.errors.size() == 1 ? "" : "s"));
  }
  return out;
}

nlohmann::json to_json(const Report& report) {
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : report.findings) {
    findings.push_back({{"rule", f.rule->id},
                        {"name", f.rule->name},
                        {"severity", severity_name(f.rule->severity)},
                        {"file", f.file},
                        {"line", f.line},
                        {"object", f.object},
                        {"message", f.message},
                        {"fix", f.fix}});
  }
  nlohmann::json errors = nlohmann::json::array();
  for (const k8s::LoadError& e : report.errors) {
    errors.push_back({{"file", e.source}, {"line", e.line}, {"message", e.message}});
  }
  const Counts c = count(report.findings);
  return {
      {"findings", findings},
      {"errors", errors},
      {"summary",
       {{"errors", c.errors}, {"warnings", c.warnings}, {"infos", c.infos}, {"load_errors", report.errors.size()}}}};
}

nlohmann::json to_sarif(const Report& report) {
  nlohmann::json rule_list = nlohmann::json::array();
  for (const RuleInfo& r : rules()) {
    rule_list.push_back({{"id", r.id},
                         {"name", r.name},
                         {"shortDescription", {{"text", r.summary}}},
                         {"fullDescription", {{"text", fmt::format("{} Fix: {}", r.summary, r.fix)}}},
                         {"help", {{"text", fmt::format("{} See docs/lint.md#{}.", r.fix, ascii_lower(r.id))}}},
                         {"defaultConfiguration", {{"level", sarif_level(r.severity)}}}});
  }
  nlohmann::json results = nlohmann::json::array();
  const auto all = rules();
  for (const Finding& f : report.findings) {
    results.push_back(
        {{"ruleId", f.rule->id},
         {"ruleIndex", f.rule - all.data()},
         {"level", sarif_level(f.rule->severity)},
         {"message", {{"text", fmt::format("{} [{}] Fix: {}", f.message, f.object, f.fix)}}},
         {"locations",
          {{{"physicalLocation",
             {{"artifactLocation", {{"uri", f.file}}}, {"region", {{"startLine", std::max(f.line, 1)}}}}}}}}});
  }
  nlohmann::json notifications = nlohmann::json::array();
  for (const k8s::LoadError& e : report.errors) {
    nlohmann::json n = {{"level", "error"}, {"message", {{"text", e.to_string()}}}};
    nlohmann::json location = {{"physicalLocation", {{"artifactLocation", {{"uri", e.source}}}}}};
    if (e.line > 0) location["physicalLocation"]["region"] = {{"startLine", e.line}};
    n["locations"] = nlohmann::json::array({location});
    notifications.push_back(std::move(n));
  }
  nlohmann::json run = {
      {"tool", {{"driver", {{"name", "kgpu lint"}, {"rules", rule_list}}}}},
      {"invocations",
       {{{"executionSuccessful", report.errors.empty()}, {"toolExecutionNotifications", notifications}}}},
      {"results", results}};
  return {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
          {"version", "2.1.0"},
          {"runs", nlohmann::json::array({run})}};
}

}  // namespace kgpu::lint
