// Cost of reading a node through NVML: one inventory and one telemetry sample of an 8-GPU HGX
// H100 node (one GPU with four MIG devices), through the fake libnvidia-ml.so.1 and the
// production dlopen path. The agent's sampler pays the telemetry cost once per interval.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include "gpu/dcgm/profiler.h"
#include "gpu/node.h"
#include "../test/integration/paths.h"

namespace {

std::unique_ptr<kgpu::gpu::NodeGpus> open_node() {
  setenv("KGPU_FAKE_NVML_CONFIG", (KGPU_SOURCE_DIR + "/examples/nodes/dgx-h100.yaml").c_str(), 1);
  auto node = kgpu::gpu::NodeGpus::open(KGPU_FAKE_NVML);
  if (!node) {
    fprintf(stderr, "%s\n", node.error().message.c_str());
    abort();
  }
  return std::move(*node);
}

void BM_Inventory(benchmark::State& state) {
  auto node = open_node();
  for (auto _ : state) {
    auto inv = node->inventory();
    benchmark::DoNotOptimize(inv);
  }
}
BENCHMARK(BM_Inventory)->Unit(benchmark::kMicrosecond);

void BM_Telemetry(benchmark::State& state) {
  auto node = open_node();
  size_t n = 0;
  for (auto _ : state) {
    auto ts = node->telemetry();
    n = ts.size();
    benchmark::DoNotOptimize(ts);
  }
  state.counters["devices"] = static_cast<double>(n);
}
BENCHMARK(BM_Telemetry)->Unit(benchmark::kMicrosecond);

void BM_Processes(benchmark::State& state) {
  auto node = open_node();
  for (auto _ : state) {
    for (unsigned i = 0; i < 8; ++i) {
      auto ps = node->processes(i);
      benchmark::DoNotOptimize(ps);
    }
  }
}
BENCHMARK(BM_Processes)->Unit(benchmark::kMicrosecond);

// One read of DCGM's 12 profiling fields for an 8-GPU A100 node (no GPM) through the production
// loader into the fake libdcgm.so.4 (embedded): kgpu's cost per sample where DCGM fills the
// profiling fields, not DCGM's own cost of measuring them.
void BM_DcgmProfilingRead(benchmark::State& state) {
  const std::string node = "/tmp/kgpu-bench-dgx-a100.yaml";
  if (FILE* f = fopen(node.c_str(), "w")) {
    fputs("preset: dgx-a100-8\n", f);
    fclose(f);
  }
  setenv("KGPU_FAKE_NVML_CONFIG", node.c_str(), 1);
  kgpu::dcgm::ProfilerOptions o;
  o.library = KGPU_FAKE_DCGM;
  for (const auto& f : kgpu::dcgm::kProfilingFields) o.fields.push_back(f.id);
  kgpu::dcgm::Profiler p(o);
  if (!p.start()) {
    fprintf(stderr, "%s\n", p.problem().c_str());
    abort();
  }
  size_t values = 0;
  for (auto _ : state) {
    auto r = p.read();
    values = 0;
    for (const auto& [uuid, fields] : r.gpus) values += fields.size();
    for (const auto& [key, fields] : r.instances) values += fields.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["values"] = static_cast<double>(values);
}
BENCHMARK(BM_DcgmProfilingRead)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
