// A small GPU node and host shared by the exporter tests: two L4s (one held by one container,
// one shared by two containers through time-slicing replicas) and an A100 with two MIG
// instances, plus a fabricated /proc and kubelet log tree that names the sharing containers.
#pragma once

#include <string>
#include <vector>

#include "../peers/kubelet_peer.h"
#include "test_env.h"

namespace kgpu::testing::fixture {

inline constexpr const char* kGpu0 = "GPU-00000000-0000-0000-0000-0000000000a0";
inline constexpr const char* kGpu1 = "GPU-00000000-0000-0000-0000-0000000000a1";
inline constexpr const char* kGpu2 = "GPU-00000000-0000-0000-0000-0000000000a2";

// The fake node description; `faults` is appended verbatim.
std::string node_yaml(const std::string& faults = "");

// Writes proc/<pid>/cgroup, containers/ and pods/ under `dir`.
void fabricate_host(const TempDir& dir);

// The kubelet's view: trainer-a holds GPU 0, notebook-b and svc-c share GPU 1, infer-d holds the
// first MIG instance (`mig_uuid`), and one non-GPU device.
std::vector<PeerPod> pods(const std::string& mig_uuid);

}  // namespace kgpu::testing::fixture
