// Cost of reading a node through NVML: one inventory and one telemetry sample of an 8-GPU HGX
// H100 node (one GPU with four MIG devices), through the fake libnvidia-ml.so.1 and the
// production dlopen path. The agent's sampler pays the telemetry cost once per interval.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include "gpu/node.h"

namespace {

std::unique_ptr<kgpu::gpu::NodeGpus> open_node() {
  setenv("KGPU_FAKE_NVML_CONFIG", KGPU_SOURCE_DIR "/examples/nodes/dgx-h100.yaml", 1);
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

}  // namespace

BENCHMARK_MAIN();
