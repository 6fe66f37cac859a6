#include "gpu/nvml/library.h"

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
  return SharedLibrary::candidates(flag_value, kLibraryEnv, {kDefaultLibrary}).front();
}

Result<std::unique_ptr<Library>> Library::open(const std::string& path) {
  auto so = SharedLibrary::open_first({path});
  if (!so)
    return fail(ErrorCode::kNotFound,
                "cannot load the NVML library '{}' ({}): no NVIDIA driver seems to be installed on this "
                "machine; install the driver, or point --nvml-library / {} at libnvidia-ml.so.1",
                path, so.error().message, kLibraryEnv);
  std::unique_ptr<Library> lib(new Library(std::move(*so)));
#define KGPU_NVML_RESOLVE(name, params)                                   \
  lib->sym_.name = reinterpret_cast<fn::name>(lib->so_.symbol(#name)); \
  if (lib->sym_.name == nullptr) ++lib->missing_;
  KGPU_NVML_FUNCTIONS(KGPU_NVML_RESOLVE)
#undef KGPU_NVML_RESOLVE
  lib->sym_.nvmlErrorString = reinterpret_cast<fn::nvmlErrorString>(lib->so_.symbol("nvmlErrorString"));
  return lib;
}

Library::~Library() {
  if (initialized_ && sym_.nvmlShutdown != nullptr) sym_.nvmlShutdown();
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
    return fail(ErrorCode::kNotSupported, "'{}' does not export nvmlInit_v2: not a usable NVML library", path());
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
                  what, path());
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
