#include "gpu/dcgm/abi.h"

#include <cstdio>
#include <cstring>

namespace kgpu::dcgm {

namespace {

struct ReturnName {
  Return code;
  const char* name;
};

constexpr ReturnName kReturnNames[] = {
    {kOk, "OK"},
    {kBadParam, "BADPARAM"},
    {kGenericError, "GENERIC_ERROR"},
    {kMemory, "MEMORY"},
    {kNotConfigured, "NOT_CONFIGURED"},
    {kNotSupported, "NOT_SUPPORTED"},
    {kInitError, "INIT_ERROR"},
    {kNvmlError, "NVML_ERROR"},
    {kUninitialized, "UNINITIALIZED"},
    {kTimeout, "TIMEOUT"},
    {kVersionMismatch, "VER_MISMATCH"},
    {kUnknownField, "UNKNOWN_FIELD"},
    {kNoData, "NO_DATA"},
    {kStaleData, "STALE_DATA"},
    {kNotWatched, "NOT_WATCHED"},
    {kNoPermission, "NO_PERMISSION"},
    {kGpuIsLost, "GPU_IS_LOST"},
    {kResetRequired, "RESET_REQUIRED"},
    {kFunctionNotFound, "FUNCTION_NOT_FOUND"},
    {kConnectionNotValid, "CONNECTION_NOT_VALID"},
    {kGpuNotSupported, "GPU_NOT_SUPPORTED"},
    {kMaxLimit, "MAX_LIMIT"},
    {kLibraryNotFound, "LIBRARY_NOT_FOUND"},
    {kRequiresRoot, "REQUIRES_ROOT"},
    {kModuleNotLoaded, "MODULE_NOT_LOADED"},
    {kInUse, "IN_USE"},
    {kGroupIsEmpty, "GROUP_IS_EMPTY"},
    {kProfilingNotSupported, "PROFILING_NOT_SUPPORTED"},
    {kProfilingLibraryError, "PROFILING_LIBRARY_ERROR"},
    {kProfilingMultiPass, "PROFILING_MULTI_PASS"},
    {kInsufficientDriverVersion, "INSUFFICIENT_DRIVER_VERSION"},
    {kNvmlNotLoaded, "NVML_NOT_LOADED"},
    {kNvmlDriverTimeout, "NVML_DRIVER_TIMEOUT"},
};

}  // namespace

const char* return_name(Return r) {
  for (const auto& n : kReturnNames) {
    if (n.code == r) return n.name;
  }
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "STATUS_%d", r);
  return buf;
}

std::optional<Return> return_from_name(std::string_view name) {
  if (name.starts_with("DCGM_ST_")) name.remove_prefix(8);
  for (const auto& n : kReturnNames) {
    if (name == n.name) return n.code;
  }
  return std::nullopt;
}

const char* profiling_field_name(unsigned short id) {
  for (const auto& f : kProfilingFields) {
    if (f.id == id) return f.name;
  }
  return nullptr;
}

unsigned short profiling_field_id(const char* name) {
  for (const auto& f : kProfilingFields) {
    if (std::strcmp(f.name, name) == 0) return f.id;
  }
  return 0;
}

}  // namespace kgpu::dcgm
