#include "paths.h"

namespace kgpu::testing::paths {

#define KGPU_PATH(fn, value)         \
  const std::string& fn() {          \
    static const std::string v{value}; \
    return v;                        \
  }

KGPU_PATH(source_dir, KGPU_PATH_SOURCE_DIR)
KGPU_PATH(kgpu_binary, KGPU_PATH_BINARY)
KGPU_PATH(fake_nvml, KGPU_PATH_FAKE_NVML)
KGPU_PATH(minimal_nvml, KGPU_PATH_MINIMAL_NVML)
KGPU_PATH(fake_dcgm, KGPU_PATH_FAKE_DCGM)
KGPU_PATH(minimal_dcgm, KGPU_PATH_MINIMAL_DCGM)
KGPU_PATH(apiserver, KGPU_PATH_APISERVER)
KGPU_PATH(leader_child, KGPU_PATH_LEADER_CHILD)
KGPU_PATH(kubectl, KGPU_PATH_KUBECTL)

#undef KGPU_PATH

}  // namespace kgpu::testing::paths
