// A Node as `kgpu scheduler` sees it in tests: its agent's GPU report (kgpu.io/gpus) and its
// allocatable CPU and memory.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include <memory>

#include "common/clock.h"
#include "k8s/gpu_assignment.h"
#include "scheduler/extender.h"
#include "scheduler/scheduler.h"

namespace kgpu::testing {

// `gpus` GPUs named "<name>-g<i>" under `resource`, `replicas` each, with `used` entries on GPU i.
inline nlohmann::json report_node(const std::string& name, int gpus, const std::string& resource = "nvidia.com/gpu",
                                  int replicas = 1, std::vector<std::pair<int, k8s::GpuUse>> used = {},
                                  const std::string& cpu = "8", const std::string& memory = "64Gi") {
  k8s::NodeGpuReport r;
  for (int i = 0; i < gpus; ++i) {
    k8s::ReportedGpu g;
    g.index = i;
    g.uuid = name + "-g" + std::to_string(i);
    g.resource = resource;
    g.replicas = replicas;
    for (const auto& [at, u] : used)
      if (at == i) g.used.push_back(u);
    r.gpus.push_back(g);
  }
  return nlohmann::json{
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", name}, {"annotations", {{k8s::kAnnotationNodeGpus, k8s::format_node_report(r)}}}}},
      {"status", {{"allocatable", {{"cpu", cpu}, {"memory", memory}}}}}};
}

// kube-scheduler's ExtenderArgs for `pod` over `nodes` (names only, as with nodeCacheCapable).
inline scheduler::ExtenderArgs args_for(const nlohmann::json& pod, const std::vector<std::string>& nodes) {
  scheduler::ExtenderArgs a;
  a.pod = pod;
  a.set_node_names({nodes.begin(), nodes.end()});
  a.names_only = true;
  return a;
}

// A scheduler without API access on `clock` (the test owns both); nullptr, with a test failure,
// when it cannot be made.
inline std::unique_ptr<scheduler::GpuScheduler> offline_scheduler(FakeClock& clock, scheduler::SchedulerOptions o = {}) {
  o.clock = &clock;
  auto s = scheduler::GpuScheduler::create(o, nullptr, nullptr);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

}  // namespace kgpu::testing
