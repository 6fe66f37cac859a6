// The scheduler's Prometheus families (docs/scheduler.md): attempts and latency by verb and
// result, preemption verdicts, and gauges computed at scrape time (allocation, fragmentation,
// pending GPU pods by reason, nodes with and without an agent report).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kgpu::scheduler {

struct PoolGauges {
  std::string resource;
  int64_t capacity_milli = 0, allocated_milli = 0;
  double fragmentation = 0;  // the FGD paper's ratio: fragmented / idle GPU capacity
  size_t nodes = 0;
};

class Metrics {
 public:
  static constexpr std::array<double, 15> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5};
  void observe_filter(const std::string& result, std::chrono::steady_clock::duration d) {
    observe("filter", result, d);
  }
  void observe_bind(const std::string& result, std::chrono::steady_clock::duration d) { observe("bind", result, d); }
  void count_preempt_node(bool kept);
  std::string render(const std::vector<PoolGauges>& pools, const std::map<std::string, uint64_t>& pending,
                     uint64_t nodes_reported, uint64_t nodes_unreported) const;

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  void observe(const std::string& verb, const std::string& result, std::chrono::steady_clock::duration d);

  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Histogram> attempts_;  // (verb, result)
  uint64_t preempt_kept_ = 0, preempt_dropped_ = 0;
};

}  // namespace kgpu::scheduler
