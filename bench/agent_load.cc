// Footprint of `kgpu agent` on an 8-GPU node with 64 pods sharing the GPUs through
// time-slicing replicas (8 per GPU): scrape latency p50/p99, resident memory, and CPU per second
// of wall time at a 1 s collection interval.
//
// The agent runs as its own process against the fake NVML, a kubelet peer serving PodResources
// (64 pods), and a fabricated /proc and kubelet log tree naming all 64 containers.
//
// Usage: agent_load [seconds=20] [scrapes=2000]
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "../test/integration/test_env.h"
#include "../test/peers/kubelet_peer.h"

using namespace kgpu::testing;

namespace {

std::string uuid(int gpu) { return "GPU-00000000-0000-0000-0000-0000000000" + std::to_string(10 + gpu); }

long rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return -1;
}

double cpu_seconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(s.substr(s.rfind(')') + 2));
  std::string f;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoul(f);
    if (i == 15) stime = std::stoul(f);
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 20;
  const int scrapes = argc > 2 ? std::atoi(argv[2]) : 2000;
  TempDir dir;

  std::string node = "preset: hgx-h100-8\ngpus:\n";
  std::vector<PeerPod> pods;
  int pid = 20000;
  for (int g = 0; g < 8; ++g) {
    node += "  - index: " + std::to_string(g) + "\n    uuid: " + uuid(g) +
            "\n    telemetry: {gpuUtil: {min: 20, max: 95, periodSeconds: 30}}\n    processes:\n";
    for (int r = 0; r < 8; ++r, ++pid) {
      const std::string name = "pod-" + std::to_string(g) + "-" + std::to_string(r);
      char cid[65];
      std::snprintf(cid, sizeof cid, "%064x", pid);
      char uid[37];
      std::snprintf(uid, sizeof uid, "%08x-0000-0000-0000-%012x", pid, pid);
      node += "      - {pid: " + std::to_string(pid) + ", usedMemoryMiB: 4096, smUtil: {min: 1, max: 12, periodSeconds: 20}}\n";
      std::string u = uid;
      std::replace(u.begin(), u.end(), '-', '_');
      dir.write("proc/" + std::to_string(pid) + "/cgroup",
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u +
                    ".slice/cri-containerd-" + cid + ".scope\n");
      dir.write("containers/" + name + "_team-" + std::to_string(g) + "_app-" + cid + ".log", "");
      dir.write("pods/team-" + std::to_string(g) + "_" + name + "_" + uid + "/app/0.log", "");
      pods.push_back(PeerPod{"team-" + std::to_string(g), name,
                             {{"app", "nvidia.com/gpu", {uuid(g) + "::" + std::to_string(r)}}}});
    }
  }
  const auto node_path = dir.write("node.yaml", node);
  KubeletPeer peer((dir.path() / "kubelet.sock").string());
  peer.set_pods(pods);
  peer.start();

  const std::string d = dir.path().string();
  ChildProcess agent({KGPU_BINARY, "agent", "-a", "127.0.0.1:0", "-c", "1000",
                      "--nvml-library", KGPU_FAKE_NVML, "--pod-resources-socket", peer.socket_path(),
                      "--pod-resources-interval", "10000", "--proc-root", d + "/proc", "--container-log-dir",
                      d + "/containers", "--pod-log-dir", d + "/pods"},
                     {"KGPU_FAKE_NVML_CONFIG=" + node_path, "NODE_NAME=bench-node"}, d + "/agent.log");
  const int port = agent_port(d + "/agent.log");  // the agent binds port 0 and logs the port it got
  httplib::Client c("127.0.0.1", port);
  c.set_keep_alive(true);
  for (int i = 0; i < 200; ++i) {
    if (auto r = c.Get("/health"); r && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // a few samples, PodResources polled

  // CPU and memory at rest (only the 1 s sampler and the pollers run).
  const double cpu0 = cpu_seconds(agent.pid());
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds(agent.pid()) - cpu0;
  const long rss_idle = rss_kib(agent.pid());

  // Scrape latency, sequential, over a kept-alive connection (as Prometheus scrapes).
  std::vector<double> ms;
  size_t bytes = 0, series = 0;
  for (int i = 0; i < scrapes; ++i) {
    const auto a = std::chrono::steady_clock::now();
    auto r = c.Get("/metrics");
    const auto b = std::chrono::steady_clock::now();
    if (!r || r->status != 200) {
      std::fprintf(stderr, "scrape failed\n");
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    bytes = r->body.size();
    series = static_cast<size_t>(std::count(r->body.begin(), r->body.end(), '\n'));
  }
  std::sort(ms.begin(), ms.end());
  const long rss_after = rss_kib(agent.pid());
  auto pct = [&](double p) { return ms[static_cast<size_t>(p * (ms.size() - 1))]; };
  std::printf("node: 8x H100, 64 pods on time-slicing replicas (8 per GPU), collection interval 1 s\n");
  std::printf("page: %zu bytes, %zu lines\n", bytes, series);
  std::printf("scrape latency over %d scrapes: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", scrapes, pct(0.5), pct(0.99),
              ms.back());
  std::printf("agent RSS: %.1f MiB at rest, %.1f MiB after the scrapes\n", rss_idle / 1024.0, rss_after / 1024.0);
  std::printf("agent CPU at rest: %.3f%% of one core (%.3f s over %.1f s)\n", 100.0 * cpu / wall, cpu, wall);
  return 0;
}
