// What the agent's health round pays to keep the CDI spec current: the driver files derived from a
// driver root (the real NVIDIA 560.35.03 file list of test/data/driver-root, recreated in a
// temporary directory, plus a host-sized /usr/bin of 2,000 entries), and the spec built from them
// for 8 GPUs. Both run every --health-interval (5 s by default).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "agent/plugin_manager.h"
#include "sharing/allocate.h"
#include "sharing/config.h"
#include "sharing/plan.h"
#include "../test/integration/paths.h"

namespace {

namespace fs = std::filesystem;
using namespace kgpu;

// The listed install under `root`, links recreated as the data file's header describes.
std::string make_root() {
  char tmpl[] = "/tmp/kgpu-cdi-bench-XXXXXX";
  const std::string root = ::mkdtemp(tmpl);
  std::ifstream in(KGPU_SOURCE_DIR + "/test/data/driver-root/nvidia-560.35.03-frugalware.files");
  std::map<std::string, std::map<std::string, std::vector<std::string>>> groups;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '/') continue;
    const fs::path p(line);
    const std::string dir = p.parent_path().string(), name = p.filename().string();
    fs::create_directories(root + dir);
    const auto so = name.find(".so");
    if (so == std::string::npos) {
      std::ofstream(root + line) << "x";
    } else {
      groups[dir][name.substr(0, so + 3)].push_back(name);
    }
  }
  for (auto& [dir, libs] : groups) {
    for (auto& [base, names] : libs) {
      std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
      std::ofstream(root + dir + "/" + names.back()) << "x";
      for (size_t i = 0; i + 1 < names.size(); ++i) fs::create_symlink(names[i + 1], root + dir + "/" + names[i]);
    }
  }
  for (int i = 0; i < 2000; ++i) std::ofstream(fmt::format("{}/usr/bin/tool-{}", root, i)) << "x";
  return root;
}

const std::string& root() {
  static const std::string r = make_root();
  return r;
}

void BM_DiscoverDriverFiles(benchmark::State& state) {
  const sharing::ListDir list = [](const std::string& dir) { return agent::list_driver_dir(dir); };
  size_t mounts = 0;
  for (auto _ : state) {
    auto f = sharing::discover_driver_files(root(), "560.35.03", list);
    mounts = f.mounts.size();
    benchmark::DoNotOptimize(f);
  }
  state.counters["mounts"] = static_cast<double>(mounts);
}
BENCHMARK(BM_DiscoverDriverFiles)->Unit(benchmark::kMicrosecond);

void BM_CdiSpecs8Gpus(benchmark::State& state) {
  gpu::Inventory inv;
  inv.driver_version = "560.35.03";
  for (unsigned i = 0; i < 8; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.uuid = fmt::format("GPU-{:08x}-1111-2222-3333-444444444444", i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.minor_number = i;
    inv.gpus.push_back(g);
  }
  inv.topology.assign(8, std::vector<gpu::Link>(8, gpu::Link::kSystem));
  sharing::Config config;
  auto plan = sharing::make_plan(inv, config);
  sharing::HostFacts host;
  host.exists = [](const std::string&) { return true; };
  host.driver = sharing::discover_driver_files(
      root(), "560.35.03", [](const std::string& dir) { return agent::list_driver_dir(dir); });
  host.hook_tool = "/usr/bin/nvidia-cdi-hook";
  size_t bytes = 0;
  for (auto _ : state) {
    auto specs = sharing::cdi_specs(*plan, config, host);
    bytes = specs->at(0).text.size();
    benchmark::DoNotOptimize(specs);
  }
  state.counters["spec_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_CdiSpecs8Gpus)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::error_code ec;
  fs::remove_all(root(), ec);
  return 0;
}
