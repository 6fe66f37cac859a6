// Text, JSON and HTML renderings of a Report.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/strings.h"
#include "common/timestamp.h"
#include "report/report.h"

namespace kgpu::cost {

using nlohmann::json;

namespace {

std::string when(double epoch) {
  if (epoch <= 0) return "-";
  return format_rfc3339(std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(epoch))));
}

std::string hours(double h) {
  if (h >= 48) return fmt::format("{:.1f} d", h / 24);
  return fmt::format("{:.1f} h", h);
}

std::string money(double v, const std::string& currency) { return fmt::format("{:.2f} {}", v, currency); }

std::string gpus(double g) {
  if (std::fabs(g - std::round(g)) < 1e-9) return fmt::format("{}", static_cast<int64_t>(std::llround(g)));
  return fmt::format("{:.3g}", g);
}

std::string window_text(const Report& r) { return hours((r.until - r.since) / 3600); }

// Plain-text table: columns padded to their widest cell.
std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < w.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l = "  ";
    for (size_t i = 0; i < cells.size(); ++i) l += fmt::format("{:<{}}", cells[i], i + 1 < cells.size() ? w[i] + 2 : 0);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(head);
  for (const auto& row : rows) line(row);
  return out;
}

template <typename T>
size_t shown(const std::vector<T>& v, const Report& r) {
  return std::min(v.size(), static_cast<size_t>(std::max(0, r.max_rows)));
}

std::vector<std::vector<std::string>> idle_rows(const Report& r) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < shown(r.idle, r); ++i) {
    const auto& p = r.idle[i];
    rows.push_back({p.ns + "/" + p.pod, p.workload, p.owner.empty() ? "-" : p.owner, gpus(p.gpus),
                    fmt::format("{:.1f}%", p.mean_util), hours(p.held_hours), fmt::format("{:.1f}", p.idle_gpu_hours),
                    money(p.cost, r.currency)});
  }
  return rows;
}

std::vector<std::vector<std::string>> rollup_rows(const std::vector<Rollup>& v, const Report& r) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < shown(v, r); ++i) {
    const auto& x = v[i];
    const double pct = x.held_gpu_hours > 0 ? 100 * x.idle_gpu_hours / x.held_gpu_hours : 0;
    rows.push_back({x.key, std::to_string(x.pods), gpus(x.gpus), fmt::format("{:.1f}", x.held_gpu_hours),
                    fmt::format("{:.1f}", x.idle_gpu_hours), fmt::format("{:.0f}%", pct),
                    money(x.idle_cost, r.currency)});
  }
  return rows;
}

std::vector<std::vector<std::string>> rightsize_rows(const Report& r) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < shown(r.right_size, r); ++i) {
    const auto& x = r.right_size[i];
    rows.push_back({x.ns + "/" + x.pod, x.model, x.current, fmt::format("{:.1f} GiB", x.peak_mib / 1024),
                    fmt::format("{:.1f}%", x.mean_util), x.suggestion, fmt::format("{:.1f}", x.saving_gpu_hours),
                    money(x.saving, r.currency)});
  }
  return rows;
}

std::vector<std::vector<std::string>> stale_rows(const Report& r) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < shown(r.stale, r); ++i) {
    const auto& x = r.stale[i];
    rows.push_back({x.ns + "/" + x.pod, work_kind_name(x.kind), x.workload, gpus(x.gpus),
                    x.last_active > 0 ? when(x.last_active) : "not in window", hours(x.idle_hours),
                    money(x.cost_since_active, r.currency)});
  }
  return rows;
}

const std::vector<std::string> kIdleHead = {"POD",       "WORKLOAD", "OWNER",      "GPUS",
                                            "MEAN UTIL", "HELD",     "IDLE GPU-H", "COST"};
const std::vector<std::string> kRollHead = {"", "PODS", "GPUS", "GPU-H HELD", "GPU-H IDLE", "IDLE", "IDLE COST"};
const std::vector<std::string> kRightHead = {"POD",       "MODEL",      "NOW",         "PEAK MEMORY",
                                             "MEAN UTIL", "SUGGESTION", "GPU-H SAVED", "SAVING"};
const std::vector<std::string> kStaleHead = {"POD",         "KIND",     "WORKLOAD",  "GPUS",
                                             "LAST ACTIVE", "IDLE FOR", "COST SINCE"};

std::string esc(std::string_view s) {
  return escape(s, {{'<', "&lt;"}, {'>', "&gt;"}, {'&', "&amp;"}, {'"', "&quot;"}, {'\'', "&#39;"}});
}

