#include "doctor/findings.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace kgpu::doctor {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "?";
}

const char* layer_name(Layer l) {
  switch (l) {
    case Layer::kSpec:
      return "spec";
    case Layer::kScheduler:
      return "scheduler";
    case Layer::kNode:
      return "node";
    case Layer::kPlugin:
      return "plugin";
    case Layer::kRuntime:
      return "runtime";
    case Layer::kDriver:
      return "driver";
    case Layer::kApp:
      return "app";
    case Layer::kCluster:
      return "cluster";
  }
  return "?";
}

namespace {

// Quoted evidence is arbitrary bytes (container logs): terminal control characters (ESC, the other
// C0 controls except tab and newline, DEL) are shown as \xNN so that the report cannot drive the
// terminal.
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t' && c != '\n') || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

void sort_findings(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return std::make_tuple(-static_cast<int>(a.severity), a.layer, std::cref(a.object), std::cref(a.rule)) <
           std::make_tuple(-static_cast<int>(b.severity), b.layer, std::cref(b.object), std::cref(b.rule));
  });
}

std::string to_text(const std::vector<Finding>& findings, bool color) {
  if (findings.empty()) return "No problems found: every GPU pod fits its layers and every checklist item holds.\n";
  std::string out;
  int counts[3] = {0, 0, 0};
  for (const auto& f : findings) {
    ++counts[static_cast<int>(f.severity)];
    const char* on = "";
    const char* off = "";
    if (color) {
      on = f.severity == Severity::kCritical  ? "\033[31;1m"
           : f.severity == Severity::kWarning ? "\033[33;1m"
                                              : "\033[36m";
      off = "\033[0m";
    }
    out += fmt::format("{}{}{} [{}] {} {}\n", on, fmt::format("{:<8}", severity_name(f.severity)), off,
                       layer_name(f.layer), f.rule, f.object);
    out += fmt::format("  {}\n", f.summary);
    for (const auto& d : f.details) out += fmt::format("    {}\n", d);
    for (const auto& e : f.evidence) {
      out += fmt::format("  evidence: {}\n    \"{}\"\n", printable(e.source), printable(e.text));
    }
    for (size_t i = 0; i < f.fix.size(); ++i) out += fmt::format("  {} {}\n", i == 0 ? "fix:" : "    ", f.fix[i]);
    out += "\n";
  }
  out += fmt::format("{} finding(s): {} critical, {} warning, {} info\n", findings.size(), counts[2], counts[1],
                     counts[0]);
  return out;
}

nlohmann::json to_json(const std::vector<Finding>& findings) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& f : findings) {
    nlohmann::json ev = nlohmann::json::array();
    for (const auto& e : f.evidence) ev.push_back({{"source", e.source}, {"text", e.text}});
    arr.push_back({{"rule", f.rule},
                   {"severity", severity_name(f.severity)},
                   {"layer", layer_name(f.layer)},
                   {"object", f.object},
                   {"summary", f.summary},
                   {"details", f.details},
                   {"evidence", ev},
                   {"fix", f.fix}});
  }
  return {{"findings", arr}, {"exitCode", exit_code(findings)}};
}

int exit_code(const std::vector<Finding>& findings) {
  std::optional<Severity> worst;
  for (const auto& f : findings) {
    if (!worst || f.severity > *worst) worst = f.severity;
  }
  return exit_code_for(worst);
}

}  // namespace kgpu::doctor
