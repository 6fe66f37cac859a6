#include "scheduler/metrics.h"

#include <fmt/format.h>

#include "metrics/exposition.h"

namespace kgpu::scheduler {

namespace ex = metrics::exposition;

void Metrics::observe(const std::string& verb, const std::string& result, std::chrono::steady_clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  std::lock_guard lock(mu_);
  Histogram& h = attempts_[{verb, result}];
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (s <= kBuckets[i]) ++h.buckets[i];
  ++h.count;
  h.sum += s;
}

void Metrics::count_preempt_node(bool kept) {
  std::lock_guard lock(mu_);
  ++(kept ? preempt_kept_ : preempt_dropped_);
}

namespace {

void gauge(std::string& out, std::string_view name, std::string_view label, std::string_view value, double v) {
  out += name;
  out += '{';
  ex::label(out, label, value);
  out += fmt::format("}} {}\n", v);
}

}  // namespace

std::string Metrics::render(const std::vector<PoolGauges>& pools, const std::map<std::string, uint64_t>& pending,
                            uint64_t nodes_reported, uint64_t nodes_unreported) const {
  std::string out;
  std::lock_guard lock(mu_);
  ex::family(out, "kgpu_scheduler_attempts_total", "counter", "Extender calls answered, by verb and result.");
  for (const auto& [key, h] : attempts_)
    ex::sample(out, "kgpu_scheduler_attempts_total", {{"verb", key.first}, {"result", key.second}}, h.count);
  ex::family(out, "kgpu_scheduler_attempt_duration_seconds", "histogram",
             "Time to answer an extender call (filter: the whole decision; bind: including the API write).");
  for (const auto& [key, h] : attempts_) {
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      out += "kgpu_scheduler_attempt_duration_seconds_bucket{";
      ex::label(out, "verb", key.first);
      ex::label(out, "result", key.second);
      ex::label(out, "le", fmt::format("{}", kBuckets[i]));
      out += fmt::format("}} {}\n", h.buckets[i]);
    }
    out += "kgpu_scheduler_attempt_duration_seconds_bucket{";
    ex::label(out, "verb", key.first);
    ex::label(out, "result", key.second);
    ex::label(out, "le", "+Inf");
    out += fmt::format("}} {}\n", h.count);
    ex::sample(out, "kgpu_scheduler_attempt_duration_seconds_count", {{"verb", key.first}, {"result", key.second}},
               h.count);
    out += "kgpu_scheduler_attempt_duration_seconds_sum{";
    ex::label(out, "verb", key.first);
    ex::label(out, "result", key.second);
    out += fmt::format("}} {}\n", h.sum);
  }
  ex::family(out, "kgpu_scheduler_preemption_nodes_total", "counter",
             "Candidate nodes of the preempt verb: kept (the victims free GPUs the pod fits) or dropped.");
  ex::sample(out, "kgpu_scheduler_preemption_nodes_total", {{"result", "kept"}}, preempt_kept_);
  ex::sample(out, "kgpu_scheduler_preemption_nodes_total", {{"result", "dropped"}}, preempt_dropped_);
  ex::family(out, "kgpu_scheduler_gpu_capacity", "gauge", "GPUs kgpu can assign, by resource (healthy, reported).");
  for (const auto& p : pools)
    gauge(out, "kgpu_scheduler_gpu_capacity", "resource", p.resource, p.capacity_milli / 1000.0);
  ex::family(out, "kgpu_scheduler_gpu_allocated", "gauge", "GPUs held by pods (shares as fractions), by resource.");
  for (const auto& p : pools)
    gauge(out, "kgpu_scheduler_gpu_allocated", "resource", p.resource, p.allocated_milli / 1000.0);
  ex::family(out, "kgpu_scheduler_gpu_allocation_ratio", "gauge", "Allocated over capacity, by resource.");
  for (const auto& p : pools)
    gauge(out, "kgpu_scheduler_gpu_allocation_ratio", "resource", p.resource,
          p.capacity_milli > 0 ? static_cast<double>(p.allocated_milli) / p.capacity_milli : 0);
  ex::family(out, "kgpu_scheduler_gpu_fragmentation_ratio", "gauge",
             "Fragmented over idle GPU capacity for the live target workload (FGD paper's definition), by resource.");
  for (const auto& p : pools)
    gauge(out, "kgpu_scheduler_gpu_fragmentation_ratio", "resource", p.resource, p.fragmentation);
  ex::family(out, "kgpu_scheduler_pool_nodes", "gauge", "Nodes with GPUs of the resource.");
  for (const auto& p : pools)
    gauge(out, "kgpu_scheduler_pool_nodes", "resource", p.resource, static_cast<double>(p.nodes));
  ex::family(out, "kgpu_scheduler_pending_gpu_pods", "gauge",
             "Unbound GPU pods by why they are not placed (the last filter's main reason, NotAttempted, "
             "SchedulingGated, Binding).");
  for (const auto& [reason, n] : pending) ex::sample(out, "kgpu_scheduler_pending_gpu_pods", {{"reason", reason}}, n);
  ex::family(out, "kgpu_scheduler_nodes", "gauge", "Nodes known, by whether their agent reported GPUs (kgpu.io/gpus).");
  ex::sample(out, "kgpu_scheduler_nodes", {{"report", "present"}}, nodes_reported);
  ex::sample(out, "kgpu_scheduler_nodes", {{"report", "missing"}}, nodes_unreported);
  return out;
}

}  // namespace kgpu::scheduler