std::string html_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                       size_t total, const std::string& first_head = "") {
  if (rows.empty()) return "<p class=\"none\">None.</p>\n";
  std::string out = "<table>\n<thead><tr>";
  for (size_t i = 0; i < head.size(); ++i)
    out += "<th>" + esc(i == 0 && !first_head.empty() ? first_head : head[i]) + "</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) out += (i == 0 ? "<td class=\"k\">" : "<td>") + esc(row[i]) + "</td>";
    out += "</tr>\n";
  }
  out += "</tbody></table>\n";
  if (total > rows.size()) out += fmt::format("<p class=\"more\">{} more in -o json.</p>\n", total - rows.size());
  return out;
}

// Horizontal bars: one per (label, value), scaled to the largest.
std::string bar_chart(const std::string& title, const std::vector<std::pair<std::string, double>>& bars,
                      const std::string& unit) {
  if (bars.empty()) return "";
  const int row = 26, label_w = 220, bar_w = 420, height = static_cast<int>(bars.size()) * row + 30;
  double max = 0;
  for (const auto& b : bars) max = std::max(max, b.second);
  std::string svg = fmt::format(
      "<svg class=\"chart\" role=\"img\" aria-label=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\">\n<title>{}</title>\n",
      esc(title), label_w + bar_w + 120, height, label_w + bar_w + 120, height, esc(title));
  for (size_t i = 0; i < bars.size(); ++i) {
    const int y = 10 + static_cast<int>(i) * row;
    const double w = max > 0 ? bar_w * bars[i].second / max : 0;
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"lbl\">{}</text>"
        "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"18\" class=\"bar{}\"/>"
        "<text x=\"{:.1f}\" y=\"{}\" class=\"val\">{:.1f} {}</text>\n",
        label_w - 8, y + 14, esc(bars[i].first.substr(0, 32)), label_w, y, std::max(w, 1.0), i % 2,
        label_w + std::max(w, 1.0) + 6, y + 14, bars[i].second, esc(unit));
  }
  svg += "</svg>\n";
  return svg;
}

// Grouped bars: today vs FGD for a few measures.
std::string compare_chart(const Fragmentation& f) {
  const std::vector<std::tuple<std::string, double, double>> rows = {
      {"idle whole GPUs", static_cast<double>(f.idle_gpus), static_cast<double>(f.fgd_idle_gpus)},
      {"fully idle nodes", static_cast<double>(f.idle_nodes), static_cast<double>(f.fgd_idle_nodes)},
      {"partly used GPUs", static_cast<double>(f.partial_gpus), static_cast<double>(f.fgd_partial_gpus)},
      {"fragmented GPUs", f.fragmented_gpus, f.fgd_fragmented_gpus},
  };
  double max = 1;
  for (const auto& [l, a, b] : rows) max = std::max({max, a, b});
  const int label_w = 170, bar_w = 380, group = 50;
  const int height = static_cast<int>(rows.size()) * group + 40;
  std::string svg = fmt::format(
      "<svg class=\"chart\" role=\"img\" aria-label=\"Fragmentation today and with FGD\" "
      "xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n"
      "<title>Fragmentation today and with FGD</title>\n"
      "<rect x=\"{}\" y=\"4\" width=\"12\" height=\"12\" class=\"bar0\"/><text x=\"{}\" y=\"14\" "
      "class=\"lbl\">today</text>"
      "<rect x=\"{}\" y=\"4\" width=\"12\" height=\"12\" class=\"fgd\"/><text x=\"{}\" y=\"14\" class=\"lbl\">placed "
      "by "
      "FGD</text>\n",
      label_w + bar_w + 90, height, label_w + bar_w + 90, height, label_w, label_w + 16, label_w + 90, label_w + 106);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [label, a, b] = rows[i];
    const int y = 28 + static_cast<int>(i) * group;
    const double wa = std::max(1.0, bar_w * a / max), wb = std::max(1.0, bar_w * b / max);
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"lbl\">{}</text>"
        "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"16\" class=\"bar0\"/><text x=\"{:.1f}\" y=\"{}\" "
        "class=\"val\">{}</text>"
        "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"16\" class=\"fgd\"/><text x=\"{:.1f}\" y=\"{}\" "
        "class=\"val\">{}</text>\n",
        label_w - 8, y + 22, esc(label), label_w, y, wa, label_w + wa + 6, y + 13, gpus(a), label_w, y + 19, wb,
        label_w + wb + 6, y + 32, gpus(b));
  }
  svg += "</svg>\n";
  return svg;
}

