// Validation before a GPU or a node takes work again (`kgpu validate`, and the remediation
// service's last step; docs/remediation.md, "Validation"). A chain of steps, each passed, failed
// (with what is wrong, naming the GPU or file) or skipped (with why):
//
//   driver        NVML loads and initialises, the driver version reads, <dev-root>/dev/nvidiactl exists
//   nvml          every GPU (or the one asked) answers as itself: not lost, no row remap pending or
//                 failed, no uncorrected volatile ECC error, no recovery action the driver asks for
//   device-plugin a kgpu device-plugin socket (nvidia-*.sock) in the plugin directory accepts a connection
//   cdi           the CDI spec <cdi-root>/k8s.device-plugin.nvidia.com-gpu.json parses and names every GPU
//   workload      (with API access and an image) a Job on this node asking one nvidia.com/gpu completes
//
// A step after a failed one still runs when it can (the report says everything that is wrong).
// Thread safety: plain functions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "gpu/node.h"

namespace kgpu::kube {
class Client;
}

namespace kgpu::agent {

// One GPU: the `nvml` step's rule (also the remediation service's validation).
Result<void> validate_gpu(const gpu::NodeGpus& node, unsigned index, const std::string& uuid);
// The CDI step's rule for the GPUs `uuids` (empty: any spec of the GPU class).
Result<void> validate_cdi(const std::string& cdi_root, const std::vector<std::string>& uuids);

struct ValidateOptions {
  std::string nvml_library;  // "" = the default search
  std::string dev_root = "/";
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";  // "" = skip the step
  std::string cdi_root = "/var/run/cdi";                       // "" = skip the step
  std::string gpu;  // an index or a UUID: that GPU alone ("" = every GPU)
  // The workload step: with a client and an image; the Job runs in `ns` on `node_name`.
  kube::Client* client = nullptr;
  std::string node_name, ns = "default", image;
  std::chrono::seconds workload_timeout{300};
};

enum class StepStatus { kPassed, kFailed, kSkipped };
const char* step_status_name(StepStatus s);  // "passed", "failed", "skipped"

struct StepResult {
  std::string name;
  StepStatus status = StepStatus::kSkipped;
  std::string detail;
};

struct ValidationReport {
  std::vector<StepResult> steps;
  bool passed() const;
  std::string text() const;  // one line per step
  std::string json() const;
};

ValidationReport validate_node(const ValidateOptions& options);

}  // namespace kgpu::agent
