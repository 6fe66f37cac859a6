// kgpu's informer over a large cluster served by the API-server stand-in: NODES nodes and PODS
// pods (shaped like real GPU pods: labels, owner, resources, env, probes, status with conditions
// and container statuses). Measures the initial sync (paged list), the informer's memory per
// object (RSS growth after the cache is built), and watch events handled per second while writer
// threads patch pods as fast as the server takes them.
// Usage: informer_bench [NODES=5000] [PODS=100000] [UPDATES=20000]
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "integration/test_env.h"
#include "apiclient/client.h"
#include "apiclient/config.h"
#include "apiclient/informer.h"

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

json node(int i) {
  return json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata",
               {{"name", fmt::format("gpu-node-{:05}", i)},
                {"labels",
                 {{"kubernetes.io/hostname", fmt::format("gpu-node-{:05}", i)},
                  {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                  {"nvidia.com/gpu.count", "8"},
                  {"topology.kubernetes.io/zone", fmt::format("zone-{}", i % 4)}}}}},
              {"spec", {{"taints", json::array({json{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}})}}},
              {"status",
               {{"capacity", {{"cpu", "192"}, {"memory", "2063731Mi"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
                {"allocatable", {{"cpu", "191"}, {"memory", "2013731Mi"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
                {"conditions", json::array({json{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"},
                                                 {"lastHeartbeatTime", "2026-12-01T10:00:00Z"}}})},
                {"nodeInfo", {{"kubeletVersion", "v1.35.0"}, {"containerRuntimeVersion", "containerd://2.1.1"}}}}}};
}

json pod(int i, int nodes) {
  const std::string name = fmt::format("job-{:06}", i);
  return json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", fmt::format("team-{}", i % 20)},
        {"labels", {{"app", fmt::format("job-{}", i / 8)}, {"team", fmt::format("team-{}", i % 20)}, {"tier", "batch"}}},
        {"annotations", {{"kgpu.io/gpus", std::to_string(i % 8)}}},
        {"ownerReferences", json::array({json{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", fmt::format("job-{}", i / 8)},
                                              {"uid", fmt::format("00000000-0000-4000-8000-{:012}", i / 8)}, {"controller", true}}})}}},
      {"spec",
       {{"nodeName", fmt::format("gpu-node-{:05}", i % nodes)},
        {"schedulerName", "default-scheduler"},
        {"restartPolicy", "Never"},
        {"tolerations", json::array({json{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}})},
        {"containers",
         json::array({json{{"name", "main"},
                           {"image", "nvcr.io/nvidia/pytorch:25.01-py3"},
                           {"command", json::array({"torchrun", "--nproc-per-node=1", "train.py"})},
                           {"env", json::array({json{{"name", "NCCL_DEBUG"}, {"value", "WARN"}},
                                                json{{"name", "MASTER_ADDR"}, {"value", "job-master"}}})},
                           {"resources", {{"requests", {{"cpu", "8"}, {"memory", "64Gi"}, {"nvidia.com/gpu", "1"}}},
                                          {"limits", {{"nvidia.com/gpu", "1"}}}}},
                           {"readinessProbe", {{"httpGet", {{"path", "/healthz"}, {"port", 8080}}}, {"periodSeconds", 10}}}}})}}},
      {"status",
       {{"phase", "Running"},
        {"podIP", fmt::format("10.{}.{}.{}", i / 65536 % 256, i / 256 % 256, i % 256)},
        {"conditions", json::array({json{{"type", "Ready"}, {"status", "True"}}, json{{"type", "PodScheduled"}, {"status", "True"}}})},
        {"containerStatuses", json::array({json{{"name", "main"}, {"ready", true}, {"restartCount", 0},
                                                {"image", "nvcr.io/nvidia/pytorch:25.01-py3"},
                                                {"state", {{"running", {{"startedAt", "2026-12-01T09:00:00Z"}}}}}}})}}}};
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::stoi(argv[1]) : 5000;
  const int pods = argc > 2 ? std::stoi(argv[2]) : 100000;
  const int updates = argc > 3 ? std::stoi(argv[3]) : 20000;
  kgpu::testing::TempDir dir;
  {
    std::ofstream out(dir.path() / "cluster.json");
    json items = json::array();
    for (int t = 0; t < 20; ++t) items.push_back(json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", fmt::format("team-{}", t)}}}});
    for (int i = 0; i < nodes; ++i) items.push_back(node(i));
    size_t pod_bytes = 0;
    for (int i = 0; i < pods; ++i) {
      items.push_back(pod(i, nodes));
      if (i < 100) pod_bytes += items.back().dump().size();
    }
    out << json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}.dump();
    fmt::print("cluster: {} nodes, {} pods ({} bytes of JSON per pod)\n", nodes, pods, pod_bytes / 100);
  }
  const auto load_start = Clock::now();
  kgpu::testing::ChildProcess server({KGPU_APISERVER, "--load", (dir.path() / "cluster.json").string(), "--kubeconfig",
                                      (dir.path() / "kubeconfig").string(), "--port-file", (dir.path() / "port").string(),
                                      "--history", "100000", "--bookmark-interval-ms", "1000"},
                                     {}, (dir.path() / "server.log").string());
  while (!std::filesystem::exists(dir.path() / "port") || std::filesystem::file_size(dir.path() / "port") == 0) {
    if (!server.running()) {
      fmt::print(stderr, "kgpu-apiserver did not start\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fmt::print("stand-in loaded the cluster in {:.1f} s\n", std::chrono::duration<double>(Clock::now() - load_start).count());
  auto cfg = kgpu::kube::config_from_kubeconfig_files({(dir.path() / "kubeconfig").string()}, "");
  cfg->qps = 0;  // unthrottled: measure the client, not the limiter
  auto client = kgpu::kube::Client::create(*cfg);
  if (!client) return 1;

  for (const auto* res : {&kgpu::kube::resources::kNodes, &kgpu::kube::resources::kPods}) {
    malloc_trim(0);
    const double before = rss_mib();
    kgpu::kube::InformerOptions o;
    o.resource = *res;
    auto inf = std::make_unique<kgpu::kube::Informer>(**client, o);
    inf->add_index("node", kgpu::kube::index::by_node_name());
    inf->add_index("namespace", kgpu::kube::index::by_namespace());
    const auto start = Clock::now();
    inf->start();
    if (!inf->wait_for_sync(std::chrono::minutes(10))) {
      fmt::print(stderr, "no sync: {}\n", inf->last_error());
      return 1;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    malloc_trim(0);
    const double after = rss_mib();
    fmt::print("informer {:<6} {:>7} objects: initial sync {:.2f} s ({:.0f} objects/s), cache {:.0f} MiB = {:.1f} KiB per object\n",
               res->plural, inf->size(), secs, static_cast<double>(inf->size()) / secs, after - before,
               (after - before) * 1024 / static_cast<double>(inf->size()));
    if (res != &kgpu::kube::resources::kPods) {
      inf->stop();
      continue;
    }
    // Watch throughput: writers patch pods; the informer counts the events it applied.
    std::atomic<int> next{0};
    const uint64_t events_before = inf->stats().events;
    const auto wstart = Clock::now();
    std::vector<std::thread> writers;
    for (int w = 0; w < 8; ++w) {
      writers.emplace_back([&] {
        auto c = kgpu::kube::Client::create(*cfg);
        for (int i = next++; i < updates; i = next++) {
          const int p = i % pods;
          (*c)->patch(kgpu::kube::resources::kPods, fmt::format("team-{}", p % 20), fmt::format("job-{:06}", p),
                      kgpu::kube::PatchType::kMerge, json{{"metadata", {{"labels", {{"step", std::to_string(i)}}}}}});
        }
      });
    }
    for (auto& t : writers) t.join();
    const double write_secs = std::chrono::duration<double>(Clock::now() - wstart).count();
    while (inf->stats().events - events_before < static_cast<uint64_t>(updates) &&
           Clock::now() - wstart < std::chrono::minutes(5)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double all_secs = std::chrono::duration<double>(Clock::now() - wstart).count();
    const uint64_t got = inf->stats().events - events_before;
    fmt::print("watch: {} updates written in {:.2f} s ({:.0f}/s by 8 writers); informer applied {} events, the last "
               "{:.3f} s after the last write ({:.0f} events/s end to end)\n",
               updates, write_secs, updates / write_secs, got, all_secs - write_secs, static_cast<double>(got) / all_secs);
    inf->stop();
  }
  return 0;
}
