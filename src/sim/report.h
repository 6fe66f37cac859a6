// Summaries of simulation runs: mean and spread per policy, as a table, CSV, JSON, and an SVG
// plot of allocation ratio against arrived ratio.
#pragma once

#include <string>
#include <vector>

#include "sim/simulator.h"

namespace kgpu::sim {

struct PolicySummary {
  std::string policy;
  int runs = 0;
  double alloc_mean = 0, alloc_std = 0;    // percent at the end (130% arrived)
  double frag90_mean = 0, frag90_std = 0;  // percent, over the runs that reached 90% arrived
  int frag90_runs = 0;
  double unscheduled_mean = 0;
  double seconds_mean = 0;
  std::vector<CurvePoint> mean_curve;
  // Time mode with a pending queue (queue_runs > 0): means over those runs of the all-pods
  // queueing delay percentiles (seconds), pods never placed, pending and fragmentation pod-hours.
  int queue_runs = 0;
  double delay_p50_mean = 0, delay_p95_mean = 0, delay_p99_mean = 0;
  double never_placed_mean = 0, wait_hours_mean = 0, fragmentation_hours_mean = 0;
};

std::vector<PolicySummary> summarize(const std::vector<RunResult>& runs);
std::string table(const std::vector<PolicySummary>& s);
std::string csv(const std::vector<RunResult>& runs);
std::string json(const std::vector<PolicySummary>& s, const std::vector<RunResult>& runs);
std::string svg(const std::vector<PolicySummary>& s, const std::string& title);

}  // namespace kgpu::sim
