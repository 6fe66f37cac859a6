// App layer: the workload's own container (CUDA newer than the driver, GPUs by hand, no GPU requested).
#include <fmt/format.h>

#include <array>
#include <span>

#include "doctor/diagnoser.h"
#include "lint/rules.h"

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
  const std::string l = ascii_lower(image);
  return contains_any(l, {"cuda", "nvcr.io", "vllm", "pytorch", "tensorflow", "-gpu", "tritonserver", "tgi",
                          "text-generation-inference"});
}

std::optional<Finding> Diagnoser::app(const PodObj& p, const std::optional<GpuRequest>& req) {
  if (!component(p).empty()) return std::nullopt;
  const auto logs = s_.logs_for(p.ns(), p.name());
  const auto owner = top_owner(s_, p);
  Finding f;
  f.object = pod_ref(p);
  for (const auto& c : p.v.spec.containers) {
    for (const auto& e : c.env) {
      if (e.name != "NVIDIA_VISIBLE_DEVICES" || !e.value) continue;
      const sv v = *e.value;
      if (v == "void" || v == "none" || v.empty()) continue;
      set_rule(f, RuleId::kAppVisibleDevicesByHand);
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
    set_rule(f, RuleId::kAppCudaNewerThanDriver);
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
  if (const auto* ready = k8s::find_condition(p.v.status.conditions, "Ready");
      ready == nullptr || ready->status != "True") {
    if (auto killed = probe_killed(p.ns(), p.name(), &p)) return killed;
  }
  if (!req && p.v.spec.resource_claims.empty()) {
    bool gpu_image = false;
    for (const auto& c : p.v.spec.containers) gpu_image = gpu_image || looks_gpu_image(*c.image);
    auto hit = find_in_logs(logs, kNoGpu);
    if (hit && gpu_image) {
      set_rule(f, RuleId::kAppNoGpuRequested);
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

namespace {

// Model servers, by image or program (as lint's GPU010 recognises them).
// What vLLM, TGI and Triton print while they download and load weights.
constexpr std::array<sv, 9> kLoadingWeights = {"Starting to load model",
                                               "Loading safetensors checkpoint shards",
                                               "Loading weights",
                                               "Loading model weights",
                                               "Download file:",
                                               "Starting shard",
                                               "Waiting for shard to be ready",
                                               "loading: ",
                                               "Capturing CUDA graph"};

// lint's list: one answer to "is this an inference server" in lint and doctor.
bool mentions_model_server(sv text) { return lint::names_inference_server(text); }

}  // namespace

std::optional<Finding> Diagnoser::probe_killed(sv ns, sv name, const PodObj* p) {
  // "Container vllm failed liveness probe, will be restarted" (reason Killing, from the kubelet).
  const Obj<k8s::Event>* kill = nullptr;
  for (const auto* e : s_.events_for("Pod", ns, name)) {
    if (e->v.reason == "Killing" && contains_any(e->v.message, {"failed liveness probe", "failed startup probe"})) {
      kill = e;
    }
  }
  if (kill == nullptr) return std::nullopt;
  const sv msg = kill->v.message;
  const bool startup = contains(msg, "failed startup probe");
  sv container;
  if (msg.starts_with("Container ")) container = msg.substr(10, msg.find(' ', 10) - 10);
  const k8s::Container* c = nullptr;
  if (p != nullptr) {
    for (const auto& k : p->v.spec.containers) {
      if (k.name == container) c = &k;
    }
  }
  // A model server: the container's image or program, an image the kubelet pulled for the pod, its
  // name, or its log.
  bool server = mentions_model_server(container);
  if (c != nullptr) {
    server = server || mentions_model_server(*c->image);
    const auto& program = c->command.empty() ? c->args : c->command;
    for (size_t i = 0; i < program.size() && i < 3; ++i) server = server || mentions_model_server(*program[i]);
  }
  for (const auto* e : s_.events_for("Pod", ns, name)) {
    if (e->v.reason == "Pulled" || e->v.reason == "Pulling") server = server || mentions_model_server(e->v.message);
  }
  std::vector<const ContainerLog*> logs;
  for (const auto* l : s_.logs_for(ns, name)) {
    if (container.empty() || l->container == container) logs.push_back(l);
  }
  const auto loading = find_in_logs(logs, std::span<const sv>(kLoadingWeights));
  if (!server && !loading) return std::nullopt;
  Finding f = make_finding(RuleId::kProbeKilledModelLoading, fmt::format("pod/{}/{}", ns, name));
  f.summary = fmt::format(
      "the kubelet kills container {} when its {} probe fails while the model server is still loading its "
      "weights: it restarts, loads again and never becomes ready",
      container.empty() ? sv("(unnamed)") : container, startup ? "startup" : "liveness");
  f.evidence.push_back(event_evidence(*kill));
  if (const auto* u =
          last_event(s_, "Pod", ns, name, "Unhealthy", startup ? "Startup probe failed" : "Liveness probe failed")) {
    f.evidence.push_back(event_evidence(*u));
  }
  if (loading) f.evidence.push_back(log_evidence(*loading));
  if (c != nullptr) {
    const auto& probe = startup ? c->startup_probe : c->liveness_probe;
    if (probe) {
      const int64_t delay = probe->initial_delay_seconds.value_or(0), period = probe->period_seconds.value_or(10),
                    failures = probe->failure_threshold.value_or(3);
      f.details.push_back(fmt::format(
          "{}Probe: initialDelaySeconds {}, periodSeconds {}, failureThreshold {}: the kubelet restarts the "
          "container after about {}s without an answer",
          startup ? "startup" : "liveness", delay, period, failures, delay + period * failures));
    }
    if (!c->startup_probe) {
      f.details.push_back("no startupProbe: the livenessProbe runs from the container's start, during the load");
    }
  }
  if (p != nullptr) {
    for (const auto& st : p->v.status.container_statuses) {
      if (st.name == container && st.restart_count > 0) {
        f.details.push_back(fmt::format("container {} restarted {} time(s)", container, st.restart_count));
      }
    }
  }
  f.fix.push_back(
      "add a startupProbe on the health endpoint sized for the model load (periodSeconds: 10, failureThreshold: "
      "60 = 10 minutes; more for large models or slow downloads): liveness and readiness probes start after it "
      "succeeds");
  f.fix.push_back("cache the weights on a persistent volume so that a restart does not download them again");
  f.fix.push_back(fmt::format("kubectl logs -n {} {}{} --previous --tail=50", ns, name,
                              container.empty() ? std::string() : fmt::format(" -c {}", container)));
  return f;
}

}  // namespace kgpu::doctor::detail
