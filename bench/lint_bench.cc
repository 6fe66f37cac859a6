// `kgpu lint` over 1,000 generated manifests (a third each GPU Deployments with a vLLM server,
// GPU Jobs and GPU Pods, some broken so that rules fire): decode + lint from one in-memory
// stream, lint alone on decoded documents, and the CLI's path from 1,000 files in a directory.
// Target: under 1 s for the 1,000.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lint/lint.h"

namespace {

constexpr int kManifests = 1000;

std::string manifest(int i) {
  switch (i % 3) {
    case 0:
      return fmt::format(R"(apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-{0}
  namespace: team-{1}
  annotations:
    kgpu.io/lint-disable: "{2}"
spec:
  replicas: {3}
  selector:
    matchLabels: {{app: llm-{0}}}
  template:
    metadata:
      labels: {{app: llm-{0}}}
    spec:
      tolerations:
        - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
      volumes:
        - {{name: cache, persistentVolumeClaim: {{claimName: cache-{0}}}}}
        - {{name: shm, emptyDir: {{medium: Memory, sizeLimit: 2Gi}}}}
      containers:
        - name: vllm
          image: vllm/vllm-openai:{4}
          command: ["vllm", "serve"]
          args: ["Qwen/Qwen2.5-1.5B-Instruct", "--max-model-len", "8192"]
          env:
            - name: HF_TOKEN
              valueFrom: {{secretKeyRef: {{name: hf-token, key: token}}}}
          resources:
            limits: {{nvidia.com/gpu: {5}, cpu: "4", memory: 16Gi}}
            requests: {{cpu: "2", memory: 8Gi}}
          volumeMounts:
            - {{name: cache, mountPath: /root/.cache/huggingface}}
            - {{name: shm, mountPath: /dev/shm}}
          startupProbe:
            httpGet: {{path: /health, port: 8000}}
            periodSeconds: 10
            failureThreshold: {6}
)",
                         i, i % 17, i % 2 ? "GPU014" : "", 1 + i % 3, i % 5 ? "v0.32.0" : "latest", 1 + i % 2,
                         i % 4 ? 60 : 6);
    case 1:
      return fmt::format(R"(apiVersion: batch/v1
kind: Job
metadata:
  name: train-{0}
  namespace: team-{1}
spec:
  {2}: 86400
  template:
    spec:
      restartPolicy: Never
      tolerations: [{{operator: Exists}}]
      containers:
        - name: train
          image: nvcr.io/nvidia/pytorch:24.05-py3
          resources:
            limits:
              {3}: {4}
)",
                         i, i % 17, i % 4 ? "activeDeadlineSeconds" : "backoffLimit",
                         i % 7 ? "nvidia.com/gpu" : "nvidia.com/mig-1g10gb", i % 11 ? "8" : "0.5");
    default:
      return fmt::format(
          R"(apiVersion: v1
kind: Pod
metadata:
  name: smi-{0}
spec:
  restartPolicy: Never
  nodeSelector:
    nvidia.com/gpu.product: NVIDIA-L4
{1}  containers:
    - name: cuda
      image: nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04
      command: ["nvidia-smi"]
      env:
        - {{name: NVIDIA_DRIVER_CAPABILITIES, value: "compute,utility"}}
      resources:
        limits:
          nvidia.com/gpu: 1
          cpu: "2"
          memory: 4Gi
        requests:
          cpu: "1"
          memory: 2Gi
)",
          i, i % 2 ? "  tolerations:\n    - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n" : "");
  }
}

const std::string& stream() {
  static const std::string s = [] {
    std::string out;
    for (int i = 0; i < kManifests; ++i) out += (i > 0 ? "---\n" : "") + manifest(i);
    return out;
  }();
  return s;
}

void BM_LoadAndLintInMemory(benchmark::State& state) {
  size_t findings = 0;
  for (auto _ : state) {
    const kgpu::k8s::LoadResult loaded = kgpu::k8s::load_text(stream(), "bench.yaml");
    const auto f = kgpu::lint::lint(loaded.documents);
    findings = f.size();
    benchmark::DoNotOptimize(f);
  }
  state.counters["manifests"] = kManifests;
  state.counters["findings"] = static_cast<double>(findings);
}
BENCHMARK(BM_LoadAndLintInMemory)->Unit(benchmark::kMillisecond);

void BM_LintOnly(benchmark::State& state) {
  const kgpu::k8s::LoadResult loaded = kgpu::k8s::load_text(stream(), "bench.yaml");
  for (auto _ : state) {
    const auto f = kgpu::lint::lint(loaded.documents);
    benchmark::DoNotOptimize(f);
  }
  state.counters["manifests"] = kManifests;
}
BENCHMARK(BM_LintOnly)->Unit(benchmark::kMillisecond);

void BM_LintDirectoryOf1000Files(benchmark::State& state) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("kgpu-lint-bench-{}", static_cast<long>(::getpid()));
  std::filesystem::create_directories(dir);
  for (int i = 0; i < kManifests; ++i) std::ofstream(dir / fmt::format("m{:04}.yaml", i)) << manifest(i);
  size_t findings = 0;
  for (auto _ : state) {
    const kgpu::lint::Report r = kgpu::lint::lint_paths({dir.string()});
    findings = r.findings.size();
    if (!r.errors.empty()) state.SkipWithError(r.errors.front().to_string().c_str());
    benchmark::DoNotOptimize(r);
  }
  std::filesystem::remove_all(dir);
  state.counters["manifests"] = kManifests;
  state.counters["findings"] = static_cast<double>(findings);
}
BENCHMARK(BM_LintDirectoryOf1000Files)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
