// Cost of one exporter sample on an 8-GPU HGX H100 node (GPU 7 with four MIG devices): NVML reads
// through the fake libnvidia-ml.so.1, the MIG instances' series, and the rendering of the page,
// with dcgm-exporter's default counters, and with its DCGM_EXP_* fields enabled
// (test/data/counters/exporter-fields.csv). The agent pays this once per collection interval.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>

#include "gpu/node.h"
#include "metrics/sampler.h"
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

void run(benchmark::State& state, const std::vector<kgpu::metrics::Counter>& counters) {
  auto node = open_node();
  kgpu::metrics::SamplerOptions o;
  o.hostname = "bench";
  o.pod_resources_socket = "";
  o.counters = counters;
  kgpu::metrics::Sampler s(*node, o);
  for (auto _ : state) s.sample_now();
  state.counters["page_bytes"] = static_cast<double>(s.page()->size());
}

void BM_SampleDefaultCounters(benchmark::State& state) { run(state, kgpu::metrics::default_counters()); }
BENCHMARK(BM_SampleDefaultCounters)->Unit(benchmark::kMicrosecond);

void BM_SampleExporterFields(benchmark::State& state) {
  std::ifstream in(KGPU_SOURCE_DIR + "/test/data/counters/exporter-fields.csv");
  std::stringstream text;
  text << in.rdbuf();
  auto set = kgpu::metrics::parse_counters(text.str(), "exporter-fields.csv");
  if (!set) abort();
  run(state, set->counters);
}
BENCHMARK(BM_SampleExporterFields)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
