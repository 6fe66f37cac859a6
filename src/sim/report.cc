#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace kgpu::sim {

namespace {

std::pair<double, double> mean_std(const std::vector<double>& v) {
  if (v.empty()) return {0, 0};
  double m = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return {m, v.size() > 1 ? std::sqrt(s / static_cast<double>(v.size() - 1)) : 0};
}

}  // namespace

std::vector<PolicySummary> summarize(const std::vector<RunResult>& runs) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const RunResult*>> by;
  for (const auto& r : runs) {
    if (!by.contains(r.policy)) order.push_back(r.policy);
    by[r.policy].push_back(&r);
  }
  std::vector<PolicySummary> out;
  for (const auto& p : order) {
    PolicySummary s;
    s.policy = p;
    std::vector<double> alloc, frag, unsched, secs;
    size_t points = SIZE_MAX;
    for (const auto* r : by[p]) {
      alloc.push_back(100 * r->final_allocated);
      if (r->frag_ratio_at_90 >= 0) frag.push_back(100 * r->frag_ratio_at_90);
      int u = 0;
      for (const auto& [k, n] : r->unscheduled_by_shape) u += n;
      unsched.push_back(u);
      secs.push_back(r->seconds);
      points = std::min(points, r->curve.size());
    }
    std::vector<double> p50, p95, p99, never, wait_h, frag_h;
    for (const auto* r : by[p]) {
      if (!r->queue.enabled) continue;
      p50.push_back(r->queue.all.delay_p50);
      p95.push_back(r->queue.all.delay_p95);
      p99.push_back(r->queue.all.delay_p99);
      never.push_back(static_cast<double>(r->queue.all.never_placed));
      wait_h.push_back(r->queue.all.wait_pod_seconds / 3600);
      frag_h.push_back(r->queue.all.fragmentation_pod_seconds / 3600);
    }
    s.queue_runs = static_cast<int>(p50.size());
    s.delay_p50_mean = mean_std(p50).first;
    s.delay_p95_mean = mean_std(p95).first;
    s.delay_p99_mean = mean_std(p99).first;
    s.never_placed_mean = mean_std(never).first;
    s.wait_hours_mean = mean_std(wait_h).first;
    s.fragmentation_hours_mean = mean_std(frag_h).first;
    s.runs = static_cast<int>(by[p].size());
    std::tie(s.alloc_mean, s.alloc_std) = mean_std(alloc);
    std::tie(s.frag90_mean, s.frag90_std) = mean_std(frag);
    s.frag90_runs = static_cast<int>(frag.size());
    s.unscheduled_mean = mean_std(unsched).first;
    s.seconds_mean = mean_std(secs).first;
    for (size_t i = 0; i < points; ++i) {
      CurvePoint c{by[p][0]->curve[i].arrived, 0};
      for (const auto* r : by[p]) c.allocated += r->curve[i].allocated;
      c.allocated /= static_cast<double>(by[p].size());
      s.mean_curve.push_back(c);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string table(const std::vector<PolicySummary>& s) {
  std::string out = fmt::format("{:<16}{:>6}{:>22}{:>22}{:>14}{:>10}\n", "POLICY", "RUNS", "GPU ALLOC % (end)",
                                "FRAG % (90% arrived)", "UNSCHEDULED", "SECONDS");
  for (const auto& p : s) {
    const std::string frag = p.frag90_runs > 0 ? fmt::format("{:>15.1f} ± {:<4.1f}", p.frag90_mean, p.frag90_std)
                                               : fmt::format("{:>22}", "n/a");
    out += fmt::format("{:<16}{:>6}{:>15.2f} ± {:<4.2f}{}{:>14.0f}{:>10.2f}\n", p.policy, p.runs, p.alloc_mean,
                       p.alloc_std, frag, p.unscheduled_mean, p.seconds_mean);
  }
  if (std::none_of(s.begin(), s.end(), [](const PolicySummary& p) { return p.queue_runs > 0; })) return out;
  out += fmt::format("\n{:<16}{:>28}{:>14}{:>16}{:>22}\n", "PENDING QUEUE", "DELAY s p50 / p95 / p99",
                     "NEVER PLACED", "PENDING pod-h", "BEHIND FRAG. pod-h");
  for (const auto& p : s) {
    if (p.queue_runs == 0) continue;
    out += fmt::format("{:<16}{:>28}{:>14.0f}{:>16.1f}{:>22.1f}\n", p.policy,
                       fmt::format("{:.0f} / {:.0f} / {:.0f}", p.delay_p50_mean, p.delay_p95_mean, p.delay_p99_mean),
                       p.never_placed_mean, p.wait_hours_mean, p.fragmentation_hours_mean);
  }
  return out;
}

std::string csv(const std::vector<RunResult>& runs) {
  std::string out =
      "policy,seed,arrivals,scheduled,arrived_pct,allocated_pct,peak_allocated_pct,frag_pct_at_90,seconds,"
      "never_placed,delay_p50_s,delay_p95_s,delay_p99_s,pending_pod_s,fragmentation_pod_s\n";
  for (const auto& r : runs) {
    // The queue's columns are empty without a pending queue.
    const auto& q = r.queue.all;
    const std::string queue =
        r.queue.enabled ? fmt::format("{},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f}", q.never_placed, q.delay_p50, q.delay_p95,
                                      q.delay_p99, q.wait_pod_seconds, q.fragmentation_pod_seconds)
                        : ",,,,,";
    out += fmt::format("{},{},{},{},{:.4f},{:.4f},{:.4f},{},{:.3f},{}\n", r.policy, r.seed, r.arrivals, r.scheduled,
                       100 * r.final_arrived, 100 * r.final_allocated, 100 * r.peak_allocated,
                       r.frag_ratio_at_90 >= 0 ? fmt::format("{:.4f}", 100 * r.frag_ratio_at_90) : "", r.seconds,
                       queue);
  }
  return out;
}

std::string json(const std::vector<PolicySummary>& s, const std::vector<RunResult>& runs) {
  nlohmann::json j;
  auto class_json = [](const ClassQueueStats& c) {
    return nlohmann::json{{"arrived", c.arrived},
                          {"placed", c.placed},
                          {"waited", c.waited},
                          {"neverPlaced", c.never_placed},
                          {"delaySecondsP50", c.delay_p50},
                          {"delaySecondsP95", c.delay_p95},
                          {"delaySecondsP99", c.delay_p99},
                          {"delaySecondsMax", c.delay_max},
                          {"pendingPodSeconds", c.wait_pod_seconds},
                          {"fragmentationPodSeconds", c.fragmentation_pod_seconds}};
  };
  for (const auto& p : s) {
    j["policies"].push_back(
        {{"policy", p.policy},
         {"runs", p.runs},
         {"allocatedPctMean", p.alloc_mean},
         {"allocatedPctStd", p.alloc_std},
         {"fragmentationPctAt90Mean", p.frag90_runs ? nlohmann::json(p.frag90_mean) : nlohmann::json()},
         {"fragmentationPctAt90Std", p.frag90_runs ? nlohmann::json(p.frag90_std) : nlohmann::json()},
         {"unscheduledMean", p.unscheduled_mean},
         {"neverPlacedMean", p.queue_runs ? nlohmann::json(p.never_placed_mean) : nlohmann::json()},
         {"secondsMean", p.seconds_mean}});
  }
  for (const auto& r : runs) {
    j["runs"].push_back({{"policy", r.policy},
                         {"seed", r.seed},
                         {"arrivals", r.arrivals},
                         {"scheduled", r.scheduled},
                         {"allocatedPct", 100 * r.final_allocated},
                         {"peakAllocatedPct", 100 * r.peak_allocated},
                         {"fragmentationPctAt90",
                          r.frag_ratio_at_90 >= 0 ? nlohmann::json(100 * r.frag_ratio_at_90) : nlohmann::json()},
                         {"placementHash", fmt::format("{:016x}", r.placement_hash)},
                         {"seconds", r.seconds},
                         {"cpuSeconds", r.cpu_seconds},
                         {"unscheduledByShape", r.unscheduled_by_shape},
                         {"unscheduledByReason", r.unscheduled_by_reason}});
    if (r.queue.enabled) {
      nlohmann::json by_class = nlohmann::json::object();
      for (const auto& [c, stats] : r.queue.by_class) by_class[gpu_class_name(c)] = class_json(stats);
      j["runs"].back()["queue"] = {{"attempts", r.queue.attempts},
                                   {"peakPending", r.queue.peak_pending},
                                   {"endTime", r.queue.end_time},
                                   {"all", class_json(r.queue.all)},
                                   {"byGpuRequest", by_class}};
    }
  }
  return j.dump(2) + "\n";
}

std::string svg(const std::vector<PolicySummary>& s, const std::string& title) {
  const double w = 720, h = 480, left = 60, right = 170, top = 40, bottom = 50;
  const double pw = w - left - right, ph = h - top - bottom;
  double xmax = 130;  // percent arrived; wider when a run went further
  for (const auto& p : s) {
    if (!p.mean_curve.empty()) xmax = std::max(xmax, std::ceil(100 * p.mean_curve.back().arrived / 10) * 10);
  }
  const double ymin = 0, ymax = 100;
  const std::string safe_title =
      escape(title, {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}});  // XML text
  auto X = [&](double v) { return left + pw * v / xmax; };
  auto Y = [&](double v) { return top + ph * (1 - (v - ymin) / (ymax - ymin)); };
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#17becf"};
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n",
      w, h, left, safe_title);
  const int step = std::max(10, static_cast<int>(std::ceil(xmax / 13 / 10)) * 10);
  for (int t = 0; t <= static_cast<int>(xmax); t += step) {
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/><text x=\"{0}\" y=\"{3}\" "
        "text-anchor=\"middle\">{4}</text>\n",
        X(t), Y(ymin), Y(ymax), Y(ymin) + 16, t);
  }
  for (int t = 0; t <= 100; t += 10) {
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4}\" "
        "text-anchor=\"end\">{5}</text>\n",
        X(0), Y(t), X(xmax), X(0) - 6, Y(t) + 4, t);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">arrived GPU demand (% of capacity)</text>\n",
                     left + pw / 2, h - 12);
  out += fmt::format(
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">GPU allocation "
      "ratio (%)</text>\n",
      top + ph / 2, top + ph / 2);
  for (size_t i = 0; i < s.size(); ++i) {
    const char* c = colors[i % std::size(colors)];
    std::string pts;
    for (const auto& p : s[i].mean_curve)
      pts += fmt::format("{:.1f},{:.1f} ", X(100 * p.arrived), Y(100 * p.allocated));
    out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" points=\"{}\"/>\n", c, pts);
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"3\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{} "
        "{:.2f}%</text>\n",
        w - right + 12, top + 18 * i + 6, c, w - right + 32, top + 18 * i + 11, s[i].policy, s[i].alloc_mean);
  }
  return out + "</svg>\n";
}

}  // namespace kgpu::sim
