// The GPU guide's rules as predicates over the typed views of k8s/objects.h: what `kgpu lint`
// checks in manifests and `kgpu doctor` checks in a cluster snapshot, from one implementation, so
// that both give the same answer on the same object (docs/lint.md describes each rule).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "k8s/objects.h"

namespace kgpu::lint {

// GPU001/GPU002/GPU014...: the container asks for a non-zero quantity of any nvidia.com/ resource
// (k8s::is_nvidia_resource) in its limits or requests.
bool requests_gpus(const k8s::Container& c);
// The pod requests GPUs (requests_gpus) or claims devices through DRA (resourceClaims).
bool uses_gpus(const k8s::PodSpec& spec);
// Touches GPUs in any way: uses_gpus, mounts /dev/nvidia* device nodes or sets
// NVIDIA_VISIBLE_DEVICES by hand.
bool gpu_related(const k8s::PodSpec& spec);

// GPU010-GPU012, GPU015: the container runs an LLM inference server (vLLM, TGI, Triton, SGLang),
// named by its image or by the first words of its command (or args when there is no command).
// Whether `text` (an image, a program, a container name, an event message) names an inference
// server: vLLM, TGI (text-generation-inference), Triton, SGLang.
bool names_inference_server(std::string_view text);
bool is_inference_server(const k8s::Container& c);
bool has_inference_server(const k8s::PodSpec& spec);

// GPU014: the image names a digest (@...) or a tag other than latest.
bool image_pinned(std::string_view image);

// GPU010: the seconds a startup probe gives a container to start: initialDelaySeconds +
// periodSeconds x failureThreshold with the API's defaults (0, 10, 3), saturating at INT64_MAX.
int64_t startup_budget_s(const k8s::Probe& p);
// GPU010's verdict on an inference server container: it has a startup probe whose budget is at
// least `min_budget_s` (Options::min_startup_budget_s; 300 by default).
bool startup_probe_sufficient(const k8s::Container& c, int min_budget_s);

// GPU015: the metric scales on CPU or memory (a Resource or ContainerResource metric of either).
bool is_cpu_or_memory_metric(const k8s::MetricSpec& m);
// GPU015's verdict on an HPA of an inference server: it scales on CPU or memory, or on the
// default metric (no metrics: 80% CPU).
bool scales_on_cpu_or_memory(const k8s::HorizontalPodAutoscaler& hpa);

// GPU003: the name `name` was probably meant to be, when it looks like a misspelled NVIDIA GPU
// resource; nullopt for valid names and names that look like something else.
std::optional<std::string> misspelled_gpu_resource(std::string_view name);

}  // namespace kgpu::lint
