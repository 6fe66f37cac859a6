// `kgpu doctor` at scale: generates a 5,000-node, 100,000-pod snapshot (kubectl List JSON, ~1.5 KB
// per pod, 8-GPU nodes with operator pods, Running/Succeeded/Pending GPU pods with their events),
// then loads and diagnoses the whole cluster (checklist included) as `kgpu doctor --snapshot` does,
// reporting wall time per phase and peak RSS (getrusage ru_maxrss). Targets: < 3 s, < 2 GiB.
//
// The measured part runs in a fresh process (this binary re-executed with --load FILE), so that the
// generator's buffers are not in its peak RSS.
//
// Usage: doctor_bench [nodes] [pods] [pending]
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "doctor/diagnose.h"
#include "doctor/snapshot.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

long peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

void node_json(std::string& out, int i) {
  const bool cpu_node = i % 10 == 9;
  out += fmt::format(
      R"({{"apiVersion":"v1","kind":"Node","metadata":{{"name":"node-{0}","uid":"6f1c{0:08d}-0000-4000-8000-000000000000","resourceVersion":"{1}","creationTimestamp":"2026-09-15T07:12:44Z","labels":{{"kubernetes.io/arch":"amd64","kubernetes.io/hostname":"node-{0}","kubernetes.io/os":"linux","node.kubernetes.io/instance-type":"{2}","topology.kubernetes.io/zone":"us-east-1{3}")",
      i, 100000 + i, cpu_node ? "m6i.8xlarge" : "p5.48xlarge", static_cast<char>('a' + i % 4));
  if (!cpu_node) {
    out +=
        R"(,"nvidia.com/gpu.present":"true","nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","nvidia.com/gpu.count":"8","nvidia.com/gpu.memory":"81559","nvidia.com/cuda.driver-version.major":"12","nvidia.com/cuda.driver-version.minor":"8","feature.node.kubernetes.io/pci-10de.present":"true")";
  }
  out += R"(}},"spec":{"providerID":"aws:///us-east-1a/i-0123456789abcdef0")";
  if (!cpu_node) out += R"(,"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}])";
  out += R"(},"status":{"capacity":{"cpu":"192","memory":"2097152Mi","pods":"110","ephemeral-storage":"203070420Ki")";
  if (!cpu_node) out += R"(,"nvidia.com/gpu":"8")";
  out += R"(},"allocatable":{"cpu":"191450m","memory":"2000000Mi","pods":"110","ephemeral-storage":"186053255035")";
  if (!cpu_node) out += R"(,"nvidia.com/gpu":"8")";
  out +=
      R"(},"conditions":[{"type":"MemoryPressure","status":"False","reason":"KubeletHasSufficientMemory","message":"kubelet has sufficient memory available","lastTransitionTime":"2026-09-15T07:13:10Z"},{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastTransitionTime":"2026-09-15T07:14:02Z"}],"nodeInfo":{"architecture":"amd64","containerRuntimeVersion":"containerd://2.1.4","kernelVersion":"6.8.0-1019-aws","kubeletVersion":"v1.37.1","operatingSystem":"linux","osImage":"Ubuntu 24.04.3 LTS"}}})";
}

// kind: 0 running GPU pod, 1 succeeded GPU job pod, 2 pending GPU pod, 3 CPU pod.
void pod_json(std::string& out, int i, int kind, int node) {
  const std::string ns = fmt::format("team-{}", i % 40);
  const int gpus = kind == 3 ? 0 : 1 << (i % 3);  // 1, 2, 4
  out += fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"work-{0}","namespace":"{1}","uid":"a1b2{0:08d}-0000-4000-8000-000000000000","resourceVersion":"{2}","creationTimestamp":"2026-10-19T0{3}:00:00Z","labels":{{"app":"work-{4}","pod-template-hash":"5d8f7c9b6"}},"ownerReferences":[{{"apiVersion":"batch/v1","kind":"Job","name":"job-{4}","uid":"c3d4{0:08d}-0000-4000-8000-000000000000","controller":true,"blockOwnerDeletion":true}}]}},"spec":{{"containers":[{{"name":"main","image":"nvcr.io/nvidia/pytorch:25.01-py3","command":["python","train.py"],"resources":{{"requests":{{"cpu":"4","memory":"16Gi")",
      i, ns, 200000 + i, i % 10, i / 4);
  if (gpus > 0)
    out += fmt::format(R"(,"nvidia.com/gpu":"{0}"}},"limits":{{"nvidia.com/gpu":"{0}"}})", gpus);
  else
    out += "}";
  out +=
      R"(},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Never","schedulerName":"default-scheduler","tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"},{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}])";
  if (kind != 2) out += fmt::format(R"(,"nodeName":"node-{}")", node);
  if (kind == 2) out += R"(,"nodeSelector":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3"})";
  out += "},\"status\":{";
  if (kind == 2) {
    out +=
        R"("phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/5000 nodes are available: 4500 Insufficient nvidia.com/gpu, 500 node(s) didn't match Pod's node affinity/selector.","lastTransitionTime":"2026-10-20T09:10:00Z"}]}})";
    return;
  }
  const char* phase = kind == 1 ? "Succeeded" : "Running";
  out += fmt::format(
      R"("phase":"{0}","hostIP":"10.0.{1}.{2}","podIP":"192.168.{1}.{2}","startTime":"2026-10-19T08:00:00Z","conditions":[{{"type":"Ready","status":"{3}","lastTransitionTime":"2026-10-19T08:01:00Z"}},{{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-10-19T08:00:00Z"}}],"containerStatuses":[{{"name":"main","image":"nvcr.io/nvidia/pytorch:25.01-py3","imageID":"nvcr.io/nvidia/pytorch@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","containerID":"containerd://fedcba9876543210fedcba9876543210","ready":{4},"restartCount":0,"state":{5}}}]}}}})",
      phase, node % 250, i % 250, kind == 1 ? "False" : "True", kind == 1 ? "false" : "true",
      kind == 1
          ? R"({"terminated":{"exitCode":0,"reason":"Completed","startedAt":"2026-10-19T08:00:30Z","finishedAt":"2026-10-19T09:00:00Z"}})"
          : R"({"running":{"startedAt":"2026-10-19T08:00:30Z"}})");
}

}  // namespace

