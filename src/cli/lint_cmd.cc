#include "cli/lint_cmd.h"

#include <fmt/format.h>

#include <iostream>
#include <string>
#include <vector>

#include "lint/lint.h"

namespace kgpu::cli {

namespace {

struct LintOptions {
  std::vector<std::string> paths;
  std::string output = "text";
  std::vector<std::string> disable;
  bool list_rules = false;
  int min_startup_s = 300;
};

LintOptions& options() {
  static LintOptions o;
  return o;
}

int list_rules(const std::string& output) {
  if (output == "text") {
    for (const lint::RuleInfo& r : lint::rules()) {
      std::cout << fmt::format("{}  {:<28} {:<8} {}\n        fix: {}\n", r.id, r.name, lint::severity_name(r.severity),
                               r.summary, r.fix);
    }
    return 0;
  }
  nlohmann::json j = nlohmann::json::array();
  for (const lint::RuleInfo& r : lint::rules()) {
    j.push_back({{"id", r.id},
                 {"name", r.name},
                 {"severity", lint::severity_name(r.severity)},
                 {"summary", r.summary},
                 {"fix", r.fix}});
  }
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace

CLI::App* add_lint_command(CLI::App& app) {
  LintOptions& o = options();
  auto* cmd = app.add_subcommand(
      "lint",
      "Check manifests against the GPU guide's rules (files, directories or - for stdin); exit 0 clean, "
      "1 warnings, 3 errors, 2 bad input");
  cmd->add_option("paths", o.paths, "Manifest files or directories (*.yaml, *.yml, *.json); - reads stdin")
      ->type_name("PATH");
  cmd->add_option("-o,--output", o.output, "text, json or sarif (SARIF 2.1.0 for code-scanning UIs)")
      ->check(CLI::IsMember({"text", "json", "sarif"}))
      ->capture_default_str();
  cmd->add_option("--disable", o.disable, "Rule id or name to skip (repeatable, or comma-separated)")
      ->type_name("RULE")
      ->allow_extra_args(false);
  cmd->add_option("--min-startup-seconds", o.min_startup_s, "Startup probe budget an inference server needs (GPU010)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_flag("--list-rules", o.list_rules, "List the rules (as JSON with --output json) and exit");
  return cmd;
}

int run_lint_command() {
  const LintOptions& o = options();
  if (o.list_rules) return list_rules(o.output);
  auto opts = lint::make_options(o.disable);
  if (!opts) {
    fmt::print(stderr, "kgpu lint: {}\n", opts.error().message);
    return 2;
  }
  opts->min_startup_budget_s = o.min_startup_s;
  if (o.paths.empty()) {
    fmt::print(stderr, "kgpu lint: no input: name files or directories, or - for stdin\n");
    return 2;
  }
  const lint::Report report = lint::lint_paths(o.paths, *opts);
  if (o.output == "json") {
    std::cout << lint::to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (o.output == "sarif") {
    std::cout << lint::to_sarif(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << lint::to_text(report);
  }
  std::cout.flush();
  return report.exit_code();
}

}  // namespace kgpu::cli
