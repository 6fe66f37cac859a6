// A deliberately incomplete DCGM: exports only initialisation (missing-symbol handling).
#include "gpu/dcgm/abi.h"

#define MINIMAL_API extern "C" __attribute__((visibility("default")))

MINIMAL_API kgpu::dcgm::Return dcgmInit() { return kgpu::dcgm::kOk; }
MINIMAL_API kgpu::dcgm::Return dcgmShutdown() { return kgpu::dcgm::kOk; }
MINIMAL_API const char* errorString(kgpu::dcgm::Return r) { return kgpu::dcgm::return_name(r); }
