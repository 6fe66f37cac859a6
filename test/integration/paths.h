// Where the build put what tests run (the kgpu binary, the fakes, the API-server stand-in) and where
// the source tree is. The values are compiled into one unit only (paths.cc, given them by CMake), so
// every other test unit compiles the same in any checkout and the compiler cache shares it across
// folders. Each macro is an expression of type `const std::string&`, valid for the whole run.
#pragma once

#include <string>

namespace kgpu::testing::paths {

const std::string& source_dir();    // the source root
const std::string& kgpu_binary();   // the kgpu executable
const std::string& fake_nvml();     // tools/fake-nvml's libnvidia-ml.so.1
const std::string& minimal_nvml();  // an NVML exporting only a handful of symbols
const std::string& fake_dcgm();     // tools/fake-dcgm's libdcgm.so.4
const std::string& minimal_dcgm();  // an incomplete DCGM
const std::string& apiserver();     // tools/apiserver's kgpu-apiserver
const std::string& leader_child();  // the leader-election child of kube_tests
// kubectl from .tools/kube (scripts/fetch-kube-tools.sh); empty when it was not there at configure
// time, and tests that need it skip.
const std::string& kubectl();

}  // namespace kgpu::testing::paths

#define KGPU_SOURCE_DIR (::kgpu::testing::paths::source_dir())
#define KGPU_BINARY (::kgpu::testing::paths::kgpu_binary())
#define KGPU_FAKE_NVML (::kgpu::testing::paths::fake_nvml())
#define KGPU_MINIMAL_NVML (::kgpu::testing::paths::minimal_nvml())
#define KGPU_FAKE_DCGM (::kgpu::testing::paths::fake_dcgm())
#define KGPU_MINIMAL_DCGM (::kgpu::testing::paths::minimal_dcgm())
#define KGPU_APISERVER (::kgpu::testing::paths::apiserver())
#define KGPU_LEADER_CHILD (::kgpu::testing::paths::leader_child())
#define KGPU_KUBECTL (::kgpu::testing::paths::kubectl())
