// An NVML that exports only six functions, as a very old or stripped library might: every other
// symbol kgpu resolves is missing and must read as "not supported".
#include <cstring>

#include "gpu/nvml/abi.h"

using namespace kgpu::nvml;

namespace {
int dummy_device;
}

#define API extern "C" __attribute__((visibility("default")))

API Return nvmlInit_v2(void) { return kSuccess; }
API Return nvmlShutdown(void) { return kSuccess; }
API Return nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 1;
  return kSuccess;
}
API Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, Device* d) {
  if (index != 0) return kErrorInvalidArgument;
  *d = reinterpret_cast<Device>(&dummy_device);
  return kSuccess;
}
API Return nvmlDeviceGetName(Device, char* name, unsigned int length) {
  std::strncpy(name, "Minimal GPU", length);
  return kSuccess;
}
API Return nvmlDeviceGetUUID(Device, char* uuid, unsigned int length) {
  std::strncpy(uuid, "GPU-00000000-0000-0000-0000-000000000001", length);
  return kSuccess;
}
