#include "node_fixture.h"

#include <algorithm>

namespace kgpu::testing::fixture {

namespace {}  // namespace

std::string node_yaml(const std::string& faults) {
  return std::string(
             "gpus:\n"
             "  - model: L4\n    uuid: ") +
         kGpu0 +
         "\n    telemetry: {gpuUtil: 40}\n"
         "  - model: L4\n    uuid: " +
         kGpu1 +
         "\n    telemetry: {gpuUtil: 80}\n"
         "    processes:\n"
         "      - {pid: 1001, usedMemoryMiB: 1000, smUtil: 30}\n"
         "      - {pid: 1002, usedMemoryMiB: 3000, smUtil: 50}\n"
         "      - {pid: 1003, usedMemoryMiB: 500, smUtil: 0}\n"
         "  - model: A100-SXM4-40GB\n    uuid: " +
         kGpu2 +
         "\n    mig: {instances: [{profile: 3g.20gb}, {profile: 3g.20gb}]}\n"
         "    processes: [{pid: 2001, usedMemoryMiB: 4000, gpuInstanceId: 1}]\n" +
         faults;
}

constexpr const char* kUidB = "b0b0b0b0-1111-2222-3333-444455556666";
constexpr const char* kUidC = "c0c0c0c0-1111-2222-3333-444455556666";
const std::string kCidB(64, 'b');
const std::string kCidC(64, 'c');

void fabricate_host(const TempDir& dir) {
  auto systemd = [](const char* uid, const std::string& cid) {
    std::string u = uid;
    std::replace(u.begin(), u.end(), '-', '_');
    return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u + ".slice/cri-containerd-" + cid +
           ".scope\n";
  };
  dir.write("proc/1001/cgroup", systemd(kUidB, kCidB));
  dir.write("proc/1002/cgroup", "12:memory:/kubepods/burstable/pod" + std::string(kUidC) + "/" + kCidC + "\n");
  dir.write("proc/1003/cgroup", "0::/system.slice/nvidia-persistenced.service\n");  // not a pod
  dir.write("containers/notebook-b_team-b_jupyter-" + kCidB + ".log", "");
  dir.write("containers/svc-c_team-c_server-" + kCidC + ".log", "");
  dir.write(std::string("pods/team-b_notebook-b_") + kUidB + "/jupyter/0.log", "");
  dir.write(std::string("pods/team-c_svc-c_") + kUidC + "/server/0.log", "");
}

std::vector<PeerPod> pods(const std::string& mig_uuid) {
  return {
      PeerPod{"team-a", "trainer-a", {{"main", "nvidia.com/gpu", {kGpu0}}}},
      PeerPod{"team-b", "notebook-b", {{"jupyter", "nvidia.com/gpu", {std::string(kGpu1) + "::0"}}}},
      PeerPod{"team-c", "svc-c", {{"server", "nvidia.com/gpu", {std::string(kGpu1) + "::3"}}}},
      PeerPod{"team-d", "infer-d", {{"model", "nvidia.com/mig-3g.20gb", {mig_uuid}}}},
      PeerPod{"kube-system", "other", {{"x", "example.com/fpga", {"fpga0"}}}},
  };
}

}  // namespace kgpu::testing::fixture
