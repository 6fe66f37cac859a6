#include "gpu/nvml/abi.h"

#include <cstring>

namespace kgpu::nvml {

namespace {

struct ReturnName {
  Return code;
  const char* name;
};

constexpr ReturnName kReturnNames[] = {
    {kSuccess, "SUCCESS"},
    {kErrorUninitialized, "UNINITIALIZED"},
    {kErrorInvalidArgument, "INVALID_ARGUMENT"},
    {kErrorNotSupported, "NOT_SUPPORTED"},
    {kErrorNoPermission, "NO_PERMISSION"},
    {kErrorAlreadyInitialized, "ALREADY_INITIALIZED"},
    {kErrorNotFound, "NOT_FOUND"},
    {kErrorInsufficientSize, "INSUFFICIENT_SIZE"},
    {kErrorInsufficientPower, "INSUFFICIENT_POWER"},
    {kErrorDriverNotLoaded, "DRIVER_NOT_LOADED"},
    {kErrorTimeout, "TIMEOUT"},
    {kErrorIrqIssue, "IRQ_ISSUE"},
    {kErrorLibraryNotFound, "LIBRARY_NOT_FOUND"},
    {kErrorFunctionNotFound, "FUNCTION_NOT_FOUND"},
    {kErrorCorruptedInforom, "CORRUPTED_INFOROM"},
    {kErrorGpuIsLost, "GPU_IS_LOST"},
    {kErrorResetRequired, "RESET_REQUIRED"},
    {kErrorOperatingSystem, "OPERATING_SYSTEM"},
    {kErrorLibRmVersionMismatch, "LIB_RM_VERSION_MISMATCH"},
    {kErrorInUse, "IN_USE"},
    {kErrorMemory, "MEMORY"},
    {kErrorNoData, "NO_DATA"},
    {kErrorVgpuEccNotEnabled, "VGPU_ECC_NOT_ENABLED"},
    {kErrorInsufficientResources, "INSUFFICIENT_RESOURCES"},
    {kErrorFreqNotSupported, "FREQ_NOT_SUPPORTED"},
    {kErrorArgumentVersionMismatch, "ARGUMENT_VERSION_MISMATCH"},
    {kErrorDeprecated, "DEPRECATED"},
    {kErrorNotReady, "NOT_READY"},
    {kErrorGpuNotFound, "GPU_NOT_FOUND"},
    {kErrorInvalidState, "INVALID_STATE"},
    {kErrorUnknown, "UNKNOWN"},
};

}  // namespace

const char* return_name(Return r) {
  for (const auto& e : kReturnNames) {
    if (e.code == r) return e.name;
  }
  return "UNKNOWN";
}

Return return_from_name(const char* name) {
  if (std::strncmp(name, "NVML_ERROR_", 11) == 0) name += 11;
  if (std::strcmp(name, "NVML_SUCCESS") == 0) return kSuccess;
  for (const auto& e : kReturnNames) {
    if (std::strcmp(e.name, name) == 0) return e.code;
  }
  return -1;
}

}  // namespace kgpu::nvml