const char* kCss =
    R"(body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;color:#1d2530;padding:0 16px}
h1{font-size:24px;margin-bottom:4px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #d6dbe1;padding-bottom:4px}
.meta{color:#5b6675;font-size:13px}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #d6dbe1;border-radius:6px;padding:10px 14px;min-width:150px;background:#f7f9fb}
.card b{display:block;font-size:22px;color:#0b5cad}.card span{font-size:12px;color:#5b6675}
table{border-collapse:collapse;width:100%;font-size:13px;margin:8px 0}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e4e8ec}
th{background:#eef2f6;font-weight:600}td.k{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.none{color:#5b6675}.more{color:#5b6675;font-size:12px}.warn{background:#fff6e0;border:1px solid #f0d48a;padding:8px 12px;border-radius:6px;font-size:13px}
svg.chart{display:block;margin:8px 0}.lbl{font-size:12px;fill:#1d2530}.val{font-size:11px;fill:#5b6675}
.bar0{fill:#d9822b}.bar1{fill:#e8a85f}.fgd{fill:#2b8a3e}
)";

}  // namespace

std::string to_text(const Report& r) {
  std::string out;
  out += fmt::format("GPU report {} .. {} ({}, step {}s, idle below {}%)\n", when(r.since), when(r.until),
                     window_text(r), static_cast<int64_t>(r.step_s), r.idle_threshold);
  out +=
      fmt::format("{} GPU pods, {} with metrics: {:.1f} GPU-hours held ({}), {:.1f} idle ({}, {:.0f}%)\n", r.gpu_pods,
                  r.pods_with_metrics, r.held_gpu_hours, money(r.held_cost, r.currency), r.idle_gpu_hours,
                  money(r.idle_cost, r.currency), r.held_gpu_hours > 0 ? 100 * r.idle_gpu_hours / r.held_gpu_hours : 0);
  out += "\nAllocated but idle (mean activity below the threshold):\n";
  out += r.idle.empty() ? "  none\n" : table(kIdleHead, idle_rows(r));
  auto roll = [&](const char* title, const char* first, const std::vector<Rollup>& v) {
    out += fmt::format("\nBy {}:\n", title);
    auto head = kRollHead;
    head[0] = first;
    out += v.empty() ? "  none\n" : table(head, rollup_rows(v, r));
  };
  roll("namespace", "NAMESPACE", r.by_namespace);
  roll("workload", "WORKLOAD", r.by_workload);
  roll("owner", "OWNER", r.by_owner);
  out += "\nRight-sizing (peak memory and mean activity with headroom):\n";
  out += r.right_size.empty() ? "  none\n" : table(kRightHead, rightsize_rows(r));
  out += "\nNotebooks and Jobs holding GPUs long after their last activity:\n";
  out += r.stale.empty() ? "  none\n" : table(kStaleHead, stale_rows(r));
  const auto& f = r.fragmentation;
  out += fmt::format("\nFragmentation ({} GPU nodes, {} GPUs, {} modelled, {} GPUs allocated to {} pods):\n", f.nodes,
                     f.gpus, f.nodes_modelled, gpus(f.gpus_allocated), f.pods);
  out += table(
      {"", "IDLE GPUS", "IDLE NODES", "PARTLY USED GPUS", "FRAGMENTED GPUS", "FRAG RATIO"},
      {{"today", std::to_string(f.idle_gpus), std::to_string(f.idle_nodes), std::to_string(f.partial_gpus),
        fmt::format("{:.1f}", f.fragmented_gpus), fmt::format("{:.1f}%", 100 * f.frag_ratio)},
       {"FGD", std::to_string(f.fgd_idle_gpus), std::to_string(f.fgd_idle_nodes), std::to_string(f.fgd_partial_gpus),
        fmt::format("{:.1f}", f.fgd_fragmented_gpus), fmt::format("{:.1f}%", 100 * f.fgd_frag_ratio)}});
  out += fmt::format("  FGD would free {} whole GPUs ({:.0f} GPU-hours, {} a day){}\n", f.fgd_idle_gpus - f.idle_gpus,
                     f.freed_gpu_hours_per_day, money(f.freed_cost_per_day, r.currency),
                     f.fgd_unplaced > 0 ? fmt::format("; {} pods found no place", f.fgd_unplaced) : "");
  for (const auto& w : r.warnings) out += "warning: " + w + "\n";
  return out;
}

json to_json(const Report& r) {
  json j;
  j["generatedAt"] = when(r.generated_at);
  j["since"] = when(r.since);
  j["until"] = when(r.until);
  j["stepSeconds"] = r.step_s;
  j["idleThresholdPercent"] = r.idle_threshold;
  j["currency"] = r.currency;
  j["prometheus"] = r.prometheus_url;
  j["gpuPods"] = r.gpu_pods;
  j["podsWithMetrics"] = r.pods_with_metrics;
  j["heldGpuHours"] = r.held_gpu_hours;
  j["heldCost"] = r.held_cost;
  j["idleGpuHours"] = r.idle_gpu_hours;
  j["idleCost"] = r.idle_cost;
  j["idle"] = json::array();
  for (const auto& p : r.idle) {
    j["idle"].push_back({{"namespace", p.ns},
                         {"pod", p.pod},
                         {"workload", p.workload},
                         {"owner", p.owner},
                         {"node", p.node},
                         {"model", p.model},
                         {"resource", p.resource},
                         {"kind", work_kind_name(p.kind)},
                         {"gpus", p.gpus},
                         {"meanUtilPercent", p.mean_util},
                         {"heldHours", p.held_hours},
                         {"idleGpuHours", p.idle_gpu_hours},
                         {"cost", p.cost}});
  }
  auto roll = [](const std::vector<Rollup>& v) {
    json a = json::array();
    for (const auto& x : v) {
      a.push_back({{"key", x.key},
                   {"pods", x.pods},
                   {"gpus", x.gpus},
                   {"heldGpuHours", x.held_gpu_hours},
                   {"idleGpuHours", x.idle_gpu_hours},
                   {"idleCost", x.idle_cost}});
    }
    return a;
  };
  j["byNamespace"] = roll(r.by_namespace);
  j["byWorkload"] = roll(r.by_workload);
  j["byOwner"] = roll(r.by_owner);
  j["rightSize"] = json::array();
  for (const auto& x : r.right_size) {
    j["rightSize"].push_back({{"namespace", x.ns},
                              {"pod", x.pod},
                              {"workload", x.workload},
                              {"owner", x.owner},
                              {"node", x.node},
                              {"model", x.model},
                              {"current", x.current},
                              {"gpus", x.gpus},
                              {"peakMemoryMiB", x.peak_mib},
                              {"capacityMiB", x.capacity_mib},
                              {"meanUtilPercent", x.mean_util},
                              {"suggestion", x.suggestion},
                              {"suggestedResource", x.suggested_resource},
                              {"suggestedGpus", x.suggested_gpus},
                              {"suggestedMemoryMiB", x.suggested_mib},
                              {"heldHours", x.held_hours},
                              {"savingGpuHours", x.saving_gpu_hours},
                              {"saving", x.saving}});
  }
  j["stale"] = json::array();
  for (const auto& x : r.stale) {
    j["stale"].push_back({{"namespace", x.ns},
                          {"pod", x.pod},
                          {"workload", x.workload},
                          {"owner", x.owner},
                          {"node", x.node},
                          {"model", x.model},
                          {"kind", work_kind_name(x.kind)},
                          {"gpus", x.gpus},
                          {"started", when(x.started)},
                          {"lastActive", x.last_active > 0 ? json(when(x.last_active)) : json(nullptr)},
                          {"idleHours", x.idle_hours},
                          {"costSinceActive", x.cost_since_active}});
  }
  const auto& f = r.fragmentation;
  j["fragmentation"] = {{"nodes", f.nodes},
                        {"gpus", f.gpus},
                        {"nodesModelled", f.nodes_modelled},
                        {"gpusAllocated", f.gpus_allocated},
                        {"pods", f.pods},
                        {"today",
                         {{"idleGpus", f.idle_gpus},
                          {"idleNodes", f.idle_nodes},
                          {"partlyUsedGpus", f.partial_gpus},
                          {"fragmentedGpus", f.fragmented_gpus},
                          {"fragmentationRatio", f.frag_ratio}}},
                        {"fgd",
                         {{"idleGpus", f.fgd_idle_gpus},
                          {"idleNodes", f.fgd_idle_nodes},
                          {"partlyUsedGpus", f.fgd_partial_gpus},
                          {"fragmentedGpus", f.fgd_fragmented_gpus},
                          {"fragmentationRatio", f.fgd_frag_ratio},
                          {"unplacedPods", f.fgd_unplaced}}},
                        {"freedGpus", f.fgd_idle_gpus - f.idle_gpus},
                        {"freedGpuHoursPerDay", f.freed_gpu_hours_per_day},
                        {"freedCostPerDay", f.freed_cost_per_day}};
  j["warnings"] = r.warnings;
  return j;
}

std::string to_html(const Report& r) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += fmt::format("<title>GPU report {} .. {}</title>\n<style>\n{}</style>\n</head>\n<body>\n", esc(when(r.since)),
                   esc(when(r.until)), kCss);
  h += "<h1>GPU cost and waste report</h1>\n";
  h += fmt::format(
      "<p class=\"meta\">{} to {} ({}), step {} s, idle below {}% activity. Source: {}. Generated {}.</p>\n",
      esc(when(r.since)), esc(when(r.until)), esc(window_text(r)), static_cast<int64_t>(r.step_s), r.idle_threshold,
      esc(r.prometheus_url.empty() ? "Prometheus" : r.prometheus_url), esc(when(r.generated_at)));
  const auto& f = r.fragmentation;
  auto card = [&](const std::string& value, const std::string& what) {
    h += "<div class=\"card\"><b>" + esc(value) + "</b><span>" + esc(what) + "</span></div>";
  };
  h += "<div class=\"cards\">";
  card(std::to_string(r.gpu_pods), "GPU pods");
  card(fmt::format("{:.0f}", r.held_gpu_hours), "GPU-hours held");
  card(fmt::format("{:.0f}", r.idle_gpu_hours), "GPU-hours idle");
  card(money(r.idle_cost, r.currency), "cost of idle GPUs");
  card(std::to_string(r.idle.size()), "pods allocated but idle");
  card(std::to_string(f.fgd_idle_gpus - f.idle_gpus), "GPUs FGD would free");
  h += "</div>\n";
  if (!r.warnings.empty()) {
    h += "<div class=\"warn\">";
    for (const auto& w : r.warnings) h += esc(w) + "<br>";
    h += "</div>\n";
  }
  h += "<h2>Idle GPU-hours by namespace</h2>\n";
  std::vector<std::pair<std::string, double>> bars;
  for (size_t i = 0; i < std::min<size_t>(r.by_namespace.size(), 15); ++i) {
    bars.emplace_back(r.by_namespace[i].key, r.by_namespace[i].idle_gpu_hours);
  }
  h += bars.empty() ? "<p class=\"none\">No GPU pods with metrics.</p>\n"
                    : bar_chart("Idle GPU-hours by namespace", bars, "GPU-h");
  h += "<h2>Allocated but idle</h2>\n";
  h += html_table(kIdleHead, idle_rows(r), r.idle.size());
  h += "<h2>By namespace</h2>\n" +
       html_table(kRollHead, rollup_rows(r.by_namespace, r), r.by_namespace.size(), "NAMESPACE");
  h +=
      "<h2>By workload</h2>\n" + html_table(kRollHead, rollup_rows(r.by_workload, r), r.by_workload.size(), "WORKLOAD");
  h += "<h2>By owner</h2>\n" + html_table(kRollHead, rollup_rows(r.by_owner, r), r.by_owner.size(), "OWNER");
  h += "<h2>Right-sizing</h2>\n<p class=\"meta\">Peak framebuffer memory and mean activity over the window, with "
       "headroom, against the smaller MIG profiles of the GPU model or a time-sliced share.</p>\n";
  h += html_table(kRightHead, rightsize_rows(r), r.right_size.size());
  h += "<h2>Notebooks and Jobs holding GPUs after their last activity</h2>\n";
  h += html_table(kStaleHead, stale_rows(r), r.stale.size());
  h += fmt::format(
      "<h2>Fragmentation</h2>\n<p class=\"meta\">{} GPU nodes ({} modelled; MIG-partitioned nodes are not), {} GPUs, "
      "{} allocated to {} pods. Today's placement against the same pods placed by FGD in start order (kgpu sim's "
      "policy). Fragmentation ratio today {:.1f}%, with FGD {:.1f}%.</p>\n",
      f.nodes, f.nodes_modelled, f.gpus, gpus(f.gpus_allocated), f.pods, 100 * f.frag_ratio, 100 * f.fgd_frag_ratio);
  h += compare_chart(f);
  h += fmt::format("<p>FGD would free <b>{}</b> whole GPUs: {:.0f} GPU-hours, {} a day.{}</p>\n",
                   f.fgd_idle_gpus - f.idle_gpus, f.freed_gpu_hours_per_day,
                   esc(money(f.freed_cost_per_day, r.currency)),
                   f.fgd_unplaced > 0 ? fmt::format(" {} pods found no place.", f.fgd_unplaced) : "");
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace kgpu::cost
