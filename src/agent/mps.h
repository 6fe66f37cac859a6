// MPS control daemons for MPS-shared resources: one nvidia-cuda-mps-control daemon per resource,
// with its pipe and log directories under <mpsRoot>/<resource>/, limited to the resource's GPUs,
// and each GPU's client limits set from the replica count:
//   set_default_device_pinned_mem_limit <i> <total/replicas>M
//   set_default_active_thread_percentage <100/replicas>
// (<i> is the GPU's position in the daemon's CUDA_VISIBLE_DEVICES).
//
// Thread safety: calls come from the device-plugin manager's control thread only.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "sharing/plan.h"

namespace kgpu::agent {

class MpsControl {
 public:
  virtual ~MpsControl() = default;
  // Starts the daemon for `resource` if needed and sets its limits (new limits apply to clients
  // that start afterwards). Errors say what is missing.
  virtual Result<void> apply(const std::string& mps_root, const sharing::PlannedResource& resource) = 0;
  // Stops the daemon of a resource that is no longer MPS-shared (no-op if none). Not called when
  // the agent stops: running MPS clients keep their daemon.
  virtual void remove(const std::string& mps_root, const std::string& resource) = 0;
};

// The commands sent to a resource's control daemon, one per line (tests and docs).
std::vector<std::string> mps_commands(const sharing::PlannedResource& resource);

// Runs `program` (default: nvidia-cuda-mps-control found on PATH). When it is not installed,
// apply() fails with kNotFound and a message saying the limits are not enforced.
class RealMpsControl : public MpsControl {
 public:
  explicit RealMpsControl(std::string program = "nvidia-cuda-mps-control") : program_(std::move(program)) {}
  Result<void> apply(const std::string& mps_root, const sharing::PlannedResource& resource) override;
  void remove(const std::string& mps_root, const std::string& resource) override;

 private:
  Result<void> run(const std::map<std::string, std::string>& env, const std::vector<std::string>& args,
                   const std::string& input);
  std::string program_;
  std::map<std::string, std::string> applied_;  // resource -> the commands last applied
  std::set<std::string> started_;               // resources whose daemon we started
};

}  // namespace kgpu::agent
