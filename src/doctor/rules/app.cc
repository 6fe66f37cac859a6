// App layer: the workload's own container (CUDA newer than the driver, GPUs by hand, no GPU requested).
#include <fmt/format.h>

#include <array>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

constexpr std::array<sv, 5> kCudaTooNew = {
    "CUDA driver version is insufficient for CUDA runtime version", "The NVIDIA driver on your system is too old",
    "cudaErrorInsufficientDriver",
    "unsatisfied condition: cuda>=", "forward compatibility was attempted on non supported HW"};
constexpr std::array<sv, 10> kNoGpu = {"Found no NVIDIA driver on your system",
                                       "No CUDA GPUs are available",
                                       "nvidia-smi: not found",
                                       "nvidia-smi: command not found",
                                       "executable file not found in $PATH: \"nvidia-smi\"",
                                       "couldn't communicate with the NVIDIA driver",
                                       "Could not find cuda drivers on your machine",
                                       "torch.cuda.is_available() = False",
                                       "no CUDA-capable device is detected",
                                       "CUDA available: False"};

bool looks_gpu_image(sv image) {
  const std::string l = lower(image);
  return contains_any(l, {"cuda", "nvcr.io", "vllm", "pytorch", "tensorflow", "-gpu", "tritonserver", "tgi",
                          "text-generation-inference"});
}

std::optional<Finding> Diagnoser::app(const PodObj& p, const std::optional<GpuRequest>& req) {
  if (!component(p).empty()) return std::nullopt;
  const auto logs = s_.logs_for(p.ns(), p.name());
  const auto owner = top_owner(s_, p);
  Finding f;
  f.layer = Layer::kApp;
  f.object = pod_ref(p);
  for (const auto& c : p.v.spec.containers) {
    for (const auto& e : c.env) {
      if (e.name != "NVIDIA_VISIBLE_DEVICES" || !e.value) continue;
      const sv v = *e.value;
      if (v == "void" || v == "none" || v.empty()) continue;
      f.rule = "app-visible-devices-by-hand";
      f.severity = Severity::kCritical;
      f.summary = req ? fmt::format(
                            "container {} sets NVIDIA_VISIBLE_DEVICES={} by hand: it can see GPUs other than "
                            "the one the device plugin allocated to it",
                            c.name, v)
                      : fmt::format(
                            "container {} sets NVIDIA_VISIBLE_DEVICES={} by hand instead of requesting "
                            "nvidia.com/gpu: the scheduler does not count it and it shares GPUs with pods "
                            "that were allocated them",
                            c.name, v);
      f.evidence.push_back(
          Evidence{fmt::format("{} .spec.containers[{}].env at {}", pod_ref(p), c.name, p.doc->where(e.line)),
                   fmt::format("NVIDIA_VISIBLE_DEVICES={}", v)});
      if (auto hit = find_in_logs(logs, kNoGpu)) f.evidence.push_back(log_evidence(*hit));
      f.fix.push_back(
          fmt::format("remove env NVIDIA_VISIBLE_DEVICES from container {} and set resources.limits "
                      "nvidia.com/gpu: 1",
                      c.name));
      f.fix.push_back(patch_command(owner, p.ns(),
                                    fmt::format("{{\"containers\":[{{\"name\":\"{}\",\"env\":[{{\"name\":"
                                                "\"NVIDIA_VISIBLE_DEVICES\",\"$patch\":\"delete\"}}],\"resources\":{{"
                                                "\"limits\":{{\"nvidia.com/gpu\":1}}}}}}]}}",
                                                c.name)));
      if (owner.first != "Pod") {
        f.fix.back().replace(f.fix.back().find("--type merge"), 12, "--type strategic");
      }
      return f;
    }
  }
  if (auto hit = find_in_logs(logs, kCudaTooNew)) {
    f.rule = "app-cuda-newer-than-driver";
    f.severity = Severity::kCritical;
    const sv node_name = *p.v.spec.node_name;
    f.summary = fmt::format("the container's CUDA is newer than the driver on {} supports", node_name);
    f.evidence.push_back(log_evidence(*hit));
    if (const NodeObj* node = s_.node(node_name)) {
      sv major = label(node->doc, "nvidia.com/cuda.driver-version.major");
      sv minor = label(node->doc, "nvidia.com/cuda.driver-version.minor");
      if (major.empty()) major = label(node->doc, "nvidia.com/cuda.driver.major");
      if (minor.empty()) minor = label(node->doc, "nvidia.com/cuda.driver.minor");
      sv drv = label(node->doc, "nvidia.com/cuda.driver-version.full");
      if (!major.empty()) {
        f.evidence.push_back(
            Evidence{fmt::format("node/{} labels at {}", node_name, node->doc->where(node->doc->metadata.labels_line)),
                     fmt::format("nvidia.com/cuda.driver-version: {}.{}{}", major, minor,
                                 drv.empty() ? "" : fmt::format(" (driver {})", drv))});
      }
    }
    for (const auto& c : p.v.spec.containers) f.details.push_back(fmt::format("image {}: {}", c.name, *c.image));
    f.fix.push_back(fmt::format("kubectl exec -n {} {} -- nvidia-smi  # compare 'CUDA Version' with the image's CUDA",
                                p.ns(), p.name()));
    f.fix.push_back("use an image built for the node's CUDA version, or upgrade the driver on the node pool");
    return f;
  }
  if (!req && p.v.spec.resource_claims.empty()) {
    bool gpu_image = false;
    for (const auto& c : p.v.spec.containers) gpu_image = gpu_image || looks_gpu_image(*c.image);
    auto hit = find_in_logs(logs, kNoGpu);
    if (hit && gpu_image) {
      f.rule = "app-no-gpu-requested";
      f.severity = Severity::kWarning;
      f.summary = "the pod runs a GPU image but requests no nvidia.com/gpu, so no GPU is mounted into it";
      f.evidence.push_back(log_evidence(*hit));
      const auto* c = &p.v.spec.containers.front();
      f.evidence.push_back(
          Evidence{fmt::format("{} .spec.containers[{}].resources at {}", pod_ref(p), c->name,
                               p.doc->where(c->resources.line ? c->resources.line : c->line)),
                   c->resources.limits.empty() ? "no resources.limits" : "no nvidia.com/gpu in resources.limits"});
      f.fix.push_back(patch_command(owner, p.ns(),
                                    fmt::format("{{\"containers\":[{{\"name\":\"{}\",\"resources\":{{\"limits\":{{"
                                                "\"nvidia.com/gpu\":1}}}}}}]}}",
                                                c->name)));
      if (owner.first != "Pod") f.fix.back().replace(f.fix.back().find("--type merge"), 12, "--type strategic");
      return f;
    }
  }
  return std::nullopt;
}

}  // namespace kgpu::doctor::detail