int measure(const std::string& path) {
  auto t = Clock::now();
  auto snap = kgpu::doctor::Snapshot::load({path});
  if (!snap) {
    fmt::print(stderr, "load: {}\n", snap.error().message);
    return 1;
  }
  const double load_s = seconds_since(t);
  t = Clock::now();
  auto findings = kgpu::doctor::diagnose(*snap, kgpu::doctor::Options{});
  const double diag_s = seconds_since(t);
  if (!findings) return 1;
  size_t critical = 0;
  for (const auto& f : *findings) critical += f.severity == kgpu::doctor::Severity::kCritical;
  fmt::print("snapshot: {} nodes, {} pods\n", snap->nodes.size(), snap->pods.size());
  fmt::print("load + decode + index: {:.3f} s\n", load_s);
  fmt::print("diagnose (cluster, checklist): {:.3f} s -> {} findings ({} critical)\n", diag_s, findings->size(),
             critical);
  fmt::print("doctor total: {:.3f} s (target < 3 s)\n", load_s + diag_s);
  fmt::print("peak RSS: {:.0f} MiB (target < 2048 MiB)\n", static_cast<double>(peak_rss_kib()) / 1024);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--load") return measure(argv[2]);
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 5000;
  const int pods = argc > 2 ? std::atoi(argv[2]) : 100000;
  const int pending = argc > 3 ? std::atoi(argv[3]) : 200;
  auto t = Clock::now();
  std::string json;
  json.reserve(static_cast<size_t>(pods) * 1700 + static_cast<size_t>(nodes) * 2000);
  json += R"({"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[)";
  json +=
      R"({"apiVersion":"kgpu.io/v1","kind":"SnapshotInfo","metadata":{"name":"snapshot"},"collectedAt":"2026-10-20T10:00:00Z","errors":[]})";
  for (int i = 0; i < nodes; ++i) {
    json += ',';
    node_json(json, i);
  }
  // GPU nodes get GPU pods until their 8 GPUs are full; every 10th node is a CPU node.
  std::vector<int> free(static_cast<size_t>(nodes), 8);
  int gpu_cursor = 0, cpu_cursor = 9;
  for (int i = 0; i < pods; ++i) {
    int kind = i < pending ? 2 : (i % 5 == 0 ? 3 : (i % 7 == 0 ? 1 : 0));
    int node = 0;
    if (kind == 3) {
      node = cpu_cursor;
      cpu_cursor = (cpu_cursor + 10) % nodes;
      if (cpu_cursor % 10 != 9) cpu_cursor = 9;
    } else if (kind != 2) {
      const int gpus = 1 << (i % 3);
      int tries = 0;
      while ((gpu_cursor % 10 == 9 || free[static_cast<size_t>(gpu_cursor)] < gpus) && tries++ < nodes) {
        gpu_cursor = (gpu_cursor + 1) % nodes;
      }
      node = gpu_cursor;
      if (kind == 0 && free[static_cast<size_t>(node)] >= gpus) free[static_cast<size_t>(node)] -= gpus;
    }
    json += ',';
    pod_json(json, i, kind, node);
  }
  json += "]}\n";
  const auto path = std::filesystem::temp_directory_path() / fmt::format("kgpu-doctor-bench-{}.json", getpid());
  {
    std::ofstream out(path, std::ios::binary);
    out << json;
  }
  fmt::print("generated {:.1f} MB JSON ({} nodes, {} pods, {} pending GPU pods) in {:.2f} s\n",
             static_cast<double>(json.size()) / 1e6, nodes, pods, pending, seconds_since(t));
  std::fflush(stdout);
  json = std::string();
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], "--load", path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::filesystem::remove(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
