// The read model's cost on the extender's hot path (k8s/api/objects.h): one pod as kube-scheduler
// sends it, decoded the way each filter call did before (print the JSON, load the text into a
// Document, view it) and the way it does now (a Document built from the parsed JSON), then the
// whole PodObject (view, containers, effective requests, claims, quantity check).
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "k8s/api/document.h"
#include "k8s/api/objects.h"
#include "k8s/document.h"
#include "k8s/objects.h"

namespace {

using nlohmann::json;

json sample_pod() {
  return json::parse(R"({"metadata":{"name":"train-7f9c","namespace":"ml","uid":"a1b2c3d4-0000-4000-8000-000000000001",
  "resourceVersion":"200001","creationTimestamp":"2026-10-19T08:00:00Z",
  "labels":{"app":"train","pod-template-hash":"5d8f7c9b6","team":"vision"},
  "annotations":{"kubectl.kubernetes.io/restartedAt":"2026-10-19T07:59:00Z"},
  "ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"train","uid":"u-1","controller":true,"blockOwnerDeletion":true}]},
 "spec":{"schedulerName":"default-scheduler","restartPolicy":"Never","priorityClassName":"training",
  "nodeSelector":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3"},
  "affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
    {"matchExpressions":[{"key":"nvidia.com/gpu.count","operator":"Gt","values":["3"]}]}]}}},
  "tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"},
                 {"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],
  "initContainers":[{"name":"fetch","image":"busybox:1.36","command":["sh","-c","cp -r /data /work"],
    "resources":{"requests":{"cpu":"500m","memory":"512Mi"}}}],
  "containers":[{"name":"trainer","image":"nvcr.io/nvidia/pytorch:24.10-py3","command":["torchrun"],
    "args":["--nproc_per_node=4","train.py","--epochs=90"],
    "env":[{"name":"NCCL_DEBUG","value":"INFO"},{"name":"OMP_NUM_THREADS","value":"8"}],
    "resources":{"requests":{"cpu":"16","memory":"128Gi","nvidia.com/gpu":"4"},"limits":{"memory":"128Gi","nvidia.com/gpu":"4"}},
    "volumeMounts":[{"name":"shm","mountPath":"/dev/shm"},{"name":"data","mountPath":"/data"}],
    "terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],
  "volumes":[{"name":"shm","emptyDir":{"medium":"Memory","sizeLimit":"64Gi"}},
             {"name":"data","persistentVolumeClaim":{"claimName":"imagenet"}}]},
 "status":{"phase":"Pending","qosClass":"Burstable"}})");
}

void BM_PrintAndReparse(benchmark::State& state) {
  const json pod = sample_pod();
  for (auto _ : state) {
    json typed = pod;
    typed["apiVersion"] = "v1";
    typed["kind"] = "Pod";
    auto loaded = kgpu::k8s::load_text(typed.dump(), "pod ml/train-7f9c", kgpu::k8s::InputFormat::kJson);
    auto view = kgpu::k8s::as_pod(loaded.documents.front());
    benchmark::DoNotOptimize(view);
  }
}
BENCHMARK(BM_PrintAndReparse);

void BM_DocumentFromJson(benchmark::State& state) {
  const json pod = sample_pod();
  for (auto _ : state) {
    auto doc = kgpu::k8s::api::document_from_json(pod, "pod ml/train-7f9c", "Pod");
    auto view = kgpu::k8s::as_pod(*doc);
    benchmark::DoNotOptimize(view);
  }
}
BENCHMARK(BM_DocumentFromJson);

void BM_DecodePod(benchmark::State& state) {
  const json pod = sample_pod();
  for (auto _ : state) {
    auto p = kgpu::k8s::api::decode_pod(pod);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_DecodePod);

}  // namespace

BENCHMARK_MAIN();
