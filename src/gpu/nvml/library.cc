#include "gpu/nvml/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace kgpu::nvml {

ErrorCode error_code_for(Return r) {
  switch (r) {
    case kErrorNotSupported:
    case kErrorFunctionNotFound:
      return ErrorCode::kNotSupported;
    case kErrorNoPermission:
      return ErrorCode::kPermissionDenied;
    case kErrorNotFound:
    case kErrorLibraryNotFound:
    case kErrorGpuNotFound:
      return ErrorCode::kNotFound;
    case kErrorGpuIsLost:
    case kErrorResetRequired:
      return ErrorCode::kGpuLost;
    case kErrorInvalidArgument:
    case kErrorArgumentVersionMismatch:
      return ErrorCode::kInvalidArgument;
    case kErrorDriverNotLoaded:
    case kErrorLibRmVersionMismatch:
    case kErrorTimeout:
    case kErrorUninitialized:
    case kErrorNotReady:
      return ErrorCode::kUnavailable;
    default:
      return ErrorCode::kInternal;
  }
}

std::string resolve_library_path(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv(kLibraryEnv); env != nullptr && *env != '\0') return env;
  return kDefaultLibrary;
}

Result<std::unique_ptr<Library>> Library::open(const std::string& path) {
  dlerror();
  // RTLD_NODELETE: the driver's library is never unmapped, even after a failed init: its
  // thread-local storage and any threads it started must not outlive their code.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail(ErrorCode::kNotFound,
                "cannot load the NVML library '{}' ({}): no NVIDIA driver seems to be installed on this "
                "machine; install the driver, or point --nvml-library / {} at libnvidia-ml.so.1",
                path, why != nullptr ? why : "unknown reason", kLibraryEnv);
  }
  std::unique_ptr<Library> lib(new Library());
  lib->handle_ = handle;
  lib->path_ = path;
#define KGPU_NVML_RESOLVE(name, params)                              \
  lib->sym_.name = reinterpret_cast<fn::name>(dlsym(handle, #name)); \
  if (lib->sym_.name == nullptr) ++lib->missing_;
  KGPU_NVML_FUNCTIONS(KGPU_NVML_RESOLVE)
#undef KGPU_NVML_RESOLVE
  lib->sym_.nvmlErrorString = reinterpret_cast<fn::nvmlErrorString>(dlsym(handle, "nvmlErrorString"));
  return lib;
}

Library::~Library() {
  if (initialized_ && sym_.nvmlShutdown != nullptr) sym_.nvmlShutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

std::string Library::error_string(Return r) const {
  std::string name = return_name(r);
  if (sym_.nvmlErrorString != nullptr) {
    if (const char* text = sym_.nvmlErrorString(r); text != nullptr && *text != '\0') {
      return std::string(text) + " (" + name + ")";
    }
  }
  return name;
}

Result<void> Library::init() {
  if (sym_.nvmlInit_v2 == nullptr) {
    return fail(ErrorCode::kNotSupported, "'{}' does not export nvmlInit_v2: not a usable NVML library", path_);
  }
  const Return r = sym_.nvmlInit_v2();
  if (r == kSuccess) {
    initialized_ = true;
    return {};
  }
  const std::string what = error_string(r);
  switch (r) {
    case kErrorDriverNotLoaded:
      return fail(ErrorCode::kUnavailable,
                  "failed to initialize NVML: {}: the NVIDIA kernel driver is not loaded; check `lsmod | grep "
                  "nvidia` and the driver installation (dmesg, the driver pod's logs)",
                  what);
    case kErrorLibRmVersionMismatch:
      return fail(ErrorCode::kUnavailable,
                  "failed to initialize NVML: {}: Driver/library version mismatch: the user-space library ({}) "
                  "and the loaded kernel module are different versions; reboot the node or reload the "
                  "nvidia kernel modules after a driver upgrade",
                  what, path_);
    case kErrorNoPermission:
      return fail(ErrorCode::kPermissionDenied,
                  "failed to initialize NVML: {}: no permission to open /dev/nvidia*; run as root or give the "
                  "container access to the NVIDIA device nodes",
                  what);
    case kErrorLibraryNotFound:
      return fail(ErrorCode::kNotFound, "failed to initialize NVML: {}: the driver's libraries are incomplete", what);
    default:
      return fail(error_code_for(r), "failed to initialize NVML: {}", what);
  }
}

}  // namespace kgpu::nvml
