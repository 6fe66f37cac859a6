// The ResourceSlice publisher (src/dra/slices.h) against the API-server stand-in: how long one pass
// takes to publish a change of a node's pool — a GPU lost (taint, generation bump), a MIG re-layout
// of one GPU, nothing changed — for an 8-GPU node with 7 MIG devices each (56 devices, one slice)
// and a 32-GPU pool (224 devices: 2 slices, 4 with a taint). Each figure is the wall time of
// SlicePublisher::sync_once() (list, then the writes), over ROUNDS rounds: median and p90.
// Usage: dra_slices_bench [ROUNDS=50]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "dra/slices.h"
#include "integration/test_env.h"
#include "apiclient/client.h"
#include "apiclient/config.h"

using kgpu::dra::DeviceHealth;
using kgpu::dra::PublishedDevice;
using nlohmann::json;
using Steady = std::chrono::steady_clock;

namespace {

// A MIG device with the attributes and capacities NVIDIA's driver publishes (14 in all).
json mig(int gpu, const std::string& profile, int id, int start, const std::string& memory, int sms) {
  std::string compact = profile;
  std::erase(compact, '.');
  return json{{"name", fmt::format("gpu-{}-mig-{}-{}-{}", gpu, compact, id, start)},
              {"attributes",
               {{"type", {{"string", "mig"}}},
                {"uuid", {{"string", fmt::format("MIG-{:08x}-0000-4000-8000-{:012x}", gpu, id * 8 + start)}}},
                {"parentUUID", {{"string", fmt::format("GPU-{:08x}-0000-4000-8000-000000000000", gpu)}}},
                {"profile", {{"string", profile}}},
                {"productName", {{"string", "NVIDIA H100 80GB HBM3"}}},
                {"brand", {{"string", "Nvidia"}}},
                {"architecture", {{"string", "Hopper"}}},
                {"cudaComputeCapability", {{"version", "9.0.0"}}},
                {"driverVersion", {{"version", "570.86.15"}}},
                {"cudaDriverVersion", {{"version", "12.8.0"}}},
                {"resource.kubernetes.io/pciBusID", {{"string", fmt::format("0000:{:02x}:00.0", 0x18 + gpu)}}}}},
              {"capacity",
               {{"memory", {{"value", memory}}},
                {"multiprocessors", {{"value", std::to_string(sms)}}},
                {"copyEngines", {{"value", "1"}}}}}};
}

json whole(int gpu) {
  json d = mig(gpu, "7g.80gb", 0, 0, "80Gi", 132);
  d["name"] = fmt::format("gpu-{}", gpu);
  d["attributes"]["type"] = {{"string", "gpu"}};
  d["attributes"].erase("profile");
  d["attributes"].erase("parentUUID");
  return d;
}

std::vector<PublishedDevice> pool(int gpus, int whole_gpu = -1) {
  std::vector<PublishedDevice> out;
  for (int g = 0; g < gpus; ++g) {
    if (g == whole_gpu) {
      out.push_back({whole(g), {}});
      continue;
    }
    for (int p = 0; p < 7; ++p) out.push_back({mig(g, "1g.10gb", 19, p, "9856Mi", 16), {}});
  }
  return out;
}

struct Stat {
  double median_ms = 0, p90_ms = 0;
};
Stat stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return Stat{v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)]};
}

double timed(kgpu::dra::SlicePublisher& p, std::vector<PublishedDevice> devices) {
  p.update(std::move(devices));
  const auto start = Steady::now();
  auto r = p.sync_once();
  const double ms = std::chrono::duration<double, std::milli>(Steady::now() - start).count();
  if (!r) {
    fmt::print(stderr, "publish failed: {}\n", r.error().message);
    std::exit(1);
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::stoi(argv[1]) : 50;
  kgpu::testing::TempDir dir;
  kgpu::testing::ChildProcess server({KGPU_APISERVER, "--kubeconfig", (dir.path() / "kubeconfig").string(),
                                      "--port-file", (dir.path() / "port").string()},
                                     {}, (dir.path() / "server.log").string());
  while (!std::filesystem::exists(dir.path() / "port") || std::filesystem::file_size(dir.path() / "port") == 0) {
    if (!server.running()) {
      fmt::print(stderr, "kgpu-apiserver did not start\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kgpu::kube::LoadOptions lo;
  lo.kubeconfig = (dir.path() / "kubeconfig").string();
  auto config = kgpu::kube::load_config(lo);
  if (!config) {
    fmt::print(stderr, "{}\n", config.error().message);
    return 1;
  }
  // The client's request limiter (20/s, burst 40 by default) paces a pass of many writes: once
  // with the default, as the agent runs, once without, the publisher's and server's own cost.
  for (const double qps : {config->qps, 1e6}) {
    auto cfg = *config;
    cfg.qps = qps;
    cfg.burst = qps > 1000 ? 1'000'000 : config->burst;
    auto client = kgpu::kube::Client::create(cfg);
    if (!client) return 1;
    auto& c = **client;
    fmt::print("client limiter: {}\n",
               qps > 1000 ? std::string("none") : fmt::format("{} requests/s, burst {}", qps, cfg.burst));
    fmt::print("{:<34} {:>8} {:>10} {:>10} {:>7}\n", "case", "devices", "median ms", "p90 ms", "writes");
    for (const int gpus : {8, 32}) {
      const std::string node = fmt::format("node-{}-{}", gpus, qps > 1000 ? "fast" : "paced");
      if (!c.create(kgpu::kube::resources::kNodes, "", json{{"metadata", {{"name", node}}}})) return 1;
      kgpu::dra::PublisherOptions o;
      o.node_name = node;
      kgpu::dra::SlicePublisher p(c, o);
      const auto base = pool(gpus);
      const double first = timed(p, base);
      std::vector<double> lost, relayout, unchanged;
      uint64_t writes_before = 0;
      uint64_t change_writes = 0, idle_writes = 0;
      for (int r = 0; r < rounds; ++r) {
        auto tainted = base;
        for (int k = 0; k < 7; ++k) tainted[k].health = DeviceHealth{false, false, true, "GPU lost", {}};
        auto s = p.stats();
        writes_before = s.creates + s.updates + s.deletes;
        lost.push_back(timed(p, tainted));
        relayout.push_back(timed(p, pool(gpus, r % gpus)));
        s = p.stats();
        change_writes += s.creates + s.updates + s.deletes - writes_before;
        writes_before = s.creates + s.updates + s.deletes;
        unchanged.push_back(timed(p, pool(gpus, r % gpus)));
        s = p.stats();
        idle_writes += s.creates + s.updates + s.deletes - writes_before;
        timed(p, base);
      }
      const size_t n = base.size();
      fmt::print("{:<34} {:>8} {:>10.2f} {:>10} {:>7}\n", "first publication (slices created)", n, first, "",
                 p.stats().slices);
      const auto print = [&](const char* what, const std::vector<double>& v, const std::string& writes) {
        const Stat s = stat(v);
        fmt::print("{:<34} {:>8} {:>10.2f} {:>10.2f} {:>7}\n", what, n, s.median_ms, s.p90_ms, writes);
      };
      print("GPU lost (7 devices NoExecute)", lost, "");
      print("MIG re-layout of one GPU", relayout, "");
      fmt::print("{:<34} writes per change pair (lost + re-layout): {:.1f}\n", "", double(change_writes) / rounds);
      print("unchanged (no write)", unchanged, fmt::format("{:.1f}", double(idle_writes) / rounds));
    }
  }
  return 0;
}
